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
