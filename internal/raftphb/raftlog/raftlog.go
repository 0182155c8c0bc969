// Package raftlog is a PHB cell member's durable Raft log: the entries and
// hard states Raft asks a member to persist before it answers (Ongaro &
// Ousterhout §5, Figure 2: "updated on stable storage before responding to
// RPCs"), on an internal/eventlog over vfs, so that the simulator's
// crashable MemFS exercises it.
//
// # Format
//
// One eventlog (segmented, CRC32C-framed, torn tail repaired on open) whose
// records are written in the order Raft handed them out, like etcd's WAL:
//
//	entry record:      'e' | raftpb.Entry (protobuf)
//	hard-state record: 'h' | raftpb.HardState (protobuf)
//
// An entry record at index i replaces every entry at i and above (Raft's
// log truncation when a new leader overwrites an uncommitted suffix), so
// replaying the records in order rebuilds the log; the last hard state
// wins. Within one Ready the entries are written before the hard state,
// and the eventlog keeps a prefix of its records across a crash, so a
// recovered hard state never commits an entry that was lost with it. A
// Ready counts as persisted only after Sync returns nil; what a crash
// loses was never acknowledged to a peer (messages leave after the Sync).
//
// Compaction is not done yet: the log keeps every record, and a restarting
// member replays them all (see docs/ARCHITECTURE.md, "Replicated PHB").
package raftlog

import (
	"errors"
	"fmt"

	"go.etcd.io/raft/v3/raftpb"
	"google.golang.org/protobuf/proto"

	"github.com/aerie-mq/aerie/internal/eventlog"
	"github.com/aerie-mq/aerie/internal/raftphb"
	"github.com/aerie-mq/aerie/internal/vfs"
)

const (
	kindEntry     byte = 'e'
	kindHardState byte = 'h'
)

// ErrCorrupt reports records that do not make a Raft log (a gap between
// entries, an unknown record): data an operator must look at, never
// repaired silently.
var ErrCorrupt = errors.New("raftlog: corrupt raft log")

// Log is an open Raft log. Not safe for concurrent use.
type Log struct {
	l   *eventlog.Log
	buf []byte
}

// Open opens (or creates) the Raft log in dir and returns what it holds,
// in the form the replica restores from; rec says whether a crash had
// torn its tail.
func Open(fsys vfs.FS, dir string, opts eventlog.Options) (*Log, raftphb.Restored, eventlog.Recovery, error) {
	var st raftphb.Restored
	l, rec, err := eventlog.Open(fsys, dir, opts)
	if err != nil {
		return nil, st, rec, fmt.Errorf("raftlog: %w", err)
	}
	err = l.Replay(l.FirstIndex(), func(i uint64, p []byte) error {
		if len(p) < 1 {
			return fmt.Errorf("%w: record %d is empty", ErrCorrupt, i)
		}
		switch p[0] {
		case kindEntry:
			e := &raftpb.Entry{}
			if err := proto.Unmarshal(p[1:], e); err != nil {
				return fmt.Errorf("%w: record %d: %w", ErrCorrupt, i, err)
			}
			ents, err := place(st.Entries, e)
			if err != nil {
				return fmt.Errorf("record %d: %w", i, err)
			}
			st.Entries = ents
		case kindHardState:
			hs := &raftpb.HardState{}
			if err := proto.Unmarshal(p[1:], hs); err != nil {
				return fmt.Errorf("%w: record %d: %w", ErrCorrupt, i, err)
			}
			st.HardState = hs
		default:
			return fmt.Errorf("%w: record %d has kind %q", ErrCorrupt, i, p[0])
		}
		return nil
	})
	if err != nil {
		l.Close()
		return nil, raftphb.Restored{}, rec, fmt.Errorf("raftlog %s: %w", dir, err)
	}
	if hs := st.HardState; hs != nil && hs.GetCommit() > lastIndex(st.Entries) {
		l.Close()
		return nil, raftphb.Restored{}, rec, fmt.Errorf("%w: %s: hard state commits %d, log ends at %d", ErrCorrupt, dir, hs.GetCommit(), lastIndex(st.Entries))
	}
	return &Log{l: l}, st, rec, nil
}

// place puts e into ents (which start at index 1), cutting off whatever
// was at e's index and above.
func place(ents []*raftpb.Entry, e *raftpb.Entry) ([]*raftpb.Entry, error) {
	i := e.GetIndex()
	if i == 0 || i > uint64(len(ents))+1 {
		return nil, fmt.Errorf("%w: entry %d after %d entries", ErrCorrupt, i, len(ents))
	}
	return append(ents[:i-1], e), nil
}

func lastIndex(ents []*raftpb.Entry) uint64 {
	if len(ents) == 0 {
		return 0
	}
	return ents[len(ents)-1].GetIndex()
}

// Append buffers a Ready's entries and hard state (nil: unchanged), in
// that order; nothing is durable before Sync.
func (l *Log) Append(ents []*raftpb.Entry, hs *raftpb.HardState) error {
	for _, e := range ents {
		if err := l.add(kindEntry, e); err != nil {
			return err
		}
	}
	if hs != nil {
		return l.add(kindHardState, hs)
	}
	return nil
}

func (l *Log) add(kind byte, m proto.Message) error {
	var err error
	l.buf = append(l.buf[:0], kind)
	if l.buf, err = (proto.MarshalOptions{}).MarshalAppend(l.buf, m); err != nil {
		return fmt.Errorf("raftlog: encode: %w", err)
	}
	if _, err := l.l.Append(l.buf); err != nil {
		return fmt.Errorf("raftlog: %w", err)
	}
	return nil
}

// Sync makes everything appended durable (one fsync: group commit of a
// Ready). A failure is sticky (eventlog's fail-stop): the member must stop.
func (l *Log) Sync() error { return l.l.Sync() }

// Close closes the log.
func (l *Log) Close() error { return l.l.Close() }
