// Package tick holds the time axis of a pubend and the per-tick knowledge
// and curiosity values of the Gryphon guaranteed-delivery model (docs/CONCEPTS.md
// "Ticks", "Knowledge", "Curiosity"; seed 000 §3.1).
//
// Every representation here is range-encoded: a silence message can cover
// millions of ticks, so memory scales with the number of runs, never with the
// number of ticks.
//
// The package is pure: no clock, no I/O, no randomness.
package tick

import (
	"fmt"
	"math"
	"time"
)

// Tick is one slot on a pubend's time axis. Tick 0 is never assigned, so a
// final prefix of 0 means "nothing is final yet".
//
// aerie builds ticks as (epoch_ms << SubTickBits) | seq (docs/CONCEPTS.md P2): 1024
// sub-ticks per millisecond, so a tick maps back to pubend real time.
type Tick uint64

// SubTickBits is the number of low bits of a tick that count publishes within
// one millisecond.
const SubTickBits = 10

// Max is the largest tick; ranges that reach "the end of time" use it.
const Max Tick = math.MaxUint64

// FromMillis returns the first tick of the given Unix millisecond.
func FromMillis(ms int64) Tick {
	if ms <= 0 {
		return 0
	}
	return Tick(ms) << SubTickBits
}

// Millis returns the Unix millisecond a tick belongs to.
func (t Tick) Millis() int64 { return int64(t >> SubTickBits) }

// Range is an inclusive range of ticks [Lo, Hi]. It is empty when Lo > Hi.
type Range struct{ Lo, Hi Tick }

// Empty reports whether r holds no tick.
func (r Range) Empty() bool { return r.Lo > r.Hi }

// Contains reports whether t lies in r.
func (r Range) Contains(t Tick) bool { return r.Lo <= t && t <= r.Hi }

// Len returns the number of ticks in r (saturating at MaxUint64).
func (r Range) Len() uint64 {
	if r.Empty() {
		return 0
	}
	if r.Lo == 0 && r.Hi == Max {
		return math.MaxUint64
	}
	return uint64(r.Hi-r.Lo) + 1
}

// Intersect returns r ∩ o (possibly empty).
func (r Range) Intersect(o Range) Range {
	return Range{Lo: max(r.Lo, o.Lo), Hi: min(r.Hi, o.Hi)}
}

func (r Range) String() string {
	if r.Empty() {
		return "[]"
	}
	if r.Lo == r.Hi {
		return fmt.Sprintf("[%d]", r.Lo)
	}
	return fmt.Sprintf("[%d,%d]", r.Lo, r.Hi)
}

// Kind is a knowledge value (docs/CONCEPTS.md "Knowledge", P1).
type Kind uint8

const (
	// Q: nothing known yet.
	Q Kind = iota
	// S: silence — no message here, or one filtered out upstream.
	S
	// D: a data message published at this tick that passes every filter.
	D
	// L: final — the value is no longer needed or retained.
	L
)

func (k Kind) String() string {
	switch k {
	case Q:
		return "Q"
	case S:
		return "S"
	case D:
		return "D"
	case L:
		return "L"
	}
	return fmt.Sprintf("Kind(%d)", uint8(k))
}

// Curiosity is a curiosity value (docs/CONCEPTS.md "Curiosity"): Q (no interest stated), C
// (curious: wants the value), A (anti-curious: acknowledged, no longer wanted).
type Curiosity uint8

const (
	CurQ Curiosity = iota
	CurC
	CurA
)

func (c Curiosity) String() string {
	switch c {
	case CurQ:
		return "Q"
	case CurC:
		return "C"
	case CurA:
		return "A"
	}
	return fmt.Sprintf("Curiosity(%d)", uint8(c))
}

// Time is a reading of a broker's local clock in nanoseconds since the Unix
// epoch. The pure cores never read a clock: the runtime or the simulator
// passes Time in.
type Time int64

// Add returns t+d.
func (t Time) Add(d time.Duration) Time { return t + Time(d) }

// Sub returns t-u as a duration.
func (t Time) Sub(u Time) time.Duration { return time.Duration(t - u) }

// Millis returns the Unix millisecond of t.
func (t Time) Millis() int64 { return int64(t) / 1e6 }
