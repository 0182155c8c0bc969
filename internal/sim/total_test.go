package sim

import "testing"

// TestTotalOrderSubscribersAgree: subscriptions in uniform total order at
// different SHBs receive their common events in the same order (docs/CONCEPTS.md
// I4), through the swarm's faults. The oracle checks each session's order
// as it goes; this compares the sessions themselves.
func TestTotalOrderSubscribersAgree(t *testing.T) {
	pairs, common := 0, 0
	for seed := uint64(1); seed <= 12; seed++ {
		res, err := Run(DefaultOptions(seed))
		if err != nil {
			t.Fatal(err)
		}
		if len(res.Violations) > 0 {
			t.Fatalf("seed %d: %v", seed, res.Violations[0])
		}
		ss := res.TotalOrders
		for i := range ss {
			for j := i + 1; j < len(ss); j++ {
				if ss[i].Node == ss[j].Node {
					continue
				}
				n := sameRelativeOrder(t, seed, ss[i], ss[j])
				if n >= 2 {
					pairs++
					common += n
				}
			}
		}
	}
	if pairs < 3 {
		t.Fatalf("only %d pairs of total-order sessions at different SHBs shared two or more events", pairs)
	}
	t.Logf("%d pairs of sessions at different SHBs, %d common events, all in the same order", pairs, common)
}

// sameRelativeOrder fails the test unless the events a and b both got come
// in the same order in both; it returns how many they share.
func sameRelativeOrder(t *testing.T, seed uint64, a, b TotalOrderSession) int {
	t.Helper()
	inB := map[string]int{}
	for i, k := range b.Order {
		inB[k] = i
	}
	n, last := 0, -1
	for _, k := range a.Order {
		i, ok := inB[k]
		if !ok {
			continue
		}
		if i < last {
			t.Fatalf("seed %d: %s at %s and %s at %s disagree on the order of %s", seed, a.Sub, a.Node, b.Sub, b.Node, k)
		}
		last = i
		n++
	}
	return n
}
