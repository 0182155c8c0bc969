package node

// A member whose disk is wiped rejoins its cell as a new member (Raft
// thesis §4): tests in the in-memory cell of cell_test.go.

import (
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"
	"testing"

	"go.etcd.io/raft/v3/raftpb"

	"github.com/aerie-mq/aerie/internal/raftphb"
	"github.com/aerie-mq/aerie/internal/vfs"
)

// wipe crashes m and gives it a new, empty disk: an operator replaced it.
func (c *cell) wipe(m *member) {
	c.crash(m)
	m.fs = vfs.NewMem()
	c.wiped++
	c.rejoinLog = append(c.rejoinLog, fmt.Sprintf("t=%dms: member %d wiped", c.now, m.id))
}

// leader returns the serving leader, or nil.
func (c *cell) leader() *member {
	for _, m := range c.ms {
		if m.node != nil && m.node.Replica().Status().Serving {
			return m
		}
	}
	return nil
}

// crashAnother crashes and returns an original member other than w: the
// leader, unless w leads by now, then the first other member.
func (c *cell) crashAnother(w *member) *member {
	gone := c.leader()
	if gone == w {
		for _, m := range c.ms {
			if m != w {
				gone = m
				break
			}
		}
	}
	c.crash(gone)
	return gone
}

// ackedSince counts the acks from the from-th on that member not gave.
func (c *cell) ackedSince(from int, not *member) int {
	n := 0
	for _, a := range c.acks[from:] {
		if a.by != not.id {
			n++
		}
	}
	return n
}

// settled reports whether every member is up, holds some of the log and
// is a voter, under its current id, of the serving leader's
// configuration, which has no learner: no replacement is under way.
// (Wiping a second member before the first is replaced loses a majority's
// state in a cell of 3; so does wiping one while another has never held
// an entry, which the rule takes for a lost disk as well.)
func (c *cell) settled() bool {
	l := c.leader()
	if l == nil {
		return false
	}
	conf := l.node.Replica().Status().Conf
	if len(conf.GetLearners()) > 0 || len(conf.GetVoters()) != len(c.ms) {
		return false
	}
	for _, m := range c.ms {
		if m.node == nil || m.node.Replica().Status().Applied == 0 || !slices.Contains(conf.GetVoters(), m.node.ID()) {
			return false
		}
	}
	return true
}

// currentVoters returns every member's current id, sorted: the
// configuration once no replacement is under way.
func (c *cell) currentVoters() []uint64 {
	var out []uint64
	for _, m := range c.ms {
		if m.node != nil {
			out = append(out, m.node.ID())
		}
	}
	slices.Sort(out)
	return out
}

// wipeOne wipes a random member when no replacement is under way, and
// brings it back a moment later (the swarm's wipe fault).
func (c *cell) wipeOne() {
	if !c.settled() {
		return
	}
	m := c.ms[c.rng.IntN(len(c.ms))]
	if m.node == nil {
		return
	}
	c.wipe(m)
	c.at(50+c.rng.IntN(300), func() { c.restart(m) })
}

// voters returns the serving leader's voters, sorted (nil: no leader).
func (c *cell) voters() []uint64 {
	l := c.leader()
	if l == nil {
		return nil
	}
	return slices.Sorted(slices.Values(l.node.Replica().Status().Conf.GetVoters()))
}

// leaderInEvenSeeds returns the serving leader in an even seed, a
// follower in an odd one: a test's damaged member, so that its seeds try
// both.
func (c *cell) leaderInEvenSeeds(seed uint64) *member {
	if seed%2 == 0 {
		return c.leader()
	}
	return c.follower()
}

// majorityFrom returns a majority of the cell: l and the members after
// it in slot order.
func (c *cell) majorityFrom(l *member) []*member {
	n := len(c.ms)
	out := []*member{l}
	for i := 1; len(out) < n/2+1; i++ {
		out = append(out, c.ms[(int(l.id)-1+i)%n])
	}
	return out
}

// follower returns a member that is up and does not serve.
func (c *cell) follower() *member {
	for _, m := range c.ms {
		if m.node != nil && !m.node.Replica().Status().Serving {
			return m
		}
	}
	return nil
}

// TestWipedFollowerRejoins: a follower's disk is wiped and it restarts.
// It never panics, rejoins as generation 1 of its slot (old id removed,
// new one a learner, caught up by snapshot, promoted) while the cell keeps
// publishing; then the cell loses its leader, another original member,
// and elects one that holds every acknowledged batch — with the rejoined
// member's vote, in a cell of 3.
func TestWipedFollowerRejoins(t *testing.T) {
	testWipedRejoins(t, (*cell).follower)
}

// TestWipedLeaderRejoins: the same with the leader's disk wiped: the
// others elect a leader, and the old one rejoins as a new member.
func TestWipedLeaderRejoins(t *testing.T) {
	testWipedRejoins(t, (*cell).leader)
}

func testWipedRejoins(t *testing.T, pick func(*cell) *member) {
	for _, n := range []int{3, 5} {
		for seed := uint64(1); seed <= 10; seed++ {
			c := newCell(t, n, seed, faults{maxDelay: 4, diskMs: 2})
			var w, gone *member
			var acksAtWipe, acksAtLoss int
			c.at(1000, func() {
				w = pick(c)
				acksAtWipe = len(c.acks)
				c.wipe(w)
				c.at(100, func() { c.restart(w) })
			})
			c.at(3000, func() {
				if got, want := c.voters(), c.currentVoters(); !slices.Equal(got, want) || raftphb.Gen(w.node.ID()) == 0 {
					c.failf("2 s after the wipe the leader's voters are %v, want %v with member %d of a later generation", got, want, w.id)
					return
				}
				if len(c.acks) == acksAtWipe {
					c.failf("nothing acked while member %d rejoined", w.id)
				}
				acksAtLoss = len(c.acks)
				gone = c.crashAnother(w)
			})
			c.at(5000, func() {
				if c.ackedSince(acksAtLoss, gone) == 0 {
					c.failf("no batch acked after member %d, the leader, was lost", gone.id)
				}
				c.restart(gone)
			})
			c.run(6000, 2000)
			if len(c.errs) > 0 {
				t.Fatalf("%d members, seed %d: %s\n%s; %s", n, seed, c.errs[0], c.report(), c.statsReport())
			}
			if got, want := c.voters(), c.currentVoters(); !slices.Equal(got, want) || raftphb.Gen(w.node.ID()) == 0 {
				t.Fatalf("%d members, seed %d: voters %v at the end, want %v with member %d of a later generation\n%s", n, seed, got, want, w.id, strings.Join(c.rejoinLog, "\n"))
			}
		}
	}
}

// TestWipedMemberNeverVotesBeforePromotion: from its wipe until its new id
// is a voter in some member's applied configuration (its promotion has
// committed), no message from the wiped member's slot grants a vote or
// pre-vote, while leaders crash during the rejoin and messages are lost.
func TestWipedMemberNeverVotesBeforePromotion(t *testing.T) {
	for _, n := range []int{3, 5} {
		grantsAfter := 0
		for seed := uint64(1); seed <= 20; seed++ {
			c := newCell(t, n, seed, faults{loss: 0.02, maxDelay: 4, diskMs: 2})
			var w *member
			c.sendHook = func(from *member, m *raftpb.Message) {
				if w == nil || from != w || m.GetReject() {
					return
				}
				if t := m.GetType(); t != raftpb.MessageType_MsgVoteResp && t != raftpb.MessageType_MsgPreVoteResp {
					return
				}
				for _, o := range c.ms {
					if o.node != nil && slices.Contains(o.node.Replica().Status().Conf.GetVoters(), m.GetFrom()) {
						grantsAfter++
						return
					}
				}
				c.failf("member %d (Raft id %d) granted a %s to %d before its promotion", w.id, m.GetFrom(), m.GetType(), m.GetTo())
			}
			c.at(1000, func() {
				w = c.follower()
				c.wipe(w)
				c.at(50, func() { c.restart(w) })
			})
			// Leaders crash during the rejoin: elections while the wiped
			// member is rejoining, a learner, and just promoted.
			for _, at := range []int{1100 + int(seed%5)*80, 1700 + int(seed%7)*60, 2400} {
				c.at(at, func() {
					if l := c.leader(); l != nil && l != w {
						c.crash(l)
						c.at(300, func() { c.restart(l) })
					}
				})
			}
			c.run(6000, 2000)
			if len(c.errs) > 0 {
				t.Fatalf("%d members, seed %d: %s\n%s", n, seed, c.errs[0], c.report())
			}
			if got, want := c.voters(), c.currentVoters(); !slices.Equal(got, want) || raftphb.Gen(w.node.ID()) == 0 {
				t.Fatalf("%d members, seed %d: the leader's voters are %v at the end, want %v\n%s", n, seed, got, want, strings.Join(c.rejoinLog, "\n"))
			}
		}
		t.Logf("%d members, 20 seeds: 0 grants before promotion, %d after", n, grantsAfter)
	}
}

// TestRestartsKeepTheNewConfiguration: once a wiped member has rejoined,
// every member restarts (one crash for all), with and without frequent
// compaction (the configuration then comes from the snapshot, else from
// replaying the configuration changes over the bootstrap), and every
// member restarts with the new configuration; the cell serves and acks.
func TestRestartsKeepTheNewConfiguration(t *testing.T) {
	for _, comp := range []Compaction{{}, smallCompaction} {
		for seed := uint64(1); seed <= 10; seed++ {
			c := newCell(t, 3, seed, faults{maxDelay: 4, diskMs: 2})
			c.compaction = comp
			var w *member
			var acksAtRestart int
			c.at(1000, func() {
				w = c.follower()
				c.wipe(w)
				c.at(100, func() { c.restart(w) })
			})
			c.at(3000, func() {
				acksAtRestart = len(c.acks)
				for _, m := range c.ms {
					c.crash(m)
				}
				for _, m := range c.ms {
					c.restart(m)
				}
				want := c.currentVoters()
				if raftphb.Gen(w.node.ID()) == 0 {
					c.failf("member %d restarts at generation 0 after its wipe", w.id)
				}
				for _, m := range c.ms {
					// The configuration after the log's replay (its first
					// Ready applies the changes after the snapshot).
					c.work(m)
				}
				c.at(30, func() {
					for _, m := range c.ms {
						if m.node == nil {
							continue
						}
						if got := slices.Sorted(slices.Values(m.node.Replica().Status().Conf.GetVoters())); !slices.Equal(got, want) {
							c.failf("member %d restarted with voters %v, want %v", m.id, got, want)
						}
					}
				})
			})
			c.run(6000, 2000)
			if len(c.errs) > 0 {
				t.Fatalf("compaction %+v, seed %d: %s\n%s; %s", comp, seed, c.errs[0], c.report(), c.statsReport())
			}
			if len(c.acks) == acksAtRestart {
				t.Fatalf("compaction %+v, seed %d: nothing acked after the restarts", comp, seed)
			}
			if got, want := c.voters(), c.currentVoters(); !slices.Equal(got, want) {
				t.Fatalf("compaction %+v, seed %d: voters %v at the end, want %v", comp, seed, got, want)
			}
		}
	}
}

// TestCellSwarmWipes is the swarm (crashes, partitions, loss, failed
// fsyncs) with wiped disks: whenever no replacement is under way, now and
// then a member (often the leader) loses its disk. The checker's rules
// hold: every acked batch is in every later leader's store, and at the
// end in every member's. RAFTPHB_SEEDS=N runs more seeds.
func TestCellSwarmWipes(t *testing.T) {
	seeds := uint64(20)
	if s, err := strconv.ParseUint(os.Getenv("RAFTPHB_SEEDS"), 10, 64); err == nil {
		seeds = s
	}
	if testing.Short() {
		seeds = 5
	}
	f := swarm
	f.wipes = true
	for _, n := range []int{3, 5} {
		var wiped, rejoins int
		for seed := uint64(1); seed <= seeds; seed++ {
			for _, comp := range []Compaction{{}, smallCompaction} {
				c := newCell(t, n, seed, f)
				c.compaction = comp
				c.run(6000, 4000)
				if len(c.errs) > 0 {
					t.Fatalf("%d members, seed %d, compaction %+v: %s\n%s; %s\n%s\n%s", n, seed, comp, c.errs[0], c.report(), c.statsReport(), strings.Join(c.rejoinLog, "\n"), c.states())
				}
				wiped += c.wiped
				rejoins += int(c.stats.Rejoins)
				if os.Getenv("RAFTPHB_REJOINS") != "" {
					t.Logf("seed %d: %s", seed, strings.Join(c.rejoinLog, "\n"))
				}
			}
		}
		if wiped == 0 {
			t.Fatalf("%d members: no disk wiped", n)
		}
		t.Log(fmt.Sprintf("%d members, seeds 1..%d, two compaction settings: %d disks wiped, %d rejoins, 0 violations", n, seeds, wiped, rejoins))
	}
}

// states describes every member's replica, for failure messages.
func (c *cell) states() string {
	var b strings.Builder
	for _, m := range c.ms {
		if m.node == nil {
			fmt.Fprintf(&b, "member %d: down\n", m.id)
			continue
		}
		st := m.node.Replica().Status()
		fmt.Fprintf(&b, "member %d: id %d term %d lead %d %s serving %v joining %v applied %d first %d conf %v\n",
			m.id, st.ID, st.Term, st.Lead, st.State, st.Serving, st.Joining, st.Applied, st.FirstIndex, st.Conf)
	}
	return b.String()
}

// TestRejoinUnderAnIDInUseMovesOn: a member that rejoined (generation 1)
// loses its disk again, and the first message it gets after the restart
// is one for its generation 0 (a lagging member's, say): it rejoins under
// generation 1, an id the cell still has as a voter. It must not answer
// for that id — no vote granted, no snapshot taken as that voter — and
// moves on to a generation the cell has not used; the cell ends with
// every member a voter under its current id and every acked batch. In
// odd seeds the leader crashes at that moment too, so that the member
// meets vote requests, probes and snapshots for the id in use.
func TestRejoinUnderAnIDInUseMovesOn(t *testing.T) {
	for _, n := range []int{3, 5} {
		for seed := uint64(1); seed <= 10; seed++ {
			c := newCell(t, n, seed, faults{maxDelay: 4, diskMs: 2})
			var w *member
			second := false
			c.sendHook = func(from *member, m *raftpb.Message) {
				if !second || from != w || m.GetReject() {
					return
				}
				if t := m.GetType(); t != raftpb.MessageType_MsgVoteResp && t != raftpb.MessageType_MsgPreVoteResp {
					return
				}
				if raftphb.Gen(m.GetFrom()) >= 2 {
					for _, o := range c.ms {
						if o.node != nil && slices.Contains(o.node.Replica().Status().Conf.GetVoters(), m.GetFrom()) {
							return
						}
					}
				}
				c.failf("member %d (Raft id %d) granted a %s to %d after its second wipe, before its promotion", w.id, m.GetFrom(), m.GetType(), m.GetTo())
			}
			c.at(1000, func() {
				w = c.follower()
				c.wipe(w)
				c.at(100, func() { c.restart(w) })
			})
			c.at(3000, func() {
				if raftphb.Gen(w.node.ID()) != 1 || !c.settled() {
					c.failf("member %d is at generation %d, settled %v, 2 s after its first wipe", w.id, raftphb.Gen(w.node.ID()), c.settled())
					return
				}
				l := c.leader()
				st := l.node.Replica().Status()
				second = true
				c.wipe(w)
				// Started, its first Ready (its state requests, at
				// generation 0) not written yet: the stale heartbeat is the
				// first message it steps.
				c.start(w)
				stale := &raftpb.Message{Type: raftpb.MessageType_MsgHeartbeat.Enum(), From: new(st.ID),
					To: new(raftphb.MemberID(w.id, 0)), Term: new(st.Term), Commit: new(st.Applied)}
				if err := w.node.Step(stale); err != nil {
					c.failf("step: %v", err)
				}
				c.work(w)
				if got := raftphb.Gen(w.node.ID()); got != 1 {
					c.failf("member %d rejoined at generation %d after a message for generation 0, want 1 (the id in use)", w.id, got)
				}
				if seed%2 == 1 {
					// A new leader: it asks for votes, and its heartbeats
					// commit nothing until it hears from each member.
					c.crash(l)
					c.at(300, func() { c.restart(l) })
				}
			})
			c.run(6000, 2000)
			if len(c.errs) > 0 {
				t.Fatalf("%d members, seed %d: %s\n%s\n%s\n%s", n, seed, c.errs[0], c.report(), strings.Join(c.rejoinLog, "\n"), c.states())
			}
			if got, want := c.voters(), c.currentVoters(); !slices.Equal(got, want) || raftphb.Gen(w.node.ID()) < 2 {
				t.Fatalf("%d members, seed %d: voters %v at the end, want %v with member %d at generation 2 or later\n%s", n, seed, got, want, w.id, strings.Join(c.rejoinLog, "\n"))
			}
			if seed == 1 {
				t.Logf("%d members, seed 1:\n%s", n, strings.Join(c.rejoinLog, "\n"))
			}
		}
	}
}
