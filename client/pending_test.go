package client

import (
	"math/rand/v2"
	"testing"
)

// TestPendingSetAgreesWithMap drives the ring and a map with the same
// random puts and takes, consecutive seqs as a client makes them, some
// left unanswered for long (so that two pending seqs share a slot and the
// ring must grow), and compares every answer and the resend order.
func TestPendingSetAgreesWithMap(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	var s pendingSet
	want := map[uint64]*publish{}
	var seq uint64
	for step := 0; step < 200000; step++ {
		switch {
		case r.IntN(3) > 0 && len(want) < 1000:
			seq++
			p := &publish{seq: seq}
			s.put(p)
			want[seq] = p
		case seq > 0:
			// Mostly the oldest few, sometimes any seq ever made (an
			// ack for one answered before, or one long unanswered).
			q := seq - uint64(r.IntN(min(int(seq), 8)))
			if r.IntN(50) == 0 {
				q = 1 + uint64(r.IntN(int(seq)))
			}
			if got, w := s.take(q), want[q]; got != w {
				t.Fatalf("step %d: take(%d) = %v, want %v", step, q, got, w)
			}
			delete(want, q)
		}
		if s.len() != len(want) {
			t.Fatalf("step %d: len %d, want %d", step, s.len(), len(want))
		}
	}
	order := s.inOrder()
	if len(order) != len(want) {
		t.Fatalf("inOrder: %d publishes, want %d", len(order), len(want))
	}
	for i, p := range order {
		if want[p.seq] != p || (i > 0 && order[i-1].seq >= p.seq) {
			t.Fatalf("inOrder[%d] = seq %d: not pending, or out of order", i, p.seq)
		}
	}
	if all := s.takeAll(); len(all) != len(want) || s.len() != 0 || len(s.inOrder()) != 0 {
		t.Fatalf("takeAll: %d publishes, want %d; %d left", len(all), len(want), s.len())
	}
}

// TestPendingSetSharedSlot: seq 1 stays unanswered while 64 later
// publishes are acked; seq 65 would share its slot in a 64-slot ring.
func TestPendingSetSharedSlot(t *testing.T) {
	var s pendingSet
	first := &publish{seq: 1}
	s.put(first)
	for q := uint64(2); q <= 65; q++ {
		s.put(&publish{seq: q})
		if q < 65 && s.take(q) == nil {
			t.Fatalf("take(%d) found nothing", q)
		}
	}
	if len(s.slots) <= pendingMinSlots {
		t.Fatalf("ring of %d slots holds seqs 1 and 65 apart", len(s.slots))
	}
	if s.take(65) == nil || s.take(1) != first || s.len() != 0 {
		t.Fatal("the two publishes that shared a slot are not both there")
	}
}

func TestPendingSetNoAllocs(t *testing.T) {
	var s pendingSet
	ps := make([]publish, 2048)
	for i := range ps {
		ps[i].seq = uint64(i + 1)
	}
	i := 0
	allocs := testing.AllocsPerRun(1000, func() {
		s.put(&ps[i%len(ps)])
		if i >= 1023 {
			s.take(ps[(i-1023)%len(ps)].seq)
		}
		i++
	})
	if allocs > 0 {
		t.Fatalf("%.2f allocations per put and take once the ring has grown", allocs)
	}
}
