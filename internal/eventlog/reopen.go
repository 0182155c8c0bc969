package eventlog

import (
	"errors"
	"fmt"
	"io/fs"
)

// Reopen recovers a log that failed (ErrFailed: a write or fsync failed,
// a full disk typically) without a restart of the process, and returns
// the log to use from now on, closing l. It keeps exactly what the last
// successful Sync (or Open) made durable, DurableIndex, and nothing after
// it:
//
//   - every segment created since that Sync is removed, newest first, each
//     removal made durable before the next (a crash leaves a contiguous
//     log);
//   - the segment that Sync covered is cut back to the length it made
//     durable, and fsynced;
//   - the log is opened again (Open: it reads what the files hold and
//     fsyncs it).
//
// Why cut rather than keep what the files show: once an fsync has failed
// the page cache may hold bytes that never reached the disk, and on some
// kernels and filesystems pages whose write-back failed are marked clean,
// so a later fsync would report them durable without writing them. Bytes
// past the last successful Sync are the only ones that can be in that
// state, and they are records no caller was told are durable: cutting
// them loses nothing acknowledged, and a caller that still wants them
// appends them again, to a file whose bytes past the cut are written
// anew. The records below the cut were fsynced successfully before the
// failure. On success NextIndex == DurableIndex as it was in l.
//
// If it fails (the disk is still full), l stays failed, its durable
// records still readable (Replay), and Reopen may be called on it again
// later: each step is idempotent. l is closed only once the new log is
// open. A log that has not failed is failed first: what it appended since
// its last Sync is cut too.
func (l *Log) Reopen() (*Log, Recovery, error) {
	if l.closed {
		return nil, Recovery{}, ErrClosed
	}
	if l.err == nil {
		l.fail(errors.New("reopened"))
	}
	if l.marker != nil {
		// Its marks are all of durable bytes; the new log marks its own.
		l.marker.close()
		l.marker = nil
	}
	keep := l.synced
	for i := len(l.segs) - 1; i >= 0 && l.segs[i].base > keep.base; i-- {
		if err := l.fs.Remove(l.segs[i].path); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return nil, Recovery{}, fmt.Errorf("eventlog: reopen: remove %s: %w", l.segs[i].path, err)
		}
		if err := l.fs.SyncDir(l.dir); err != nil {
			return nil, Recovery{}, fmt.Errorf("eventlog: reopen: sync dir %s: %w", l.dir, err)
		}
	}
	path := newSegment(l.dir, keep.base).path
	f, err := l.fs.Open(path)
	if err != nil {
		return nil, Recovery{}, fmt.Errorf("eventlog: reopen: %w", err)
	}
	err = f.Truncate(keep.size)
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return nil, Recovery{}, fmt.Errorf("eventlog: reopen: cut %s to %d bytes: %w", path, keep.size, err)
	}
	nl, rec, err := Open(l.fs, l.dir, l.opts)
	if err != nil {
		return nil, Recovery{}, fmt.Errorf("eventlog: reopen: %w", err)
	}
	if nl.NextIndex() != l.written || nl.FirstIndex() != l.FirstIndex() {
		nl.Close()
		return nil, Recovery{}, fmt.Errorf("eventlog: reopen: log holds records [%d, %d), want [%d, %d)",
			nl.FirstIndex(), nl.NextIndex(), l.FirstIndex(), l.written)
	}
	l.Close() // failed: nothing to sync
	return nl, rec, nil
}

// Failed reports whether the log failed (ErrFailed), and why.
func (l *Log) Failed() error { return l.err }
