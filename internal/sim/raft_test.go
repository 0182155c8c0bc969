package sim

import (
	"slices"
	"testing"

	"github.com/aerie-mq/aerie/internal/gd"
	raftnode "github.com/aerie-mq/aerie/internal/raftphb/node"
)

// TestReplicatedCells runs a batch with every PHB drawn as a replicated
// cell or not, and leaders crashed, partitioned off and failing fsyncs:
// no violation, and leaders do change (more members served than there
// are cells).
func TestReplicatedCells(t *testing.T) {
	serves, cells := 0, 0
	for s := uint64(1); s <= 12; s++ {
		o := DefaultOptions(s)
		o.Faults = []string{FaultReplicas, FaultCrash, FaultPartition, FaultIOError, FaultDrift, FaultLoss}
		res, err := Run(o)
		if err != nil {
			t.Fatal(err)
		}
		if len(res.Violations) > 0 {
			t.Fatalf("seed %d: %v\n%s", s, res.Violations[0], res.Plan)
		}
		p, _ := makePlan(o, seedRng(s))
		for c, ms := range p.topo.Cells {
			if len(ms) > 1 && c[0] == 'p' {
				cells++
			}
		}
		serves += res.LeaderServes
	}
	t.Logf("%d replicated cells, %d leaders served", cells, serves)
	if cells == 0 || serves < 2*cells {
		t.Fatalf("%d replicated cells, %d leaders served: want failovers", cells, serves)
	}
}

// TestReplicatedCellsFailover is TestReplicatedCells with fast failover
// (FaultFailover): followers whose link to their leader closes — the
// leader crashed, hung or was cut off — campaign at once. No violation,
// leaders do change, and some changes began with such a campaign.
func TestReplicatedCellsFailover(t *testing.T) {
	serves, campaigns := 0, uint64(0)
	for s := uint64(1); s <= 12; s++ {
		o := DefaultOptions(s)
		o.Faults = []string{FaultReplicas, FaultFailover, FaultCrash, FaultCut, FaultPartition, FaultIOError, FaultDrift, FaultLoss}
		res, err := Run(o)
		if err != nil {
			t.Fatal(err)
		}
		if len(res.Violations) > 0 {
			t.Fatalf("seed %d: %v\n%s", s, res.Violations[0], res.Plan)
		}
		serves += res.LeaderServes
		campaigns += res.RaftLinkCampaigns
	}
	t.Logf("%d leaders served, %d campaigns on a closed link to the leader", serves, campaigns)
	if campaigns == 0 {
		t.Fatal("no follower campaigned on a closed link to its leader")
	}
}

// TestOracleBitesReplicated breaks the replicated PHB's three rules and
// requires the oracle to catch each within a bounded number of seeds:
// acknowledging a batch before a majority holds it (the ack precedes the
// commit: I9), a new leader allocating ticks from its clock instead of
// above the committed high-water mark (with clocks offset, a leader change
// reuses ticks the old leader announced as silence: I9), and compacting
// the Raft log past what the member's pubend store has fsynced (a crash
// then loses committed records that no log holds any more: the member
// cannot recover, I9). For the tick rule partitions, not crashes, move the
// leadership, so that no PHB restarts; the compaction rule needs crashes.
func TestOracleBitesReplicated(t *testing.T) {
	cases := []struct {
		name    string
		raftMut raftnode.Mutation
		mut     gd.Mutation
		faults  []string
	}{
		{"ack before the majority commit", raftnode.MutAckOwnFsync, 0, []string{FaultReplicas}},
		{"new leader allocates ticks from its clock", 0, gd.MutReuseTicks, []string{FaultReplicas, FaultPartition, FaultDrift}},
		{"compact the Raft log past the store's fsync", raftnode.MutCompactUnsynced, 0, []string{FaultReplicas, FaultCrash}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			for s := uint64(1); s <= 40; s++ {
				o := DefaultOptions(s)
				o.Faults, o.RaftMutation, o.Mutation = c.faults, c.raftMut, c.mut
				// The cells' own publishers only: publishers at SHBs
				// (relay.go) publish to plain PHBs, beside the point here.
				o.Anywhere = "off"
				res, err := Run(o)
				if err != nil {
					t.Fatal(err)
				}
				for _, v := range res.Violations {
					if v.Invariant == "I9" {
						t.Logf("caught after %d seeds: %v", s, v)
						return
					}
				}
				if len(res.Violations) > 0 {
					t.Logf("seed %d: other violation first: %v", s, res.Violations[0])
				}
			}
			t.Fatalf("no I9 violation in 40 seeds: the oracle does not catch %q", c.name)
		})
	}
}

// TestReplicatedCellsWipes: crashes of replicated members wipe their disk
// (FaultWipe); the wiped members rejoin their cells as new members while
// the cells publish on, with no violation.
func TestReplicatedCellsWipes(t *testing.T) {
	var wipes, rejoins uint64
	// About one seed in ten wipes a disk (the faults are drawn, a crash
	// must hit a replicated member while its cell is settled).
	for s := uint64(1); s <= 100 && wipes < 4; s++ {
		o := DefaultOptions(s)
		o.Faults = []string{FaultReplicas, FaultCrash, FaultWipe}
		res, err := Run(o)
		if err != nil {
			t.Fatal(err)
		}
		if len(res.Violations) > 0 {
			t.Fatalf("seed %d: %v\n%s", s, res.Violations[0], res.Plan)
		}
		wipes, rejoins = wipes+res.RaftWipes, rejoins+res.RaftRejoins
	}
	t.Logf("%d disks wiped, %d members rejoined", wipes, rejoins)
	if wipes == 0 || rejoins < wipes {
		t.Fatalf("%d disks wiped, %d members rejoined: want wipes, each followed by a rejoin", wipes, rejoins)
	}
}

// TestOracleBitesAskSameMember: with requests repeated forever to a member
// of an upstream cell that does not answer (gd askUp switched off), a
// durable catch-up behind a replicated PHB cell can wait forever on a
// member that no longer serves, and the oracle must report the events it
// never got (I11); with the rule, the same seed passes. Seed 1193 shows it
// since first-time knowledge travels in runs (gd coalesce.go), which 439
// no longer does; 439 did since the serving leader pipelines its batches
// (277 before, 350 before SubReqs were shared). The test tries those first
// and then scans, so that a change of timing finds another seed instead
// of failing. Its
// seeds were found before overloaded links joined the default faults, and
// before nack answers carried the silence that follows them
// (gd.silentRunEnd), when the swarm ran congestion control only with
// overloaded links; it keeps the fault set, congestion control off and the
// answer rule they were found with (with congestion control in every run,
// seeds 166 and 93 no longer catch it, and a scan of 600 seeds takes longer
// than the package's test budget).
//
// It runs as the swarm did before pubends trimmed under load and had a
// size bound (TrimOnlyWhenIdle, NoSizeBound: with them no seed of 600 shows
// the scenario, for the reason below), and with the leader's trim entries
// off (raftnode.MutLeaderTrimOnly): with
// them, no seed of 2 300 scanned (1–1500 and 7000–7400 with every default
// fault, 1–800 with replicas, crashes, partitions and cuts) showed the
// stuck request under the mutation, and seed 439's requests moved on 4
// times instead of 13 without it: a new leader restored from a trim's
// snapshot knows the release point the old leader reached, so a durable
// subscriber resuming in a run that releases early gets a gap notice
// where it used to need a replay (docs/known-issues/trim-entries-ask.md).
// And it runs without release past gone downstreams (gd.Config.ReleaseGone):
// with it, the SHB whose request is stuck stops acknowledging, is judged
// gone after max_retain, and its durable subscriber gets a gap notice for
// what the stuck request held (seed 1123: I11 without, none with), which
// the oracle allows.
func TestOracleBitesAskSameMember(t *testing.T) {
	if testing.Short() {
		t.Skip("simulates swarm runs until one shows the fault")
	}
	// Seeds that caught it first, with the clients' mode of replicated
	// cells they ran with (since 2026-11-28 every publisher of a cell is
	// ordered, which moved what each seed does: 1193, 439, 277 and 350
	// caught it before; since pubends restore cold and read catch-ups
	// back from their log, 1123 under the drawn mode, and none of 1–600
	// under any mode), then a search under the drawn mode.
	type run struct {
		clients string
		seed    uint64
	}
	runs := []run{{"", 1123}, {"redirect", 166}, {"forward", 93}}
	for s := uint64(1); s <= 600; s++ {
		runs = append(runs, run{"", s})
	}
	for _, r := range runs {
		seed := r.seed
		o := DefaultOptions(seed)
		o.Faults, o.NoCongestionControl = faultsBeforeOverload(), true
		o.RaftClients = r.clients
		o.Mutation, o.RaftMutation = gd.MutAskSameMember|gd.MutExactNackAnswers, raftnode.MutLeaderTrimOnly
		o.NoSizeBound, o.TrimOnlyWhenIdle = true, true
		o.Config.ReleaseGone = false // see below
		res, err := Run(o)
		if err != nil {
			t.Fatal(err)
		}
		if len(res.Violations) == 0 || res.Violations[0].Invariant != "I11" {
			continue
		}
		t.Logf("seed %d (raft clients %q) caught: %v", seed, r.clients, res.Violations[0])
		o = DefaultOptions(seed)
		o.Faults, o.NoCongestionControl = faultsBeforeOverload(), true
		o.RaftClients = r.clients
		o.Mutation, o.RaftMutation = gd.MutExactNackAnswers, raftnode.MutLeaderTrimOnly
		o.NoSizeBound, o.TrimOnlyWhenIdle = true, true
		o.Config.ReleaseGone = false
		res, err = Run(o)
		if err != nil {
			t.Fatal(err)
		}
		if len(res.Violations) > 0 || res.AsksMoved == 0 {
			t.Fatalf("seed %d with requests moved on: %d moved, violations %v", seed, res.AsksMoved, res.Violations)
		}
		return
	}
	t.Fatal("no I11 in 600 seeds: the oracle does not catch a request repeated to a member that never answers")
}

// TestReplicatedCellsChunked is TestReplicatedCells and
// TestReplicatedCellsWipes with snapshots cut into 256-byte chunks, so
// that every snapshot a lagging or rejoining member needs travels in many
// of them, under crashes, wiped disks, partitions and loss: no violation,
// and chunked snapshots do arrive.
func TestReplicatedCellsChunked(t *testing.T) {
	var chunked, snapshots uint64
	for s := uint64(1); s <= 12; s++ {
		o := DefaultOptions(s)
		o.Faults = []string{FaultReplicas, FaultCrash, FaultWipe, FaultPartition, FaultLoss}
		o.RaftChunkBytes = 256
		res, err := Run(o)
		if err != nil {
			t.Fatal(err)
		}
		if len(res.Violations) > 0 {
			t.Fatalf("seed %d: %v\n%s", s, res.Violations[0], res.Plan)
		}
		chunked, snapshots = chunked+res.RaftChunked, snapshots+res.RaftSnapshots
	}
	t.Logf("%d snapshots installed, %d received in chunks", snapshots, chunked)
	if chunked == 0 {
		t.Fatal("no snapshot received in chunks")
	}
}

// faultsBeforeOverload is the default fault set before overloaded links
// (congestion control) joined it, and fast failover and cache shedding
// after them: tests whose seeds were found with it keep it, as
// regressions.txt's lines keep theirs.
func faultsBeforeOverload() []string {
	return slices.DeleteFunc(FaultNames(), func(f string) bool {
		return f == FaultOverload || f == FaultFailover || f == FaultSummary || f == FaultShed
	})
}
