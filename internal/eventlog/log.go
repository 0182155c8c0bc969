package eventlog

import (
	"fmt"
	"os"

	"github.com/aerie-mq/aerie/internal/vfs"
)

// maxIdleBuffer is the largest append buffer kept across Syncs; a burst of
// big records should not pin its memory forever.
const maxIdleBuffer = 1 << 20

// Log is an open event log. Records are numbered from 0 in append order;
// numbers are never reused, also across Close/Open and TruncateFront.
// A Log is not safe for concurrent use.
type Log struct {
	fs   vfs.FS
	dir  string
	opts Options

	segs   []segment // sorted by base; the last one is active
	active vfs.File  // open handle on segs[len(segs)-1]
	marker *marker   // records how far each Sync made the active segment durable (synced.go)
	// synced is how far the last successful Sync (or Open) made the log
	// durable: the segment and its length, the bytes Recover keeps.
	synced     syncedMark
	activeSize int64 // bytes of the active segment, all of them written
	dropped    int64 // bytes of the active segment dropped from the page cache (Options.DropSynced)

	written uint64 // records [first, written) are in segment files and durable
	flushed uint64 // records [written, flushed) are in the active segment, not fsynced (Flush)
	next    uint64 // index the next Append gets; [flushed, next) are in buf
	buf     []byte // frames of records [flushed, next), not yet written

	err    error // sticky ErrFailed; set by the first failed write or fsync
	closed bool
}

// usable reports why the log cannot accept a write, if it cannot.
func (l *Log) usable() error {
	if l.closed {
		return ErrClosed
	}
	return l.err
}

// fail makes the log fail-stop and returns the sticky error.
func (l *Log) fail(err error) error {
	l.err = fmt.Errorf("%w: %w", ErrFailed, err)
	return l.err
}

// Append adds a record and returns its index. The record is only buffered
// in memory: it is not durable, and must not be acknowledged, until a later
// Sync returns nil. The payload is copied, so the caller may reuse it.
func (l *Log) Append(payload []byte) (uint64, error) {
	if err := l.usable(); err != nil {
		return 0, err
	}
	if len(payload) == 0 {
		return 0, ErrEmptyRecord
	}
	if len(payload) > l.opts.MaxRecordBytes {
		return 0, fmt.Errorf("%w: %d bytes, limit is %d (Options.MaxRecordBytes)", ErrRecordTooLarge, len(payload), l.opts.MaxRecordBytes)
	}
	l.buf = appendFrame(l.buf, payload)
	index := l.next
	l.next++
	return index, nil
}

// AppendEncoded adds the record that encode appends to the slice it is
// given, and returns its index, as Append does. The record is encoded
// straight into the log's buffer, so a record encoded for the log alone
// is not copied a second time. encode must only append to its argument;
// if it fails, nothing is added and its error is returned.
func (l *Log) AppendEncoded(encode func(dst []byte) ([]byte, error)) (uint64, error) {
	if err := l.usable(); err != nil {
		return 0, err
	}
	// l.buf keeps its length until the record is accepted.
	start := len(l.buf)
	buf, err := encode(append(l.buf, make([]byte, frameHeaderSize)...))
	if err != nil {
		return 0, err
	}
	n := len(buf) - start - frameHeaderSize
	switch {
	case n == 0:
		return 0, ErrEmptyRecord
	case n > l.opts.MaxRecordBytes:
		return 0, fmt.Errorf("%w: %d bytes, limit is %d (Options.MaxRecordBytes)", ErrRecordTooLarge, n, l.opts.MaxRecordBytes)
	}
	putFrameHeader(buf[start:])
	l.buf = buf
	index := l.next
	l.next++
	return index, nil
}

// Sync writes every buffered record and fsyncs. When it returns nil, every
// record appended so far is durable. Call it once per batch of Appends
// (group commit). If it fails the log is fail-stopped: this and every later
// Append and Sync return an error wrapping ErrFailed and the cause.
func (l *Log) Sync() error {
	if err := l.Flush(); err != nil {
		return err
	}
	if l.written == l.flushed {
		return nil // everything written so far was fsynced by an earlier Sync
	}
	if err := l.active.Sync(); err != nil {
		return l.fail(fmt.Errorf("fsync %s: %w", l.activePath(), err))
	}
	l.written = l.flushed
	l.synced = syncedMark{base: l.segs[len(l.segs)-1].base, size: l.activeSize}
	l.marker.mark(l.synced)
	if l.opts.DropSynced {
		// Whole pages only: the last, partial one takes the next Append.
		l.drop(l.activeSize &^ (pageSize - 1))
	}
	return nil
}

// pageSize is the page size the drops align to.
var pageSize = int64(os.Getpagesize())

// drop advises the OS to drop the active segment's synced bytes below end
// from its page cache (Options.DropSynced). It is advice: an error is
// ignored, as the bytes are durable either way.
func (l *Log) drop(end int64) {
	d, ok := l.active.(vfs.CacheDropper)
	if !ok || end <= l.dropped {
		return
	}
	_ = d.DropCache(l.dropped, end-l.dropped)
	l.dropped = end
}

// Flush writes every buffered record to the segment files without an
// fsync: they are not durable until a later Sync (a crash may lose any
// suffix of them), but the append buffer is empty again, so a log that is
// synced rarely (a replicated PHB member's store, rebuilt from the Raft log
// after a crash) does not hold everything since its last Sync in memory,
// nor copy it as the buffer grows. Readers see flushed records. A failure
// fail-stops the log, as in Sync.
func (l *Log) Flush() error {
	if err := l.usable(); err != nil {
		return err
	}
	if len(l.buf) == 0 {
		return nil
	}
	// Walk the buffered frames, writing as many as fit in the active
	// segment with one Write, and rolling to a new segment when the next
	// frame would overflow it (roll fsyncs the sealed segment).
	chunk, off, index := 0, 0, l.flushed
	for off < len(l.buf) {
		n := frameLen(l.buf[off:])
		pending := l.activeSize + int64(off-chunk)
		if pending > 0 && pending+int64(n) > l.opts.SegmentBytes {
			if err := l.write(l.buf[chunk:off]); err != nil {
				return l.fail(err)
			}
			if err := l.roll(index); err != nil {
				return l.fail(err)
			}
			chunk, pending = off, 0
		}
		// A mark for a frame that a failed write leaves unwritten is
		// harmless: the log is fail-stopped and is never read again.
		l.segs[len(l.segs)-1].note(index, pending)
		off += n
		index++
	}
	if err := l.write(l.buf[chunk:]); err != nil {
		return l.fail(err)
	}
	l.flushed = l.next
	if cap(l.buf) > maxIdleBuffer {
		l.buf = nil
	} else {
		l.buf = l.buf[:0]
	}
	return nil
}

func (l *Log) write(frames []byte) error {
	if len(frames) == 0 {
		return nil
	}
	if _, err := l.active.Write(frames); err != nil {
		return fmt.Errorf("write %s: %w", l.activePath(), err)
	}
	l.activeSize += int64(len(frames))
	return nil
}

// roll seals the active segment and starts a new one whose first record is
// base. The order matters for recovery: the old segment is fsynced before
// the new one exists, and the directory is fsynced after, so a durable
// segment always has complete, durable predecessors.
func (l *Log) roll(base uint64) error {
	old := l.activePath()
	if err := l.active.Sync(); err != nil {
		return fmt.Errorf("fsync %s: %w", old, err)
	}
	if l.opts.DropSynced {
		l.drop(l.activeSize) // sealed: its last page too
	}
	if err := l.active.Close(); err != nil {
		return fmt.Errorf("close %s: %w", old, err)
	}
	l.active = nil
	l.segs[len(l.segs)-1].size = l.activeSize
	s := newSegment(l.dir, base)
	f, err := l.fs.Create(s.path)
	if err != nil {
		return fmt.Errorf("create segment: %w", err)
	}
	l.segs = append(l.segs, s)
	l.active, l.activeSize, l.dropped = f, 0, 0
	if err := l.fs.SyncDir(l.dir); err != nil {
		return fmt.Errorf("sync dir %s: %w", l.dir, err)
	}
	return nil
}

func (l *Log) activePath() string { return l.segs[len(l.segs)-1].path }

// NextIndex returns the index the next Append will return.
func (l *Log) NextIndex() uint64 { return l.next }

// DurableIndex returns the index below which every record is durable: the
// NextIndex as of the last successful Sync (or Open).
func (l *Log) DurableIndex() uint64 { return l.written }

// FirstIndex returns the index of the oldest record still stored; records
// below it were released with TruncateFront. It equals NextIndex for an
// empty log.
func (l *Log) FirstIndex() uint64 { return l.segs[0].base }

// Size returns the log's bytes: its segments' and what is buffered.
func (l *Log) Size() int64 {
	n := l.activeSize + int64(len(l.buf))
	for _, s := range l.segs[:len(l.segs)-1] {
		n += s.size
	}
	return n
}

// Close syncs buffered records (unless the log has failed) and releases
// the active segment. A Log cannot be used after Close.
func (l *Log) Close() error {
	if l.closed {
		return ErrClosed
	}
	var err error
	if l.err == nil {
		err = l.Sync()
	}
	l.closed = true
	l.marker.close()
	l.marker = nil
	if l.active != nil {
		if cerr := l.active.Close(); err == nil && cerr != nil {
			err = fmt.Errorf("eventlog: close %s: %w", l.activePath(), cerr)
		}
		l.active = nil
	}
	return err
}
