package gd

// Shedding caches when the broker's process is over its memory budget
// (docs/RELIABILITY.md "Running for weeks", the config key memory_budget).
//
// The runtime measures the process's heap; the engine never does. When the
// heap is over the budget, the runtime steps Shed{On: true}, and every
// payload cache of the engine counts as having a budget of 0 until a
// Shed{On: false}: the pubend's cache (Config.PubendCacheBytes, whose
// payloads come back from the event log, cache.go) and the relay caches of
// the pubends hosted elsewhere (Config.RelayCacheBytes, whose payloads
// come back from upstream, refetch.go). Only payloads go, and only those
// the eviction rules already let go under any budget: never a tick's
// knowledge (it stays D), never a payload an ostream has not had
// first-time, never one a parked nack waits for, and nothing not yet
// durable in the pubend's log (the cache holds only logged events).
// Durable subscriptions catching up get the least window their clients
// allow (catchupWindow): their catch-ups go on, in smaller steps. So
// shedding changes when payloads travel again, never what is delivered:
// the simulator draws it at random (sim FaultShed) under the same oracle.

// Shed switches cache shedding on or off (see above). Stepping the state
// the engine is already in changes nothing.
type Shed struct{ On bool }

func (Shed) isInput() {}

// shed enters or leaves shedding. Entering trims every cache at once to
// its shed budget; leaving only lets them grow again.
func (e *Engine) shed(on bool) {
	if on == e.shedding {
		return
	}
	e.shedding = on
	if !on {
		return
	}
	e.stats.Sheds++
	for _, ps := range e.streams {
		before := ps.cache.bytes
		e.evict(ps)
		e.stats.ShedBytes += uint64(max(before-ps.cache.bytes, 0))
	}
}

// Shedding reports whether the engine is shedding its caches.
func (e *Engine) Shedding() bool { return e.shedding }

// catchupWindow is the catch-up window in events and bytes
// (Config.catchupWindow); while shedding, no more than the least one a
// client of the client library needs (MinCatchupWindowEvents and
// MinCatchupWindowBytes): a connection then holds that much of each
// catch-up instead of up to 8 MiB.
func (e *Engine) catchupWindow() (int, int) {
	ev, by := e.cfg.catchupWindow()
	if e.shedding {
		ev, by = min(ev, MinCatchupWindowEvents), min(by, MinCatchupWindowBytes)
	}
	return ev, by
}
