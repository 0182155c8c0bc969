package raftlog

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"testing"

	"go.etcd.io/raft/v3/raftpb"
	"google.golang.org/protobuf/proto"

	"github.com/aerie-mq/aerie/internal/eventlog"
	"github.com/aerie-mq/aerie/internal/vfs"
)

// state is what a Raft log holds at one moment.
type state struct {
	hs   *raftpb.HardState
	ents []*raftpb.Entry
}

func (s state) String() string {
	out := fmt.Sprintf("hs=%v [", s.hs.GetCommit())
	for _, e := range s.ents {
		out += fmt.Sprintf(" %d/%d", e.GetTerm(), e.GetIndex())
	}
	return out + " ]"
}

func equal(a, b state) bool {
	if !proto.Equal(a.hs, b.hs) || len(a.ents) != len(b.ents) {
		return false
	}
	for i := range a.ents {
		if !proto.Equal(a.ents[i], b.ents[i]) {
			return false
		}
	}
	return true
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
		t.Run(fmt.Sprint(seed), func(t *testing.T) { crashRun(t, seed) })
	}
}

func crashRun(t *testing.T, seed uint64) {
	rng := rand.New(rand.NewPCG(seed, 7))
	fs := vfs.NewMem()
	opts := eventlog.Options{SegmentBytes: 512}
	l, st, _, err := Open(fs, "/raft", opts)
	if err != nil {
		t.Fatal(err)
	}
	cur := state{hs: st.HardState, ents: st.Entries}
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
			got := state{hs: st.HardState, ents: st.Entries}
			ok := false
			for _, h := range history {
				ok = ok || equal(got, h)
			}
			if !ok {
				t.Fatalf("step %d: recovered %v, want one of %v", step, got, history)
			}
			cur, history = got, []state{got}
			if cur.hs != nil {
				term, commit = max(term, cur.hs.GetTerm()), cur.hs.GetCommit()
			}
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
				got := state{hs: st.HardState, ents: st.Entries}
				ok := false
				for _, h := range history {
					ok = ok || equal(got, h)
				}
				if !ok {
					t.Fatalf("step %d: recovered %v after a failed fsync, want one of %v", step, got, history)
				}
				cur, history = got, []state{got}
				if cur.hs != nil {
					term, commit = max(term, cur.hs.GetTerm()), cur.hs.GetCommit()
				}
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
}

// TestGapIsCorruption: entries that skip an index are refused, not
// repaired: the log is not one Raft wrote.
func TestGapIsCorruption(t *testing.T) {
	fs := vfs.NewMem()
	l, _, _, err := Open(fs, "/raft", eventlog.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if err := l.Append([]*raftpb.Entry{entry(1, 1, "a"), entry(1, 3, "c")}, nil); err != nil {
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
