// Package gctune is a broker process's garbage-collection policy: a
// bounded amount of extra heap, so that a broker with a small live heap
// collects less often, and one with a large live heap behaves as Go's
// default does.
//
// Why: at a fixed rate every cycle of the collector takes a share of the
// cores for a few milliseconds, and events that cross a broker then wait;
// with Go's default (GOGC=100: collect when the heap has doubled) a broker
// whose live heap is 10 MB collects every few hundred milliseconds at
// 10 000 events/s, often enough that those waits make the p99 of
// publish → deliver latency
// (docs/bench-history/2026-11-27-latency-breakdown.md). A flat higher GOGC
// would grow every heap by that factor, gigabytes for a broker holding
// gigabytes of subscriptions.
//
// The policy: after every cycle, the heap may grow past the live heap by
// Headroom bytes or by the live heap itself, whichever is more, so memory
// stays within max(2 × live, live + Headroom): never more than Go's default
// allows beyond Headroom. It sets GOGC from the live heap after each cycle
// (debug.SetGCPercent); a memory limit still applies on top: the config's
// memory_budget (Limit), or GOMEMLIMIT. An operator's own GOGC (the
// environment variable) turns the policy off, and an operator's own
// GOMEMLIMIT the budget's limit.
package gctune

import (
	"math"
	"os"
	"runtime"
	"runtime/debug"
	"runtime/metrics"
	"sync"
)

// DefaultHeadroom is the extra heap a broker process may use by default:
// none, Go's own default. 64 MiB took the in-process bench from a cycle
// every 250 ms to one every 1.5 s at 10 000 msgs/s, but its p99 was worse
// in every pair on a loaded machine, at twice the RSS
// (docs/bench-history/2026-11-27-latency-breakdown.md), so it is an
// operator's choice until a quiet run shows it helps.
const DefaultHeadroom = 0

// Percent is the GOGC that lets a heap with live bytes grow by headroom
// bytes, and never less than Go's default of 100. It is also at most the
// GOGC whose minimum heap is the headroom: Go never collects a heap below
// 4 MiB × GOGC/100 (the runtime's heapMinimum), so an uncapped GOGC for a
// tiny live heap (or none yet, before the first cycle) would let the heap
// grow far past live + headroom.
func Percent(live, headroom int64) int {
	hi := max(100, headroom*100/heapMinimum)
	if live <= 0 {
		return int(hi)
	}
	return int(max(100, min(headroom*100/live, hi)))
}

// heapMinimum is the Go runtime's minimum heap at GOGC=100
// (defaultHeapMinimum); it scales with GOGC.
const heapMinimum = 4 << 20

var (
	mu      sync.Mutex
	current int64 // the headroom in force; 0: off
	armed   bool  // a finalizer waits for the next cycle
	// tuned, when set (tests), hears each GOGC the hook sets.
	tuned func(percent int)
)

// Start applies the policy with headroom bytes for the life of the
// process (0 or less: Go's default). It does nothing when GOGC is set in
// the environment: the operator chose. Calling it again changes the
// headroom.
func Start(headroom int64) {
	if os.Getenv("GOGC") != "" {
		return
	}
	mu.Lock()
	defer mu.Unlock()
	current = max(headroom, 0)
	if current == 0 {
		debug.SetGCPercent(100)
		return
	}
	debug.SetGCPercent(Percent(liveHeap(), current))
	if !armed {
		armed = true
		arm()
	}
}

// arm sets a finalizer on a fresh object: it runs after the next cycle
// that finds the object unreachable, that is after every cycle, and sets
// GOGC from the live heap that cycle marked.
func arm() {
	s := new([16]byte) // not tiny-allocated: a finalizer needs an object of its own
	runtime.SetFinalizer(s, func(*[16]byte) {
		mu.Lock()
		defer mu.Unlock()
		if current == 0 {
			armed = false // off (Start(0) set GOGC back): no more hooks
			return
		}
		p := Percent(liveHeap(), current)
		debug.SetGCPercent(p)
		if tuned != nil {
			tuned(p)
		}
		arm()
	})
}

// liveHeap is the heap the last cycle marked live.
func liveHeap() int64 {
	s := []metrics.Sample{{Name: "/gc/heap/live:bytes"}}
	metrics.Read(s)
	if s[0].Value.Kind() != metrics.KindUint64 {
		return 0
	}
	return int64(s[0].Value.Uint64())
}

// Limit sets the process's memory limit to budget bytes
// (debug.SetMemoryLimit; 0 or less: no limit): past the heap target the
// headroom policy (Start) allows, the collector runs sooner as the
// process's memory nears the budget. The broker sheds its caches too
// when its live heap is near it (shell.Memory); the limit bounds what a
// collection can give back, the shedding what it cannot. It does nothing
// when GOMEMLIMIT is set in the environment: the operator chose.
func Limit(budget int64) {
	if os.Getenv("GOMEMLIMIT") != "" {
		return
	}
	if budget <= 0 {
		budget = math.MaxInt64 // the runtime's "no limit"
	}
	debug.SetMemoryLimit(budget)
}

// LiveHeap is the heap the last collection marked live: what the broker
// compares with its memory budget (shell.Memory).
func LiveHeap() int64 { return liveHeap() }
