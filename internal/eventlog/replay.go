package eventlog

import (
	"errors"
	"fmt"
	"io"
	"sort"

	"github.com/aerie-mq/aerie/internal/vfs"
)

// Replay calls fn for every record with index >= from, in index order,
// including records appended but not yet synced. fn owns the payload it is
// given. fn must not call methods of l. An error from fn stops the replay
// and is returned as is.
//
// from must be in [FirstIndex, NextIndex]; otherwise Replay returns an error
// wrapping ErrTruncated or ErrOutOfRange. Records are read back from disk
// and their checksums verified again; damage found now is reported with
// ErrCorrupt.
//
// On a failed log (ErrFailed) Replay reads only the records the last
// successful Sync made durable, [FirstIndex, DurableIndex): those are on
// disk whatever the failure left after them, so the nacks of events
// acknowledged before a full disk are still answered while it lasts.
func (l *Log) Replay(from uint64, fn func(index uint64, payload []byte) error) error {
	if l.closed {
		return ErrClosed
	}
	if l.err != nil {
		return l.replayDurable(from, fn)
	}
	if first := l.FirstIndex(); from < first {
		return fmt.Errorf("%w: index %d, first retained index is %d", ErrTruncated, from, first)
	}
	if from > l.next {
		return fmt.Errorf("%w: index %d, next index is %d", ErrOutOfRange, from, l.next)
	}
	// The segment holding from is the last one whose base is <= from.
	i := sort.Search(len(l.segs), func(i int) bool { return l.segs[i].base > from }) - 1
	for ; i < len(l.segs); i++ {
		if err := l.replaySegment(i, from, fn); err != nil {
			return err
		}
	}
	index := l.flushed
	for off := 0; off < len(l.buf); index++ {
		n := frameLen(l.buf[off:])
		if index >= from {
			payload := append([]byte(nil), l.buf[off+frameHeaderSize:off+n]...)
			if err := fn(index, payload); err != nil {
				return err
			}
		}
		off += n
	}
	return nil
}

// replayDurable is Replay on a failed log: the records below
// DurableIndex, from the segments up to the one the last successful Sync
// covered, that one read only as far as that Sync made it durable.
func (l *Log) replayDurable(from uint64, fn func(uint64, []byte) error) error {
	if first := l.FirstIndex(); from < first {
		return fmt.Errorf("%w: index %d, first retained index is %d", ErrTruncated, from, first)
	}
	if from > l.written {
		return fmt.Errorf("%w: index %d, the failed log's durable records end at index %d: %w", ErrOutOfRange, from, l.written, l.err)
	}
	i := sort.Search(len(l.segs), func(i int) bool { return l.segs[i].base > from }) - 1
	for ; i < len(l.segs) && l.segs[i].base <= l.synced.base; i++ {
		if err := l.replaySegment(i, from, fn); err != nil {
			return err
		}
	}
	return nil
}

func (l *Log) replaySegment(i int, from uint64, fn func(uint64, []byte) error) error {
	s := &l.segs[i]
	last := i == len(l.segs)-1
	var (
		f    vfs.File
		size int64
		want uint64 // index the segment must end at
	)
	synced := l.err != nil && s.base == l.synced.base // a failed log's last durable segment
	if last && !synced {
		f, size, want = l.active, l.activeSize, l.flushed
	} else if synced && last && l.active != nil {
		f, size, want = l.active, l.synced.size, l.written
	} else {
		var err error
		if f, err = l.fs.Open(s.path); err != nil {
			return fmt.Errorf("eventlog: open segment: %w", err)
		}
		defer f.Close()
		if size, err = f.Size(); err != nil {
			return fmt.Errorf("eventlog: size of %s: %w", s.path, err)
		}
		if synced {
			size, want = min(size, l.synced.size), l.written
		} else {
			want = l.segs[i+1].base
		}
	}
	// Start at the last mark at or before from instead of the segment's
	// first frame. The marks of the active segment may run past what is
	// written (never past a successful Sync's end, since marks are only
	// taken for frames being written), so a mark beyond size is ignored.
	m := s.seek(from)
	if m.off > size {
		m = mark{index: s.base}
	}
	r := newFrameReaderAt(f, m.off, size, l.opts.MaxRecordBytes)
	var scratch []byte
	index := m.index
	for {
		var buf []byte
		if index < from {
			buf = scratch // skipped payloads can share one buffer
		}
		at := r.off
		payload, err := r.next(buf)
		if err == io.EOF {
			break
		}
		var bad *badFrame
		if errors.As(err, &bad) {
			return corruptAt(s.path, bad.off, "%s", bad.reason)
		}
		if err != nil {
			return fmt.Errorf("eventlog: read %s at offset %d: %w", s.path, r.off, err)
		}
		if !last && !synced {
			// A sealed segment Open did not scan (Options.LazySealed)
			// gets its marks as it is read.
			s.note(index, at)
		}
		if index >= from {
			if err := fn(index, payload); err != nil {
				return err
			}
		} else {
			scratch = payload[:0]
		}
		index++
	}
	if index != want {
		return corruptAt(s.path, size, "segment holds records up to index %d, want %d", index, want)
	}
	return nil
}
