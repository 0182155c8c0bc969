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
