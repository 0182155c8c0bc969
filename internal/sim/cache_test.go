package sim

import "testing"

// TestDeliveryFetchesAboveGaps: with small caches, SHBs recovering gaps
// drop the payloads above them and read them back for delivery, without a
// violation (gd.evictAboveDelivery, fetchForDelivery).
func TestDeliveryFetchesAboveGaps(t *testing.T) {
	fetches, runs := 0, 0
	cleanRuns(t, 40, DefaultOptions, func(p plan) bool { return p.cacheBytes > 0 }, func(res Result) bool {
		runs++
		fetches += res.DeliveryFetches
		return fetches > 0 && runs >= 4
	})
	t.Logf("%d runs with small caches: %d rounds of payloads fetched back for delivery", runs, fetches)
	if fetches == 0 {
		t.Fatalf("%d runs never fetched payloads back for delivery", runs)
	}
}
