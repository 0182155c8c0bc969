package shell_test

import (
	"testing"
)

// TestMemoryBudgetHysteresis: the engine sheds once the live heap is above
// ShedAbovePercent of the budget, goes on shedding down to
// ShedBelowPercent, and ends below it; no budget never sheds. Shedding
// empties the pubend's payload cache at once.
func TestMemoryBudgetHysteresis(t *testing.T) {
	b, f := phb(t)
	b.ClientUp(1)
	for seq := uint64(1); seq <= 20; seq++ {
		b.ClientRequest(1, publish(seq))
	}
	b.Drain()
	var next uint64 = 1
	persistAll(t, b, f, &next)
	cached := func() int64 { return b.Engine().Inspect()[0].Cached }
	if cached() == 0 {
		t.Fatal("the pubend caches no payload before shedding: the test shows nothing")
	}
	const budget = 1000
	steps := []struct {
		live     int64
		budget   int64
		shedding bool
	}{
		{700, budget, false}, // below the shed mark
		{760, budget, true},  // above 75 %
		{700, budget, true},  // between the marks: still shedding
		{600, budget, true},  // at the return mark, not below it
		{590, budget, false}, // below 60 %
		{900, budget, true},
		{900, 0, false}, // the budget is gone
		{1 << 40, 0, false},
	}
	for i, s := range steps {
		b.Memory(s.live, s.budget)
		b.Drain()
		m := b.MemoryState()
		if m.Shedding != s.shedding || b.Engine().Shedding() != s.shedding {
			t.Fatalf("step %d (live %d of %d): shell shedding %v, engine %v; want %v", i, s.live, s.budget, m.Shedding, b.Engine().Shedding(), s.shedding)
		}
		if s.shedding && cached() != 0 {
			t.Fatalf("step %d: shedding, and the pubend still caches %d bytes", i, cached())
		}
	}
	if m := b.MemoryState(); m.Sheds != 2 || b.Engine().Stats().Sheds != 2 || b.Engine().Stats().ShedBytes == 0 {
		t.Fatalf("sheds: shell %d, engine %d (%d bytes); want 2 and some bytes", m.Sheds, b.Engine().Stats().Sheds, b.Engine().Stats().ShedBytes)
	}
}
