package sim

import "testing"

// TestDeliveryFetchesAboveGaps: with small caches, SHBs recovering gaps
// drop the payloads above them and read them back for delivery, without a
// violation (gd.evictAboveDelivery, fetchForDelivery).
func TestDeliveryFetchesAboveGaps(t *testing.T) {
	fetches, runs := 0, 0
	for s := uint64(1); s <= 40 && (fetches == 0 || runs < 4); s++ {
		o := DefaultOptions(s)
		p, err := makePlan(o, seedRng(s))
		if err != nil {
			t.Fatal(err)
		}
		if p.cacheBytes == 0 {
			continue
		}
		res, err := Run(o)
		if err != nil {
			t.Fatal(err)
		}
		if len(res.Violations) > 0 {
			t.Fatalf("seed %d: %v\n%s", s, res.Violations[0], res.Plan)
		}
		runs++
		fetches += res.DeliveryFetches
	}
	t.Logf("%d runs with small caches: %d rounds of payloads fetched back for delivery", runs, fetches)
	if fetches == 0 {
		t.Fatalf("%d runs never fetched payloads back for delivery", runs)
	}
}
