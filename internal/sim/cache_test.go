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

// TestRaftLogByteBound: with replicated PHBs whose members bound their Raft
// entries to a few KiB, members compact by size and the runs stay clean.
func TestRaftLogByteBound(t *testing.T) {
	byBytes, runs := uint64(0), 0
	withReplicas := func(p plan) bool { return p.raftMaxBytes > 0 && p.faults[FaultReplicas] }
	cleanRuns(t, 60, DefaultOptions, withReplicas, func(res Result) bool {
		runs++
		byBytes += res.RaftByteCompactions
		return byBytes > 0 && runs >= 4
	})
	t.Logf("%d runs with a small Raft byte bound: %d compactions by size", runs, byBytes)
	if byBytes == 0 {
		t.Fatalf("%d runs never compacted a Raft log by size", runs)
	}
}

// TestShedInSwarm: brokers that shed their caches now and then
// (FaultShed, as over a memory budget) lose, duplicate and reorder
// nothing: the swarm's runs with it pass the oracle, and their caches did
// give payloads up.
func TestShedInSwarm(t *testing.T) {
	sheds, bytes, runs := 0, 0, 0
	cleanRuns(t, 40, DefaultOptions, func(p plan) bool { return p.faults[FaultShed] }, func(res Result) bool {
		runs++
		sheds, bytes = sheds+res.Sheds, bytes+res.ShedBytes
		return bytes > 0 && runs >= 4
	})
	t.Logf("%d runs with shedding: %d episodes, %d payload bytes shed", runs, sheds, bytes)
	if sheds == 0 || bytes == 0 {
		t.Fatalf("%d runs: %d episodes shed %d bytes: shedding was not exercised", runs, sheds, bytes)
	}
}
