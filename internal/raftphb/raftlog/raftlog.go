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
// # Compaction
//
// Compact(snap) drops the entries up to the snapshot's index, which the
// member's pubend store holds durably (internal/raftphb/node decides when).
// The eventlog drops only whole segments from its front, so compaction
// first writes the file <dir>/snapshot (atomically: eventlog.WriteSnapshot)
// with three frames:
//
//	start:      uvarint, the eventlog index of the first record to replay
//	snapshot:   raftpb.Snapshot (index, term, ConfState, the replica's data)
//	hard state: raftpb.HardState, the last one written before start
//
// and then removes the segments wholly below start. Entry records are
// written in index order except where an overwrite cuts the log, so the
// current entry at index+1 is the first current record above the snapshot:
// start is its eventlog index (or the log's end when there is none), and
// every record below start is an entry at or below the snapshot's index, a
// cut-off entry or an older hard state. Open replays from start only. A
// crash between the file and the removal leaves segments that Open skips;
// one before the file leaves the old log. ApplySnapshot does the same for a
// snapshot received from the leader, dropping the whole log.
package raftlog

import (
	"encoding/binary"
	"errors"
	"fmt"
	"path"
	"slices"

	"go.etcd.io/raft/v3/raftpb"
	"google.golang.org/protobuf/proto"

	"github.com/aerie-mq/aerie/internal/eventlog"
	"github.com/aerie-mq/aerie/internal/raftphb"
	"github.com/aerie-mq/aerie/internal/vfs"
)

const (
	kindEntry     byte = 'e'
	kindHardState byte = 'h'

	snapshotFile = "snapshot"
)

// ErrCorrupt reports records that do not make a Raft log (a gap between
// entries, an unknown record): data an operator must look at, never
// repaired silently.
var ErrCorrupt = errors.New("raftlog: corrupt raft log")

// Log is an open Raft log. Not safe for concurrent use.
type Log struct {
	fs   vfs.FS
	dir  string
	opts eventlog.Options
	l    *eventlog.Log
	buf  []byte

	// snap is the last snapshot (nil: none; the log starts at index 1);
	// pos[k] is the eventlog index of the current record of entry
	// snap index+1+k; hs is the last hard state written.
	snap *raftpb.Snapshot
	pos  []uint64
	hs   *raftpb.HardState
}

// Stats describes a Raft log's size, for status pages and measurements.
type Stats struct {
	// FirstIndex is the first Raft index the log holds (the snapshot's
	// index plus one); Entries how many it holds from there.
	FirstIndex, Entries uint64
	// Records and Bytes are the eventlog's, including records below the
	// snapshot that wait for their segment to go.
	Records uint64
	Bytes   int64
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
	lg := &Log{fs: fsys, dir: dir, opts: opts, l: l}
	start, err := lg.readSnapshot()
	if err != nil {
		l.Close()
		return nil, raftphb.Restored{}, rec, err
	}
	if start < l.FirstIndex() || start > l.NextIndex() {
		l.Close()
		return nil, raftphb.Restored{}, rec, fmt.Errorf("%w: %s: the snapshot starts the log at record %d, which holds records %d to %d", ErrCorrupt, dir, start, l.FirstIndex(), l.NextIndex())
	}
	base := lg.snapIndex()
	st.Snapshot, st.HardState = lg.snap, lg.hs
	err = l.Replay(start, func(i uint64, p []byte) error {
		if len(p) < 1 {
			return fmt.Errorf("%w: record %d is empty", ErrCorrupt, i)
		}
		switch p[0] {
		case kindEntry:
			e := &raftpb.Entry{}
			if err := proto.Unmarshal(p[1:], e); err != nil {
				return fmt.Errorf("%w: record %d: %w", ErrCorrupt, i, err)
			}
			ents, err := place(st.Entries, base, e)
			if err != nil {
				return fmt.Errorf("record %d: %w", i, err)
			}
			st.Entries = ents
			lg.pos = append(lg.pos[:len(ents)-1], i)
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
	lg.hs = st.HardState
	if hs := st.HardState; hs != nil && hs.GetCommit() > lastIndex(base, st.Entries) {
		l.Close()
		return nil, raftphb.Restored{}, rec, fmt.Errorf("%w: %s: hard state commits %d, log ends at %d", ErrCorrupt, dir, hs.GetCommit(), lastIndex(base, st.Entries))
	}
	return lg, st, rec, nil
}

// readSnapshot loads the snapshot file, if any, and returns the eventlog
// index to replay from.
func (l *Log) readSnapshot() (start uint64, err error) {
	name := path.Join(l.dir, snapshotFile)
	frames, err := eventlog.ReadSnapshot(l.fs, name)
	if err != nil {
		return 0, fmt.Errorf("raftlog: %w", err)
	}
	if len(frames) == 0 {
		return l.l.FirstIndex(), nil
	}
	if len(frames) != 3 {
		return 0, fmt.Errorf("%w: %s has %d frames", ErrCorrupt, name, len(frames))
	}
	start, k := binary.Uvarint(frames[0])
	if k <= 0 || k != len(frames[0]) {
		return 0, fmt.Errorf("%w: %s: bad start", ErrCorrupt, name)
	}
	snap, hs := &raftpb.Snapshot{}, &raftpb.HardState{}
	if err := proto.Unmarshal(frames[1], snap); err != nil {
		return 0, fmt.Errorf("%w: %s: %w", ErrCorrupt, name, err)
	}
	if err := proto.Unmarshal(frames[2], hs); err != nil {
		return 0, fmt.Errorf("%w: %s: %w", ErrCorrupt, name, err)
	}
	l.snap = snap
	if !proto.Equal(hs, &raftpb.HardState{}) {
		l.hs = hs
	}
	return start, nil
}

func (l *Log) snapIndex() uint64 { return l.snap.GetMetadata().GetIndex() }

// place puts e into ents (which start at index base+1), cutting off
// whatever was at e's index and above.
func place(ents []*raftpb.Entry, base uint64, e *raftpb.Entry) ([]*raftpb.Entry, error) {
	i := e.GetIndex()
	if i <= base || i > base+uint64(len(ents))+1 {
		return nil, fmt.Errorf("%w: entry %d after %d entries from %d", ErrCorrupt, i, len(ents), base+1)
	}
	return append(ents[:i-base-1], e), nil
}

func lastIndex(base uint64, ents []*raftpb.Entry) uint64 {
	if len(ents) == 0 {
		return base
	}
	return ents[len(ents)-1].GetIndex()
}

// Append buffers a Ready's entries and hard state (nil: unchanged), in
// that order; nothing is durable before Sync.
func (l *Log) Append(ents []*raftpb.Entry, hs *raftpb.HardState) error {
	base := l.snapIndex()
	for _, e := range ents {
		i := e.GetIndex()
		if i <= base || i > base+uint64(len(l.pos))+1 {
			return fmt.Errorf("raftlog: entry %d does not follow the log (%d entries from %d)", i, len(l.pos), base+1)
		}
		at, err := l.add(kindEntry, e)
		if err != nil {
			return err
		}
		l.pos = append(l.pos[:i-base-1], at)
	}
	if hs != nil {
		if _, err := l.add(kindHardState, hs); err != nil {
			return err
		}
		l.hs = hs
	}
	return nil
}

func (l *Log) add(kind byte, m proto.Message) (uint64, error) {
	var err error
	l.buf = append(l.buf[:0], kind)
	if l.buf, err = (proto.MarshalOptions{}).MarshalAppend(l.buf, m); err != nil {
		return 0, fmt.Errorf("raftlog: encode: %w", err)
	}
	at, err := l.l.Append(l.buf)
	if err != nil {
		return 0, fmt.Errorf("raftlog: %w", err)
	}
	return at, nil
}

// Compact drops the entries up to snap's index (which the log must hold)
// for snap: durable when it returns (it syncs what was appended first).
// The caller guarantees that the state machine holds those entries
// durably.
func (l *Log) Compact(snap *raftpb.Snapshot) error {
	base, i := l.snapIndex(), snap.GetMetadata().GetIndex()
	if i <= base || i > base+uint64(len(l.pos)) {
		return fmt.Errorf("raftlog: compact to %d: the log holds %d to %d", i, base+1, base+uint64(len(l.pos)))
	}
	start := l.l.NextIndex()
	if k := i - base; k < uint64(len(l.pos)) {
		start = l.pos[k]
	}
	if err := l.cut(snap, start); err != nil {
		return err
	}
	l.pos = slices.Clone(l.pos[i-base:])
	return nil
}

// ApplySnapshot replaces the whole log by snap (a snapshot the member
// received and installed): durable when it returns. Entries and the hard
// state of the same Ready are appended after it.
func (l *Log) ApplySnapshot(snap *raftpb.Snapshot) error {
	if i := snap.GetMetadata().GetIndex(); i <= l.snapIndex() {
		return fmt.Errorf("raftlog: snapshot at %d is not past the log's at %d", i, l.snapIndex())
	}
	if err := l.cut(snap, l.l.NextIndex()); err != nil {
		return err
	}
	l.pos = nil
	return nil
}

// cut makes snap the log's snapshot with replay starting at record start,
// then drops the segments below start.
func (l *Log) cut(snap *raftpb.Snapshot, start uint64) error {
	// Every record below start must be durable before the file says
	// replay starts there: a crash must not take back records that a
	// replay would skip while later appends reuse their indexes.
	if err := l.l.Sync(); err != nil {
		return fmt.Errorf("raftlog: %w", err)
	}
	sb, err := proto.Marshal(snap)
	if err != nil {
		return fmt.Errorf("raftlog: encode snapshot: %w", err)
	}
	// The hard state replayed with the snapshot commits at least its
	// index (Raft refuses to start with a commit below its snapshot): a
	// snapshot received from the leader is written before the hard state
	// of its Ready, which a crash may lose.
	hs := &raftpb.HardState{Term: new(snap.GetMetadata().GetTerm())}
	if l.hs != nil {
		hs = proto.Clone(l.hs).(*raftpb.HardState)
	}
	if hs.GetCommit() < snap.GetMetadata().GetIndex() {
		hs.Commit = new(snap.GetMetadata().GetIndex())
	}
	hb, err := proto.Marshal(hs)
	if err != nil {
		return fmt.Errorf("raftlog: encode hard state: %w", err)
	}
	if err := eventlog.WriteSnapshot(l.fs, path.Join(l.dir, snapshotFile), [][]byte{binary.AppendUvarint(nil, start), sb, hb}); err != nil {
		return fmt.Errorf("raftlog: %w", err)
	}
	l.snap, l.hs = snap, hs
	if err := l.l.TruncateFront(start); err != nil {
		return fmt.Errorf("raftlog: %w", err)
	}
	return nil
}

// Stats returns the log's size.
func (l *Log) Stats() Stats {
	return Stats{FirstIndex: l.snapIndex() + 1, Entries: uint64(len(l.pos)),
		Records: l.l.NextIndex() - l.l.FirstIndex(), Bytes: l.l.Size()}
}

// Sync makes everything appended durable (one fsync: group commit of a
// Ready). A failure is sticky (eventlog's fail-stop): the member must stop.
func (l *Log) Sync() error { return l.l.Sync() }

// Close syncs what was appended and closes the log. A log whose write or
// fsync failed (now or before) is first cut back to what its last
// successful Sync made durable (eventlog.Log.Reopen): the member stops,
// crash-only, and its restart without a power loss would otherwise read
// bytes that the page cache holds but a failed fsync may never have
// written, count them as durable, and lose them at a later power loss
// (docs/RELIABILITY.md "Disk full"). What the cut drops was never
// reported durable: the Raft log keeps its synced Readies.
func (l *Log) Close() error {
	var err error
	if l.l.Failed() == nil {
		if err = l.l.Sync(); err == nil {
			return l.l.Close()
		}
	}
	nl, _, rerr := l.l.Reopen()
	if rerr != nil {
		l.l.Close()
		return errors.Join(err, fmt.Errorf("raftlog: cut a failed log back to its synced records: %w", rerr))
	}
	return errors.Join(err, nl.Close())
}

// Reopen recovers a log whose write or fsync failed (a full disk) without
// a restart: it keeps what the last successful Sync made durable and
// nothing after it (eventlog.Log.Reopen says why that is the safe cut),
// and reads it again as Open does. What was appended since that Sync must
// be appended again. If it fails (the disk is still full), the log stays
// failed and Reopen may be tried again later; an error that is not for
// want of room may leave it closed.
func (l *Log) Reopen() error {
	nl, _, err := l.l.Reopen()
	if err != nil {
		return fmt.Errorf("raftlog: %w", err)
	}
	if err := nl.Close(); err != nil {
		return fmt.Errorf("raftlog: %w", err)
	}
	fresh, _, _, err := Open(l.fs, l.dir, l.opts)
	if err != nil {
		return err
	}
	*l = *fresh
	return nil
}
