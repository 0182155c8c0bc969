package node

import (
	"syscall"
	"testing"
)

// TestFullDiskMemberResumes: the disk of a member (the serving leader in
// odd seeds) is full for a while under load. A Raft log fsync that fails
// for want of room is tried again in place, the Ready written again
// (ResumeLog); a failed write of the pubend store restarts the member
// (crash-only). The checker finds every acked batch in every later
// leader's store, nothing applied twice, and the stores in agreement
// after healing.
func TestFullDiskMemberResumes(t *testing.T) {
	fulls := 0
	for seed := uint64(1); seed <= 6; seed++ {
		c := newCell(t, 3, seed, faults{maxDelay: 4, diskMs: 2})
		var m *member
		c.at(1000, func() {
			m = c.follower()
			if l := c.leader(); l != nil && seed%2 == 1 {
				m = l
			}
			m.fs.SetFull(syscall.ENOSPC)
			c.at(300+c.rng.IntN(600), func() { m.fs.SetFull(nil) })
		})
		c.run(4000, 2000)
		if len(c.errs) > 0 {
			t.Fatalf("seed %d: %s\n%s", seed, c.errs[0], c.report())
		}
		fulls += c.logFulls
	}
	if fulls == 0 {
		t.Fatal("no Raft log fsync failed for want of room: the fault did not bite")
	}
	t.Logf("%d Raft log fsyncs failed for want of room and were written again", fulls)
}

// TestFullDiskLeaderGivesWay: the serving leader's disk fills and stays
// full; while its Raft log waits for room the cell elects another leader,
// and the old one gives up serving at once (EventLost on a tick) rather
// than when room returns: its shell would go on answering as the pubend
// beside the new leader.
func TestFullDiskLeaderGivesWay(t *testing.T) {
	waited := 0
	for seed := uint64(1); seed <= 8; seed++ {
		c := newCell(t, 3, seed, faults{maxDelay: 4, diskMs: 2})
		var l *member
		var inc int
		c.at(1000, func() {
			if l = c.leader(); l == nil {
				return
			}
			inc = l.inc
			l.fs.SetFull(syscall.ENOSPC)
			c.at(4000, func() { l.fs.SetFull(nil) })
		})
		c.at(3500, func() {
			if l == nil || l.inc != inc || l.node == nil || l.node.written == nil {
				return // it wrote its store first and restarted (crash-only), or never waited
			}
			waited++
			other := c.leader()
			if other == nil || other == l {
				c.failf("no other member serves 2.5 s after the leader's disk filled")
				return
			}
			if l.sh != nil || l.node.Replica().Status().Serving {
				c.failf("member %d still serves beside member %d while its Raft log waits for room", l.id, other.id)
			}
		})
		c.run(6000, 2000)
		if len(c.errs) > 0 {
			t.Fatalf("seed %d: %s\n%s", seed, c.errs[0], c.report())
		}
	}
	if waited == 0 {
		t.Fatal("no leader's Raft log waited for room: the fault did not bite")
	}
	t.Logf("%d of 8 leaders waited for room and gave way", waited)
}
