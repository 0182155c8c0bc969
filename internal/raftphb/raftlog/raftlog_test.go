package raftlog

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"

	"go.etcd.io/raft/v3/raftpb"
	"google.golang.org/protobuf/proto"

	"github.com/aerie-mq/aerie/internal/eventlog"
	"github.com/aerie-mq/aerie/internal/raftphb"
	"github.com/aerie-mq/aerie/internal/vfs"
)

// state is what a Raft log holds at one moment: the entries from index 1
// (those up to snap were compacted away) and the hard state.
type state struct {
	hs   *raftpb.HardState
	ents []*raftpb.Entry
	snap uint64
}

func (s state) String() string {
	out := fmt.Sprintf("hs=%v snap=%d [", s.hs.GetCommit(), s.snap)
	for _, e := range s.ents[s.snap:] {
		out += fmt.Sprintf(" %d/%d", e.GetTerm(), e.GetIndex())
	}
	return out + " ]"
}

// recovered is what Open restored, as a state whose compacted entries
// are taken from like (the state it is compared with).
func recovered(st raftphb.Restored, like state) state {
	snap := st.Snapshot.GetMetadata().GetIndex()
	ents := slices.Clone(like.ents[:min(snap, uint64(len(like.ents)))])
	return state{hs: st.HardState, ents: append(ents, st.Entries...), snap: snap}
}

func equal(a, b state) bool {
	if a.snap != b.snap || !proto.Equal(a.hs, b.hs) || len(a.ents) != len(b.ents) {
		return false
	}
	for i := a.snap; i < uint64(len(a.ents)); i++ {
		if !proto.Equal(a.ents[i], b.ents[i]) {
			return false
		}
	}
	return true
}

// matches returns the state of history that Open's st is, if any.
func matches(st raftphb.Restored, history []state) (state, bool) {
	for _, h := range history {
		if got := recovered(st, h); equal(got, h) {
			return got, true
		}
	}
	return state{}, false
}

func entry(term, index uint64, data string) *raftpb.Entry {
	return &raftpb.Entry{Term: new(term), Index: new(index), Type: raftpb.EntryNormal.Enum(), Data: []byte(data)}
}

// TestCrashKeepsSyncedReadies writes random Readies — appends, overwrites
// of an uncommitted suffix by a later term, hard states — syncing each,
// with fsync failures and crashes (MemFS keeps synced bytes and a random
// prefix of the rest) in between. After every crash the recovered log is
// one the member had written: never older than the last successful Sync,
// and never a state it did not pass through (the records of one Ready
// survive as a prefix: entries before the hard state).
func TestCrashKeepsSyncedReadies(t *testing.T) {
	for seed := uint64(1); seed <= 200; seed++ {
		t.Run(fmt.Sprint(seed), func(t *testing.T) { crashRun(t, seed, false) })
	}
}

// TestCompactionSurvivesCrashes is TestCrashKeepsSyncedReadies with
// compactions (to a committed index) and snapshots received from a leader
// (ApplySnapshot, past the log's end) between Readies, in small segments
// so that compaction removes some: a compaction is durable when it
// returns, and the recovered log never holds an entry at or below its
// snapshot, nor loses one above it.
func TestCompactionSurvivesCrashes(t *testing.T) {
	for seed := uint64(1); seed <= 200; seed++ {
		t.Run(fmt.Sprint(seed), func(t *testing.T) { crashRun(t, seed, true) })
	}
}

func crashRun(t *testing.T, seed uint64, compact bool) {
	rng := rand.New(rand.NewPCG(seed, 7))
	fs := vfs.NewMem()
	opts := eventlog.Options{SegmentBytes: 512}
	l, st, _, err := Open(fs, "/raft", opts)
	if err != nil {
		t.Fatal(err)
	}
	cur := state{hs: st.HardState, ents: st.Entries}
	compactions, installs := 0, 0
	// history holds the state after each record written since the last
	// successful sync; history[0] is the synced state.
	history := []state{cur}
	term, commit := uint64(1), uint64(0)
	crashes := 0
	for step := 0; step < 300; step++ {
		switch {
		case rng.IntN(20) == 0:
			// Crash (possibly after a failed fsync left bytes behind).
			fs.Crash(rng)
			crashes++
			l, st, _, err = Open(fs, "/raft", opts)
			if err != nil {
				t.Fatalf("step %d: reopen: %v", step, err)
			}
			got, ok := matches(st, history)
			if !ok {
				t.Fatalf("step %d: recovered %v, want one of %v", step, recovered(st, history[0]), history)
			}
			cur, history = got, []state{got}
			term, commit = recoveredTerms(term, cur)
		case compact && rng.IntN(8) == 0 && commit > cur.snap:
			// Compact to a committed index (the state machine holds it).
			i := cur.snap + 1 + uint64(rng.IntN(int(commit-cur.snap)))
			snap := &raftpb.Snapshot{Metadata: &raftpb.SnapshotMetadata{Index: new(i), Term: new(cur.ents[i-1].GetTerm())}, Data: []byte("ref")}
			if err := l.Compact(snap); err != nil {
				t.Fatalf("step %d: compact to %d: %v", step, i, err)
			}
			cur.snap = i
			history = []state{cur}
			compactions++
		case compact && rng.IntN(40) == 0:
			// A snapshot from the leader, past the log's end: the log is
			// replaced; its hard state commits at least the snapshot.
			i := uint64(len(cur.ents)) + 1 + uint64(rng.IntN(5))
			term++
			snap := &raftpb.Snapshot{Metadata: &raftpb.SnapshotMetadata{Index: new(i), Term: new(term)}, Data: []byte("ref")}
			if err := l.ApplySnapshot(snap); err != nil {
				t.Fatalf("step %d: apply snapshot at %d: %v", step, i, err)
			}
			cur.ents = cur.ents[:0:0]
			for k := uint64(1); k <= i; k++ {
				cur.ents = append(cur.ents, entry(term, k, "snapshot"))
			}
			hs := &raftpb.HardState{Term: new(term)}
			if cur.hs != nil {
				hs = proto.CloneOf(cur.hs)
			}
			hs.Commit = new(max(hs.GetCommit(), i))
			cur.hs, cur.snap, commit = hs, i, i
			history = []state{cur}
			installs++
		default:
			// One Ready: maybe a new term that overwrites part of the
			// uncommitted suffix, some entries, a hard state.
			var ents []*raftpb.Entry
			next := uint64(len(cur.ents)) + 1
			if rng.IntN(4) == 0 {
				term++
				if next > commit+1 {
					next = commit + 1 + uint64(rng.IntN(int(next-commit)))
				}
			}
			for range rng.IntN(4) {
				ents = append(ents, entry(term, next, fmt.Sprintf("s%d-%d", step, next)))
				next++
			}
			var hs *raftpb.HardState
			if rng.IntN(2) == 0 {
				last := next - 1
				commit = min(last, commit+uint64(rng.IntN(3)))
				hs = &raftpb.HardState{Term: new(term), Vote: new(uint64(1)), Commit: new(commit)}
			}
			if len(ents) == 0 && hs == nil {
				continue
			}
			if err := l.Append(ents, hs); err != nil {
				t.Fatal(err)
			}
			for _, e := range ents {
				cur.ents = append(cur.ents[:e.GetIndex()-1:e.GetIndex()-1], e)
				if e.GetIndex() <= cur.snap {
					t.Fatalf("step %d: the model overwrote compacted entry %d", step, e.GetIndex())
				}
				history = append(history, cur)
			}
			if hs != nil {
				cur.hs = hs
				history = append(history, cur)
			}
			if rng.IntN(10) == 0 {
				fs.InjectError(vfs.OpSync, "", errors.New("injected fsync failure"))
				if err := l.Sync(); err == nil {
					t.Fatal("sync with an injected failure succeeded")
				}
				// Fail-stop: the member crashes now.
				fs.Crash(rng)
				crashes++
				l, st, _, err = Open(fs, "/raft", opts)
				if err != nil {
					t.Fatalf("step %d: reopen after failed fsync: %v", step, err)
				}
				got, ok := matches(st, history)
				if !ok {
					t.Fatalf("step %d: recovered %v after a failed fsync, want one of %v", step, recovered(st, history[0]), history)
				}
				cur, history = got, []state{got}
				term, commit = recoveredTerms(term, cur)
				continue
			}
			if err := l.Sync(); err != nil {
				t.Fatal(err)
			}
			history = []state{cur}
		}
	}
	if crashes == 0 {
		t.Fatalf("seed %d crashed nothing", seed)
	}
	if compact && compactions == 0 {
		t.Fatalf("seed %d compacted nothing", seed)
	}
}

// recoveredTerms returns the model's term and commit index after a crash
// recovered cur: what its hard state says, or, when the crash took every
// hard state since the snapshot, what the snapshot commits (a commit the
// member had not synced is gone with it).
func recoveredTerms(term uint64, cur state) (uint64, uint64) {
	return max(term, cur.hs.GetTerm()), max(cur.hs.GetCommit(), cur.snap)
}

// TestGapIsCorruption: entries that skip an index are refused, not
// repaired: the log is not one Raft wrote.
func TestGapIsCorruption(t *testing.T) {
	fs := vfs.NewMem()
	l, _, _, err := Open(fs, "/raft", eventlog.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if err := l.Append([]*raftpb.Entry{entry(1, 1, "a"), entry(1, 3, "c")}, nil); err == nil {
		t.Fatal("Append took an entry after a gap")
	}
	// Write the gap behind Append's back, as a bug or a bad disk would.
	b, err := proto.Marshal(entry(1, 3, "c"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := l.l.Append(append([]byte{kindEntry}, b...)); err != nil {
		t.Fatal(err)
	}
	if err := l.Sync(); err != nil {
		t.Fatal(err)
	}
	l.Close()
	if _, _, _, err := Open(fs, "/raft", eventlog.Options{}); !errors.Is(err, ErrCorrupt) {
		t.Fatalf("open = %v, want ErrCorrupt", err)
	}
}
