package shell

import "github.com/aerie-mq/aerie/internal/gd"

// The memory budget (the config key memory_budget; docs/RELIABILITY.md
// "Running for weeks"): the runtime samples the process's heap and hands
// it to Memory; over the budget's shed mark the engine sheds its caches
// (gd.Shed), below the return mark their budgets return. The two marks
// apart keep a heap that hovers near one from switching at every sample.
//
// The sample is the live heap: what the last collection found reachable,
// which no collection can give back. The memory limit the process runs
// with (the same budget, debug.SetMemoryLimit) keeps the rest (garbage
// not yet collected) within the budget by collecting sooner; the closer
// the live heap comes to the limit, the more often the collector runs, so
// shedding starts with a quarter of the budget still left for garbage.
const (
	// ShedAbovePercent: shedding starts when the live heap is above this
	// share of the budget.
	ShedAbovePercent = 75
	// ShedBelowPercent: it ends when the live heap is below this share,
	// 80 % of the shed mark.
	ShedBelowPercent = 60
)

// MemoryState is the budget's state, for metrics.
type MemoryState struct {
	// Budget is the memory budget in bytes (0: none); Live the last
	// sample of the live heap.
	Budget, Live int64
	// Shedding: the engine sheds its caches now; Sheds counts the times
	// it began.
	Shedding bool
	Sheds    uint64
}

// Memory reports a sample of the process's live heap, against budget
// bytes (0: no budget; shedding, if on, ends). It steps the engine into
// shedding above ShedAbovePercent of the budget, out of it below
// ShedBelowPercent.
func (b *Broker) Memory(live, budget int64) {
	b.mem.Budget, b.mem.Live = budget, live
	switch {
	case budget <= 0 || live < budget/100*ShedBelowPercent:
		b.Shed(false)
	case live > budget/100*ShedAbovePercent:
		b.Shed(true)
	}
}

// Shed switches the engine's shedding on or off (gd.Shed), whatever the
// heap: the simulator draws it.
func (b *Broker) Shed(on bool) {
	if on == b.mem.Shedding {
		return
	}
	b.mem.Shedding = on
	if on {
		b.mem.Sheds++
		b.log.Warn("over the memory budget: shedding caches", "live_heap", b.mem.Live, "budget", b.mem.Budget)
	} else {
		b.log.Info("back under the memory budget: caches return", "live_heap", b.mem.Live, "budget", b.mem.Budget)
	}
	b.step(gd.Shed{On: on})
}

// MemoryState returns the budget's state.
func (b *Broker) MemoryState() MemoryState { return b.mem }
