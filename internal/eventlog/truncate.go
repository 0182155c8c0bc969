package eventlog

import "fmt"

// TruncateFront releases storage for records below index: it removes every
// whole segment whose records all have an index below it. The active
// segment is never removed, so FirstIndex may stay below index. Indexes
// are not renumbered.
//
// Segments go oldest first, each removal made durable before the next, so
// a crash can only leave a contiguous suffix of the log, never a gap.
func (l *Log) TruncateFront(index uint64) error {
	if err := l.usable(); err != nil {
		return err
	}
	for len(l.segs) > 1 && l.segs[1].base <= index {
		s := l.segs[0]
		if err := l.fs.Remove(s.path); err != nil {
			return fmt.Errorf("eventlog: remove segment: %w", err)
		}
		l.segs = l.segs[1:]
		if err := l.fs.SyncDir(l.dir); err != nil {
			return fmt.Errorf("eventlog: sync dir %s after removing %s: %w", l.dir, s.path, err)
		}
	}
	return nil
}

// Removable reports whether TruncateFront(index) would remove at least one
// segment (the active segment is never removed).
func (l *Log) Removable(index uint64) bool {
	return len(l.segs) > 1 && l.segs[1].base <= index
}
