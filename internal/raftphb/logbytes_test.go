package raftphb

import (
	"math/rand/v2"
	"testing"

	"go.etcd.io/raft/v3"
	"go.etcd.io/raft/v3/raftpb"
)

// TestLogBytesMirrorsStorage drives a MemoryStorage and logBytes with the
// same random appends (overlapping, conflicting, below the first index),
// compactions and snapshots, and checks after each that the sizes are the
// storage's entries', and that within and above agree with them.
func TestLogBytesMirrorsStorage(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	ms := raft.NewMemoryStorage()
	var l logBytes
	l.reset(0)
	for step := range 5000 {
		first, _ := ms.FirstIndex()
		last, _ := ms.LastIndex()
		switch op := rng.IntN(10); {
		case op < 7: // append from somewhere around the tail
			at := max(1, last+1-uint64(rng.IntN(4)))
			if rng.IntN(20) == 0 {
				at = max(1, first-uint64(rng.IntN(3))) // reaching below the first
			}
			var es []*raftpb.Entry
			for k := range 1 + rng.IntN(5) {
				es = append(es, &raftpb.Entry{Index: new(at + uint64(k)), Term: new(uint64(1)), Data: make([]byte, rng.IntN(3000))})
			}
			if at > last+1 {
				continue
			}
			if err := ms.Append(es); err != nil {
				t.Fatal(err)
			}
			l.append(es)
		case op < 9 && last >= first: // compact
			i := first + uint64(rng.IntN(int(last-first+1)))
			if err := ms.Compact(i); err != nil {
				t.Fatal(err)
			}
			l.compact(i)
		case op == 9: // a snapshot past everything
			i := last + uint64(rng.IntN(5))
			if err := ms.ApplySnapshot(&raftpb.Snapshot{Metadata: &raftpb.SnapshotMetadata{Index: new(i), Term: new(uint64(1))}}); err != nil {
				continue // older than the storage's
			}
			l.reset(i)
		}
		first, _ = ms.FirstIndex()
		last, _ = ms.LastIndex()
		var sizes []int64
		var total int64
		if last >= first {
			es, err := ms.Entries(first, last+1, 1<<62)
			if err != nil {
				t.Fatal(err)
			}
			for _, e := range es {
				sizes = append(sizes, int64(len(e.GetData()))+entryOverhead)
				total += sizes[len(sizes)-1]
			}
		}
		if l.first != first || l.total != total || len(l.sizes) != len(sizes) {
			t.Fatalf("step %d: logBytes first %d total %d (%d entries), storage first %d total %d (%d entries)",
				step, l.first, l.total, len(l.sizes), first, total, len(sizes))
		}
		limit := rng.Int64N(total + 1)
		i := l.within(limit)
		if l.above(i) > limit || (i >= first && l.above(i-1) <= limit) {
			t.Fatalf("step %d: within(%d) = %d: %d bytes above it, %d above the one before", step, limit, i, l.above(i), l.above(i-1))
		}
	}
}
