package sim

import "testing"

// TestBatchCoversIBsBelowCells: the fixed batch must hold networks where an
// IB feeds a redundant cell that feeds another IB, with crashes on, so that
// an IB restart above a cell can split what the cell's members know about a
// tick while the broker below the cell forwards it (ARCHITECTURE.md
// decision 10; seeds 1851, 2000586 found the leaf version of this).
func TestBatchCoversIBsBelowCells(t *testing.T) {
	n := 0
	for s := uint64(1); s <= 200; s++ {
		o := DefaultOptions(s)
		p, err := makePlan(o, seedRng(o.Seed))
		if err != nil {
			t.Fatal(err)
		}
		if p.faults[FaultCrash] && ibCellIB(p.topo) {
			n++
		}
	}
	t.Logf("%d of 200 seeds: IB → redundant cell → IB, with crashes", n)
	if n < 3 {
		t.Fatalf("only %d of 200 seeds put an IB below a redundant cell that has an IB above it", n)
	}
}

// ibCellIB reports whether some redundant cell has an IB upstream and an IB
// downstream.
func ibCellIB(t Topology) bool {
	role := map[string]Role{}
	for _, b := range t.Brokers {
		role[string(b.ID)] = b.Role
	}
	for c, ms := range t.Cells {
		if len(ms) < 2 {
			continue
		}
		up, down := false, false
		for _, l := range t.Links {
			if l.Down == c && role[string(l.Up)] == IB {
				up = true
			}
			if l.Up == c && role[string(l.Down)] == IB {
				down = true
			}
		}
		if up && down {
			return true
		}
	}
	return false
}
