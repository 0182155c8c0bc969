package node

// Changing a cell's members (raftphb/members.go): tests in the in-memory
// cell of cell_test.go.

import (
	"math/rand/v2"
	"os"
	"slices"
	"strconv"
	"testing"

	"go.etcd.io/raft/v3/raftpb"

	"github.com/aerie-mq/aerie/internal/eventlog"
	"github.com/aerie-mq/aerie/internal/raftphb"
	"github.com/aerie-mq/aerie/internal/vfs"
)

// reconfig gives every running member the cell's config (its peers): the
// operator's rolling restart, without the restarts. Members that are down
// read it when they start.
func (c *cell) reconfig() {
	for _, m := range c.ms {
		if m.node != nil && !m.out {
			if err := m.node.Replica().SetPeers(c.peers()); err != nil {
				c.failf("member %d: set peers %v: %v", m.id, c.peers(), err)
			}
		}
	}
}

// addMember adds m's slot to the config and starts m with an empty disk.
func (c *cell) addMember(m *member) {
	m.out = false
	c.reconfig()
	c.restart(m)
}

// removeMember drops m's slot from the config. m stops at once, or, with
// linger, runs on for a while with the cell it knew (an operator who
// edits the config before stopping it): the others must refuse it.
func (c *cell) removeMember(m *member, linger int) {
	m.out = true
	c.reconfig()
	if linger == 0 {
		c.crash(m)
		return
	}
	c.at(linger, func() { c.crash(m) })
}

// configured reports whether the serving leader's configuration is the
// cell's config: every member in it a voter under its current id, no
// learner, no one else.
func (c *cell) configured() bool {
	l := c.leader()
	if l == nil {
		return false
	}
	conf := l.node.Replica().Status().Conf
	var want []uint64
	for _, m := range c.ms {
		if m.out {
			continue
		}
		if m.node == nil {
			return false
		}
		want = append(want, m.node.ID())
	}
	slices.Sort(want)
	return len(conf.GetLearners()) == 0 && slices.Equal(slices.Sorted(slices.Values(conf.GetVoters())), want)
}

// membersSeed runs one seed: a cell of 3 (slot 4 out of the config)
// publishes under crashes, partitions, loss and failed fsyncs; at 1.5 s
// member 4 is added, at 4 s one of the original three — the serving
// leader in even seeds — is removed (in seeds divisible by 3 it lingers
// 1 s with the old config). The checker's rules hold throughout (every
// acknowledged batch at every later leader, one pubend log); at the end
// the serving leader's configuration is exactly the config's members,
// and the added member's store holds every acknowledged batch.
func membersSeed(t *testing.T, seed uint64) *cell {
	t.Helper()
	c := membersRun(seed, false, t)
	if len(c.errs) > 0 {
		t.Fatalf("seed %d: %s\n%s", seed, c.errs[0], c.report())
	}
	if len(c.acks) == 0 {
		t.Fatalf("seed %d: nothing acked (%s)", seed, c.report())
	}
	return c
}

// membersRun runs the scenario of membersSeed, with the mutation
// firstFromPeers or not; a configuration other than the config's at the
// end is a failure (c.errs) like the checker's.
func membersRun(seed uint64, mutFirst bool, t testing.TB) *cell {
	c := newCell(t, 4, seed, swarm)
	if mutFirst {
		c.mut |= MutFirstFromPeers
	}
	c.ms[3].out = true
	var removed *member
	c.at(1500, func() { c.addMember(c.ms[3]) })
	c.at(4000, func() {
		removed = c.leaderInEvenSeeds(seed)
		if removed == nil || removed == c.ms[3] {
			removed = c.ms[seed%3]
		}
		linger := 0
		if seed%3 == 0 {
			linger = 1000
		}
		c.removeMember(removed, linger)
	})
	c.run(8000, 4000)
	if len(c.errs) > 0 {
		return c
	}
	if !c.configured() {
		var l []uint64
		if ld := c.leader(); ld != nil {
			l = ld.node.Replica().Status().Conf.GetVoters()
		}
		c.failf("after settling, the leader's voters are %v, not the config's members (member %d removed, 4 added)", l, removed.id)
	} else if id := c.ms[3].node.ID(); raftphb.Slot(id) != 4 || raftphb.Gen(id) == 0 {
		c.failf("the added member is %d, want a later generation of slot 4 (it joined by snapshot)", id)
	}
	return c
}

// TestFirstFromPeersIsCaught: the mutation firstFromPeers (a member takes
// today's config for the cell's first configuration) must fail some seeds.
func TestFirstFromPeersIsCaught(t *testing.T) {
	for seed := uint64(1); seed <= 60; seed++ {
		if c := membersRun(seed, true, t); len(c.errs) > 0 {
			t.Logf("caught at seed %d: %s", seed, c.errs[0])
			return
		}
	}
	t.Fatal("firstFromPeers passed 60 seeds: the test cannot tell a first configuration taken from today's config")
}

// TestCellMembersChange runs membersSeed over many seeds (RAFTPHB_SEEDS=N
// runs more).
func TestCellMembersChange(t *testing.T) {
	seeds := uint64(30)
	if s, err := strconv.ParseUint(os.Getenv("RAFTPHB_SEEDS"), 10, 64); err == nil {
		seeds = s
	}
	if testing.Short() {
		seeds = 8
	}
	total := 0
	for seed := uint64(1); seed <= seeds; seed++ {
		c := membersSeed(t, seed)
		total += len(c.acks)
		if seed == 1 {
			t.Logf("seed 1: %s", c.report())
		}
	}
	t.Logf("seeds 1..%d: %d acked batches, members added and removed, 0 violations", seeds, total)
}

// TestRejoinKeepsPeers: a member that rejoins its cell as a new member
// keeps the cell's slots as they stand (SetPeers), not as they were when
// it was opened: a slot removed from the config stays removed.
func TestRejoinKeepsPeers(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 1))
	nd, err := Open(Config{Replica: raftphb.Config{ID: 1, Peers: []uint64{1, 2, 3}, Jitter: rng.IntN},
		FS: vfs.NewMem(), Dir: "/data", LogOptions: eventlog.Options{SegmentBytes: 2 << 10}, Send: func(*raftpb.Message) {}})
	if err != nil {
		t.Fatal(err)
	}
	if err := nd.Replica().SetPeers([]uint64{1, 2}); err != nil {
		t.Fatal(err)
	}
	// A heartbeat committing past its empty log: it lost its state.
	hb := &raftpb.Message{Type: raftpb.MessageType_MsgHeartbeat.Enum(), From: new(uint64(2)), To: new(uint64(1)),
		Term: new(uint64(3)), Commit: new(uint64(5))}
	if err := nd.Step(hb); err != nil {
		t.Fatal(err)
	}
	if _, err := nd.Write(); err != nil {
		t.Fatal(err)
	}
	if raftphb.Gen(nd.ID()) == 0 {
		t.Fatalf("member %d did not rejoin under a new generation", nd.ID())
	}
	if got := nd.Replica().Peers(); !slices.Equal(got, []uint64{1, 2}) {
		t.Fatalf("after rejoining as %d the cell's slots are %v, want [1 2] (set before)", nd.ID(), got)
	}
}

// TestRemovedWhileCutOffRejoins: a member removed from the config while
// cut off from the cell never applies its removal (the leader sends it
// nothing more). Listed again 2.5 s later — still running with its old
// state, or, if a crash took it down meanwhile, restarted from its old
// data directory — it is told by the members that removed its id, gives
// the id up and rejoins as a new member (raftphb.Replica.tellRemoved).
// At the end the serving leader's configuration is the config's three
// members, the listed-again one under a later generation.
func TestRemovedWhileCutOffRejoins(t *testing.T) {
	seeds := uint64(12)
	if s, err := strconv.ParseUint(os.Getenv("RAFTPHB_SEEDS"), 10, 64); err == nil {
		seeds = s
	}
	noCuts := faults{loss: 0.05, maxDelay: 8, diskMs: 3, crashes: true, fsyncFail: true}
	var removedCutOff int
	for seed := uint64(1); seed <= seeds; seed++ {
		c := newCell(t, 3, seed, noCuts)
		x := c.ms[seed%3]
		var removed bool
		c.at(1500, func() {
			c.cut[x.id] = true
			x.out = true
			c.reconfig()
		})
		c.at(4000, func() {
			if l := c.leader(); l != nil && !slices.Contains(l.node.Replica().Status().Conf.GetVoters(), x.id) {
				removed = true
			}
			x.out = false
			c.reconfig()
			clear(c.cut)
			c.restart(x) // if a crash took it down: from its old data directory
		})
		c.run(8000, 4000)
		if len(c.errs) > 0 {
			t.Fatalf("seed %d: %s\n%s", seed, c.errs[0], c.report())
		}
		if !c.configured() {
			var v []uint64
			if l := c.leader(); l != nil {
				v = l.node.Replica().Status().Conf.GetVoters()
			}
			t.Fatalf("seed %d: after settling, the leader's voters are %v, not the config's three members (member %d listed again)\n%s", seed, v, x.id, c.report())
		}
		if removed {
			removedCutOff++
			if raftphb.Gen(x.node.ID()) == 0 {
				t.Fatalf("seed %d: member %d, removed while cut off, is a voter under its old id", seed, x.id)
			}
		}
	}
	if removedCutOff == 0 {
		t.Fatalf("in none of %d seeds was the cut-off member removed before it was listed again", seeds)
	}
	t.Logf("%d seeds, %d with the member removed while cut off, every one rejoined", seeds, removedCutOff)
}
