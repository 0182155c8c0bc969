package eventlog

import (
	"errors"
	"fmt"
	"io"
	"path/filepath"

	"github.com/aerie-mq/aerie/internal/vfs"
)

// Recovery describes what Open repaired.
type Recovery struct {
	// TornTail is true if the last segment ended in an incomplete or
	// invalid frame left by a crash, which was truncated away.
	TornTail bool
	// TruncatedBytes is how many bytes were cut.
	TruncatedBytes int64
	// Segment is the path of the truncated segment file.
	Segment string
	// Offset is the byte offset at which it was truncated (its new size).
	Offset int64
}

// Open opens the log in dir, creating dir and an empty log if needed. It
// checks every frame of every segment (of the last one only with
// Options.LazySealed) and repairs a torn tail (see the package
// documentation); corruption anywhere else is refused with an error
// wrapping ErrCorrupt. Before returning it fsyncs the last segment
// and the directory, so every record the returned Log holds is durable
// (DurableIndex == NextIndex), even records a failed Sync left behind.
func Open(fsys vfs.FS, dir string, opts Options) (*Log, Recovery, error) {
	opts, err := opts.withDefaults()
	if err != nil {
		return nil, Recovery{}, err
	}
	if err := fsys.MkdirAll(dir); err != nil {
		return nil, Recovery{}, fmt.Errorf("eventlog: create dir: %w", err)
	}
	names, err := fsys.ReadDir(dir)
	if err != nil {
		return nil, Recovery{}, fmt.Errorf("eventlog: list dir: %w", err)
	}
	var segs []segment
	for _, name := range names {
		if base, ok := parseSegmentName(name); ok {
			segs = append(segs, newSegment(dir, base))
		}
	}
	l := &Log{fs: fsys, dir: dir, opts: opts}
	if len(segs) == 0 {
		if err := l.createFirst(); err != nil {
			return nil, Recovery{}, err
		}
		return l, Recovery{}, nil
	}
	mark, file, found, err := readMark(fsys, dir)
	if err != nil {
		return nil, Recovery{}, err
	}
	rec, err := l.recover(segs, mark, found, file)
	if err != nil {
		return nil, Recovery{}, err
	}
	return l, rec, nil
}

// createFirst starts an empty log. Syncing the parent too makes the log
// directory itself durable when MkdirAll just created it.
func (l *Log) createFirst() error {
	s := newSegment(l.dir, l.opts.Base)
	f, err := l.fs.Create(s.path)
	if err != nil {
		return fmt.Errorf("eventlog: create segment: %w", err)
	}
	mk, err := openMarker(l.fs, l.dir, true, 0)
	if err != nil {
		f.Close()
		return err
	}
	if err := l.fs.SyncDir(l.dir); err != nil {
		mk.close()
		f.Close()
		return fmt.Errorf("eventlog: sync dir %s: %w", l.dir, err)
	}
	if err := l.fs.SyncDir(filepath.Dir(l.dir)); err != nil {
		mk.close()
		f.Close()
		return fmt.Errorf("eventlog: sync dir %s: %w", filepath.Dir(l.dir), err)
	}
	l.segs = []segment{s}
	l.active, l.marker = f, mk
	l.next, l.written, l.flushed = l.opts.Base, l.opts.Base, l.opts.Base
	l.synced = syncedMark{base: s.base}
	return nil
}

// recover scans segs (sorted by base) and leaves l ready to append to the
// last one. synced is the latest surviving mark (if marked), read from
// markFile.
func (l *Log) recover(segs []segment, synced syncedMark, marked bool, markFile int) (Recovery, error) {
	if tail := segs[len(segs)-1]; marked && synced.base > tail.base {
		missing := newSegment(l.dir, synced.base).path
		return Recovery{}, corruptAt(missing, synced.size, "the segment is missing, but a Sync made its first %d bytes durable: acknowledged records are missing (the log ends with %s)",
			synced.size, tail.path)
	}
	next := segs[0].base
	for i, s := range segs {
		if s.base != next {
			return Recovery{}, corruptAt(s.path, 0, "segment starts at index %d, but the previous segment ends before index %d", s.base, next)
		}
		last := i == len(segs)-1
		if l.opts.LazySealed && !last {
			// Checked when read: its records are those up to the next
			// segment's base.
			size, err := fileSize(l.fs, s.path)
			if err != nil {
				return Recovery{}, err
			}
			segs[i].size = size
			next = segs[i+1].base
			continue
		}
		f, err := l.fs.Open(s.path)
		if err != nil {
			return Recovery{}, fmt.Errorf("eventlog: open segment: %w", err)
		}
		syncedLen := int64(0)
		if marked && synced.base == s.base {
			syncedLen = synced.size
		}
		count, end, rec, err := l.scan(f, &segs[i], last, syncedLen)
		if err == nil && last {
			l.segs = segs
			l.active, l.activeSize = f, end
			l.next, l.written, l.flushed = next+count, next+count, next+count
			err = l.startMarks(markFile)
			if err == nil {
				return rec, nil
			}
		}
		f.Close()
		if err != nil {
			return Recovery{}, err
		}
		segs[i].size = end
		next += count
	}
	return Recovery{}, errors.New("eventlog: no segments to recover") // unreachable: Open checks
}

// fileSize returns the size of the file at path.
func fileSize(fsys vfs.FS, path string) (int64, error) {
	f, err := fsys.Open(path)
	if err != nil {
		return 0, fmt.Errorf("eventlog: open segment: %w", err)
	}
	defer f.Close()
	size, err := f.Size()
	if err != nil {
		return 0, fmt.Errorf("eventlog: size of %s: %w", path, err)
	}
	return size, nil
}

// startMarks makes the recovered log durable, opens the mark files (their
// creation is made durable with the log's) and marks what it synced, so
// that from now on damage to it is told from a torn tail.
func (l *Log) startMarks(markFile int) error {
	mk, err := openMarker(l.fs, l.dir, false, markFile)
	if err != nil {
		return err
	}
	if err := l.syncRecovered(); err != nil {
		mk.close()
		return err
	}
	l.marker = mk
	l.synced = syncedMark{base: l.segs[len(l.segs)-1].base, size: l.activeSize}
	l.marker.mark(l.synced)
	return nil
}

// syncRecovered makes durable everything Open is about to report. After a
// failed Sync the process may reopen without a crash and read back frames
// that sit in the OS cache but were never fsynced, or a segment whose
// directory entry was never synced; reporting those as the log would let a
// later crash take back records acknowledged after a successful Sync.
func (l *Log) syncRecovered() error {
	if err := l.active.Sync(); err != nil {
		return fmt.Errorf("eventlog: fsync %s: %w", l.activePath(), err)
	}
	if err := l.fs.SyncDir(l.dir); err != nil {
		return fmt.Errorf("eventlog: sync dir %s: %w", l.dir, err)
	}
	return nil
}

// scan checks every frame of one segment. In the last segment it truncates
// a torn tail, past the synced bytes its marks vouch for; anywhere else a
// bad frame is corruption.
func (l *Log) scan(f vfs.File, seg *segment, last bool, synced int64) (count uint64, end int64, rec Recovery, err error) {
	path := seg.path
	size, err := f.Size()
	if err != nil {
		return 0, 0, Recovery{}, fmt.Errorf("eventlog: size of %s: %w", path, err)
	}
	r := newFrameReader(f, size, l.opts.MaxRecordBytes)
	var scratch []byte
	for {
		at := r.off
		payload, err := r.next(scratch)
		if err == io.EOF {
			if size < synced {
				return 0, 0, Recovery{}, corruptAt(path, size, "the file ends here, but a Sync made its first %d bytes durable: acknowledged records are missing", synced)
			}
			return count, size, Recovery{}, nil
		}
		var bad *badFrame
		if errors.As(err, &bad) {
			if !last {
				return 0, 0, Recovery{}, corruptAt(path, bad.off, "%s (in a sealed segment)", bad.reason)
			}
			if bad.off < synced {
				return 0, 0, Recovery{}, corruptAt(path, bad.off, "%s, in the first %d bytes, which a Sync made durable: acknowledged records are damaged (not a torn tail)", bad.reason, synced)
			}
			rec, err := l.truncateTail(f, path, bad, size)
			return count, bad.off, rec, err
		}
		if err != nil {
			return 0, 0, Recovery{}, fmt.Errorf("eventlog: read %s at offset %d: %w", path, r.off, err)
		}
		seg.note(seg.base+count, at)
		scratch = payload[:0]
		count++
	}
}

// truncateTail cuts the last segment at the bad frame, unless a valid frame
// follows it, which would make it mid-log corruption.
func (l *Log) truncateTail(f vfs.File, path string, bad *badFrame, size int64) (Recovery, error) {
	validOff, found, err := findValidFrame(f, bad.off+1, size, l.opts.MaxRecordBytes)
	if err != nil {
		return Recovery{}, fmt.Errorf("eventlog: read %s: %w", path, err)
	}
	if found {
		return Recovery{}, corruptAt(path, bad.off, "%s, followed by a valid frame at offset %d", bad.reason, validOff)
	}
	if err := f.Truncate(bad.off); err != nil {
		return Recovery{}, fmt.Errorf("eventlog: truncate torn tail of %s: %w", path, err)
	}
	// recover fsyncs the segment once scanning is done.
	return Recovery{TornTail: true, TruncatedBytes: size - bad.off, Segment: path, Offset: bad.off}, nil
}
