// Package storage is a broker's stable storage: the event log of its
// records (internal/eventlog) with the snapshot that lets the log's front
// be dropped, and the reads that bring events back for nacks. Which part
// of the log may go is decided elsewhere (internal/retention, from the
// engine's release points); this package does the I/O.
package storage

import (
	"errors"
	"fmt"
	"io/fs"

	"github.com/aerie-mq/aerie/internal/eventlog"
	"github.com/aerie-mq/aerie/internal/msg"
	"github.com/aerie-mq/aerie/internal/retention"
	"github.com/aerie-mq/aerie/internal/tick"
	"github.com/aerie-mq/aerie/internal/vfs"
)

// Store is a broker's event log and its snapshot, with the operations the
// runtime shell's Durability seam asks for. Its methods are synchronous
// and not safe for concurrent use: the broker runs them on one persister
// goroutine, the simulator in its event loop.
type Store struct {
	fs       vfs.FS
	snapPath string
	log      *eventlog.Log
	// sum is the summary of the active segment being written (summary.go):
	// the entries of the records from index base (the active segment's
	// first) to the log's next index.
	sum struct {
		base       uint64
		lost       bool // out of step: none written (summarise)
		entries    []sumEntry
		activeBase uint64 // the active segment's base when last looked
		scratch    msg.Event
		names      names // of the entries, renewed with every summary
	}
}

// Open opens (or creates) the log in dir and reads back everything a
// restart needs; rec says whether a crash had torn the log's tail. It
// reads the sealed segments' summaries rather than the segments
// (summary.go), and the last segment whole, so its time and the memory of
// what it returns grow with the events the log holds, not with their
// payloads: a few bytes per event (retention.Loaded). A sealed segment is
// checked for damage when it is read (eventlog.Options.LazySealed).
func Open(fsys vfs.FS, dir, snapPath string, opts eventlog.Options) (s *Store, ld retention.Loaded, rec eventlog.Recovery, err error) {
	opts.LazySealed = true
	l, rec, err := eventlog.Open(fsys, dir, opts)
	if err != nil {
		return nil, ld, rec, fmt.Errorf("open event log %s: %w", dir, err)
	}
	s = &Store{fs: fsys, snapPath: snapPath, log: l}
	if ld, err = s.load(); err != nil {
		l.Close()
		return nil, ld, rec, fmt.Errorf("recover event log %s: %w", dir, err)
	}
	ld.First, ld.Next = l.FirstIndex(), l.NextIndex()
	return s, ld, rec, nil
}

// newStore returns a store around l, a log that holds no record.
func newStore(fsys vfs.FS, snapPath string, l *eventlog.Log) *Store {
	s := &Store{fs: fsys, snapPath: snapPath, log: l}
	s.sum.base, s.sum.activeBase, s.sum.names = l.NextIndex(), l.ActiveBase(), names{}
	return s
}

// Append encodes recs and appends them (not yet durable: Sync), returning
// the log index of the first.
func (s *Store) Append(recs []msg.Record) (first uint64, err error) {
	first = s.log.NextIndex()
	for _, r := range recs {
		// Encoded straight into the log's buffer: an event record is the
		// event's one encoding, copied once (docs/ARCHITECTURE.md).
		var raw []byte
		_, err = s.log.AppendEncoded(func(dst []byte) ([]byte, error) {
			out, err := msg.EncodeRecord(dst, r)
			if err == nil && r.Event == nil {
				raw = append([]byte(nil), out[len(dst):]...)
			}
			return out, err
		})
		if errors.Is(err, msg.ErrBadRecord) {
			return first, fmt.Errorf("encode %v: %w", r, err)
		}
		if err != nil {
			return first, err
		}
		if r.Event != nil {
			s.sum.entries = append(s.sum.entries, eventEntry(r, s.sum.names))
		} else {
			s.sum.entries = append(s.sum.entries, sumEntry{raw: raw})
		}
	}
	return first, nil
}

// AppendEncoded appends records already encoded (msg.EncodeRecord's
// bytes, as a replicated PHB's Raft log carries them), without decoding
// and encoding them again, and returns the log index of the first.
func (s *Store) AppendEncoded(recs [][]byte) (first uint64, err error) {
	first = s.log.NextIndex()
	for _, p := range recs {
		e, err := entryOf(p, &s.sum.scratch, s.sum.names)
		if err != nil {
			return first, fmt.Errorf("storage: record %d: %w", s.log.NextIndex(), err)
		}
		if _, err = s.log.Append(p); err != nil {
			return first, err
		}
		s.sum.entries = append(s.sum.entries, e)
	}
	s.sum.scratch = msg.Event{}
	return first, nil
}

// Sync makes every appended record durable.
func (s *Store) Sync() error {
	err := s.log.Sync()
	s.summarise()
	return err
}

// Flush writes the appended records to the log's files without making
// them durable (eventlog.Log.Flush).
func (s *Store) Flush() error {
	err := s.log.Flush()
	s.summarise()
	return err
}

// summarise writes the summary of every segment sealed since it last
// looked, from the entries of its records.
func (s *Store) summarise() {
	active := s.log.ActiveBase()
	if active == s.sum.activeBase {
		return
	}
	s.sum.activeBase = active
	for _, seg := range s.log.Segments() {
		if !seg.Sealed || seg.Next <= s.sum.base {
			continue
		}
		n := seg.Next - seg.Base
		if seg.Base != s.sum.base || uint64(len(s.sum.entries)) < n {
			// Out of step (a bug): no more summaries until a restart,
			// which reads the segments instead.
			s.sum.lost = true
		}
		if !s.sum.lost {
			if id, err := idOf(s.log, seg); err == nil {
				_ = writeSummary(s.fs, seg.Path, id, s.sum.entries[:n]) // else a restart reads the segment
			}
		}
		n = min(n, uint64(len(s.sum.entries)))
		s.sum.names = names{}
		rest := copy(s.sum.entries, s.sum.entries[n:])
		clear(s.sum.entries[rest:])
		s.sum.entries = s.sum.entries[:rest]
		s.sum.base = seg.Next
	}
}

// Fetch reads events of pubend p in ranges back, each range's scan
// starting at the log index in from (Tracker.FetchStart).
func (s *Store) Fetch(p msg.PubendID, ranges []tick.Range, from []uint64) ([]*msg.Event, error) {
	return Fetch(s.log, p, ranges, from)
}

// Trim writes snap as the snapshot and drops the log's whole segments
// below cut, when at least one can go; it returns the log's first index
// afterwards and how many records went.
func (s *Store) Trim(cut uint64, snap []msg.Record) (first, dropped uint64, err error) {
	if !s.log.Removable(cut) {
		return s.log.FirstIndex(), 0, nil
	}
	payloads := make([][]byte, 0, len(snap))
	for _, r := range snap {
		b, err := msg.EncodeRecord(nil, r)
		if err != nil {
			return s.log.FirstIndex(), 0, fmt.Errorf("storage: %w", err)
		}
		payloads = append(payloads, b)
	}
	return s.TrimEncoded(cut, payloads)
}

// Trimmable reports whether a trim at cut would drop a segment (a cut
// within the first segment, or a trim already made, would not).
func (s *Store) Trimmable(cut uint64) bool { return s.log.Removable(cut) }

// TrimEncoded is Trim with the snapshot's records already encoded
// (msg.EncodeRecord's bytes). A cut at or below the first segment's end
// (a trim already made, replayed) does nothing.
func (s *Store) TrimEncoded(cut uint64, snap [][]byte) (first, dropped uint64, err error) {
	before := s.log.FirstIndex()
	if !s.log.Removable(cut) {
		return before, 0, nil
	}
	if err := eventlog.WriteSnapshot(s.fs, s.snapPath, snap); err != nil {
		return before, 0, err
	}
	segs := s.log.Segments()
	err = s.log.TruncateFront(cut)
	first = s.log.FirstIndex()
	for _, seg := range segs {
		if seg.Base < first {
			_ = s.fs.Remove(summaryName(seg.Path)) // else removed at the next Open
		}
	}
	if err != nil {
		return before, 0, fmt.Errorf("storage: %w", err)
	}
	return first, first - before, nil
}

// Size returns the bytes of the log's files (and of what it buffers).
func (s *Store) Size() int64 { return s.log.Size() }

// Bounds returns the log's first and next index.
func (s *Store) Bounds() (first, next uint64) { return s.log.FirstIndex(), s.log.NextIndex() }

// Close syncs what was appended and closes the log. A log whose write or
// fsync failed (now or before) is first cut back to what its last
// successful Sync made durable, as Reopen does: the broker stops,
// crash-only, and its restart without a power loss would otherwise read
// bytes that the page cache holds but a failed fsync may never have
// written, count them as durable, and lose them at a later power loss
// (docs/RELIABILITY.md "Disk full").
func (s *Store) Close() error {
	err := s.log.Sync()
	s.summarise()
	if failed := s.log.Failed(); failed != nil {
		err = failed
		if rerr := s.Reopen(); rerr != nil {
			err = errors.Join(err, fmt.Errorf("storage: cut a failed log back to its synced records: %w", rerr))
		}
	}
	if cerr := s.log.Close(); err == nil {
		err = cerr
	}
	return err
}

var errDone = errors.New("storage: fetch done")

// Fetch reads back the logged events of pubend p with ticks in ranges
// (sorted, disjoint), starting each range's read at from(range) — the
// Tracker's FetchStart, computed by the caller that owns the Tracker. It
// reads only from the sparse index entry before each range to the first
// event of p past it (issue 3: nack retransmissions read only what they
// need).
func Fetch(l *eventlog.Log, p msg.PubendID, ranges []tick.Range, from []uint64) ([]*msg.Event, error) {
	var out []*msg.Event
	for i, r := range ranges {
		start := max(from[i], l.FirstIndex())
		if len(out) > 0 && out[len(out)-1].Tick >= r.Lo {
			return nil, fmt.Errorf("storage: fetch ranges out of order at %v", r)
		}
		err := l.Replay(start, func(idx uint64, b []byte) error {
			rec, err := msg.DecodeRecord(b)
			if err != nil {
				return fmt.Errorf("log record %d: %w", idx, err)
			}
			if rec.Event == nil || rec.Pubend != p {
				return nil
			}
			if rec.Event.Tick > r.Hi {
				return errDone
			}
			if rec.Event.Tick >= r.Lo {
				out = append(out, rec.Event)
			}
			return nil
		})
		if err != nil && !errors.Is(err, errDone) {
			return nil, fmt.Errorf("storage: fetch %s %v: %w", p, r, err)
		}
	}
	return out, nil
}

// Reopen recovers the log after a failed write or fsync (a full disk,
// typically) without a restart: the log keeps what its last successful
// Sync made durable and nothing after it (eventlog.Log.Reopen says why
// that is the safe cut), so the records of the batch that failed, never
// acknowledged, must be appended again. On failure the store stays
// failed and Reopen may be tried again later.
func (s *Store) Reopen() error {
	l, _, err := s.log.Reopen()
	if err != nil {
		return err
	}
	s.log = l
	// The segment the cut left active may have been sealed (and
	// summarised) by a roll of the failed batch: its summary, and any of
	// a later segment's, describes records that are gone.
	active := l.ActiveBase()
	for _, seg := range l.Segments() {
		if seg.Base >= active {
			if err := s.fs.Remove(summaryName(seg.Path)); err != nil && !errors.Is(err, fs.ErrNotExist) {
				return fmt.Errorf("storage: reopen: %w", err)
			}
		}
	}
	// The entries of the active segment's records, for its summary once
	// sealed: those kept, if the store still has them; otherwise no
	// summary until a restart, which reads the segments instead.
	kept := l.NextIndex() - active
	if s.sum.lost || s.sum.base != active || uint64(len(s.sum.entries)) < kept {
		s.sum.lost = true
		s.sum.entries = s.sum.entries[:0]
	} else {
		clear(s.sum.entries[kept:])
		s.sum.entries = s.sum.entries[:kept]
	}
	s.sum.base, s.sum.activeBase = active, active
	return nil
}

// Failed returns why the log failed (a write or fsync error, wrapping
// eventlog.ErrFailed), or nil.
func (s *Store) Failed() error { return s.log.Failed() }
