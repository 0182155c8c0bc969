package sim

import "testing"

// TestDiskFullSwarm: PHBs whose disks fill for a while, among crashes and
// cut links, refuse publishes and reopen their logs once room returns,
// and the oracle finds nothing acked lost, duplicated or out of order.
// The runs are deterministic: the counts are those of these seeds.
func TestDiskFullSwarm(t *testing.T) {
	var fulls, reopens, refused int
	for seed := uint64(1); seed <= 6; seed++ {
		o := DefaultOptions(seed)
		o.Faults = []string{FaultDiskFull, FaultCrash, FaultCut}
		res, err := Run(o)
		if err != nil {
			t.Fatal(err)
		}
		if len(res.Violations) > 0 {
			t.Fatalf("seed %d: %v", seed, res.Violations[0])
		}
		fulls, reopens, refused = fulls+res.DiskFulls, reopens+res.DiskReopens, refused+res.PubRefused
	}
	if fulls == 0 || reopens == 0 || refused == 0 {
		t.Fatalf("%d disks full, %d logs reopened, %d publishes refused: the fault did not bite", fulls, reopens, refused)
	}
	t.Logf("%d disks full, %d logs reopened, %d publishes refused", fulls, reopens, refused)
}

// TestDiskFullOracleBites: a PHB that reports a batch durable although
// its fsync failed on a full disk is caught: the events it announced are
// not what its log holds (I7, I9), or are lost (I11).
func TestDiskFullOracleBites(t *testing.T) {
	for seed := uint64(1); seed <= 30; seed++ {
		o := DefaultOptions(seed)
		o.Faults, o.AckFullSync = []string{FaultDiskFull, FaultCrash}, true
		res, err := Run(o)
		if err != nil {
			t.Fatal(err)
		}
		for _, v := range res.Violations {
			switch v.Invariant {
			case "I7", "I9", "I11":
				t.Logf("caught after %d seeds: %v", seed, v)
				return
			}
		}
		if len(res.Violations) > 0 {
			t.Fatalf("seed %d: %v, want I7, I9 or I11", seed, res.Violations[0])
		}
	}
	t.Fatal("acking a batch whose fsync failed on a full disk was never caught")
}
