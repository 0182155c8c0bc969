// Package congestion is Gryphon CC (Pietzuch and Bhola, Middleware 2003):
// congestion control for a reliable publish/subscribe overlay, as pure state
// machines. Time is always an input; nothing here reads a clock, starts a
// goroutine or touches the network.
//
//   - Regulator is the pubend's side of the PHB-driven protocol (PDCC, §3.1):
//     it issues a DCQ every DCQ interval, applies the rate equations (1)–(3)
//     to the UCAs that come back, and paces the publish acks that hold
//     publishers to the rate (§4 "PHB Implementation").
//   - Monitor is an SHB's side of PDCC for one pubend: the smoothed
//     doubt-horizon rate t̄ (eq. 4, 5, 11), whether the SHB is recovering
//     (§4), and the UCA it answers a DCQ with (eq. 6–8).
//   - Aggregator folds UCAs at an intermediate broker exactly as Fig. 5.
//   - NackWindow is the SHB-driven protocol (SDCC, §3.2): how far past the
//     doubt horizon a recovering SHB may nack, opened and closed additively
//     from the recovery rate like TCP Vegas (eq. 9, 10).
package congestion

import (
	"errors"
	"fmt"
	"time"
)

// Config holds the parameters of Table 1 of Gryphon CC and the few this
// implementation adds. Each field names its unit, its default and when to
// change it. Rates of doubt-horizon progress are in tick-seconds per second
// (1 = keeping up with the pubend's clock); the paper's "50 tickms" threshold
// is 0.05 of them.
type Config struct {
	// DCQInterval: a pubend sends a DCQ this often (§3.1, "e.g. 1 s").
	// Default 1s. Shorter adapts faster and costs a little more control
	// traffic.
	DCQInterval time.Duration

	// NoUCAInterval (t_noUCA): a throttled pubend raises its rate after this
	// long without a UCA. Default 2s (Table 1). It should exceed two DCQ
	// intervals so an alert can arrive before the next probe.
	NoUCAInterval time.Duration

	// RateMinIncrease (r_min): the smallest rate increase, in events per
	// second; also the floor the rate never goes below, so a pubend is never
	// stalled. Default 2 (Table 1).
	RateMinIncrease float64

	// IncreaseFactor (f_incr): the multiplicative part of the hybrid
	// increase (eq. 1). Default 0.05 (Table 1).
	IncreaseFactor float64

	// DecreaseFactor1 (f_decr1): multiplicative decrease (eq. 2, 3).
	// Default 0.5 (Table 1).
	DecreaseFactor1 float64

	// DecreaseFactor2 (f_decr2): decrease relative to the rate at the last
	// decrease (eq. 2). Default 0.25 (Table 1).
	DecreaseFactor2 float64

	// Smoothing (α): weight of a new sample in the SHB's low-pass filter
	// (eq. 5). Default 0.1 (Table 1).
	Smoothing float64

	// SampleInterval: an SHB samples its doubt-horizon rate this often and
	// smooths the samples (eq. 5). Default 100ms (our choice: with α = 0.1
	// the filter's time constant is about one DCQ interval).
	SampleInterval time.Duration

	// SampleMax caps one sample of the doubt-horizon rate, in tick-seconds
	// per second. Default 10 (our choice: the recovering SHBs of §5 E3
	// peaked near 5). It keeps one jump of the horizon from dominating t̄.
	SampleMax float64

	// NonRecThreshold (Δt_nonrec): a non-recovering SHB alerts when t̄ falls
	// below 1 − this (eq. 6). Default 0.05 (50 tickms, Table 1).
	NonRecThreshold float64

	// RecThreshold (Δt_rec): a recovering SHB alerts when t̄ falls below
	// 1 + this (eq. 8), so it recovers at least this fast. Default 1.0
	// (1000 tickms, Table 1). Higher recovers faster and slows publishers
	// more (§5 E4); at or below 0 recovery may never end.
	RecThreshold float64

	// LagThreshold (Δt_s): a non-recovering SHB alerts when its doubt
	// horizon lags the pubend's position by more than this, whatever t̄
	// says (eq. 7). Default 4s (Table 1).
	LagThreshold time.Duration

	// KeepUpLag: an SHB whose doubt horizon is within this of the highest
	// tick it has heard of (or past the pubend's position) is keeping up,
	// and its rate sample counts as at least 1. Default 1.5s (our choice).
	// The doubt horizon of an idle stream moves in t_silence steps; this
	// must exceed t_silence plus the path's delay.
	KeepUpLag time.Duration

	// ReceiveWindow: an SHB that hears of ticks more than this past its
	// doubt horizon is recovering (§4: it would be ignoring ticks beyond
	// its receive window) until its horizon is back within KeepUpLag of
	// them. Default 10s (our choice).
	ReceiveWindow time.Duration

	// NackSize (size_NACK): the step of the NACK window (eq. 10). Default
	// 100ms of ticks (Table 1).
	NackSize time.Duration

	// NackWindowInitial (nwnd_0): the NACK window when recovery starts.
	// Default 100ms of ticks (Table 1).
	NackWindowInitial time.Duration

	// NackAlpha (α_NACK): the recovery rate must rise by this fraction for
	// the NACK window to open (§3.2). Default 0.1 (Table 1).
	NackAlpha float64

	// NackBeta (β_NACK): the recovery rate must fall by this fraction for
	// the NACK window to close (§3.2). Default 0.3 (Table 1).
	NackBeta float64

	// QueueLag: an SHB whose doubt horizon is more than this behind the
	// pubend's position at the last DCQ is behind a queue, and its rate
	// samples count as measured even when it has all it has heard of
	// (Monitor.Observe). Default 1.5s (our addition; KeepUpLag's value,
	// which it was before it had a name of its own). Lower detects an
	// overloaded link sooner, before the queue holds much: every second
	// of detection lets the publishers fill the queue with (offered −
	// capacity) events. It must exceed the path's delay and jitter. A
	// horizon that moves in steps (coalesced silence) must lag by QueueLag
	// plus two of its steps (Monitor.queued).
	QueueLag time.Duration

	// DenseQueueLag: an SHB whose doubt horizon has moved in every sample
	// for a second (a dense stream of events, not silence arriving in
	// steps of t_silence) and is more than this behind the pubend's
	// present is behind a queue, as with QueueLag (Monitor.queued).
	// Default 400ms (our addition): above the path's delay and the
	// broker's batching, and low enough that an IB's queue to an SHB on a
	// link a third as fast as the offer is seen before it holds 256 KiB
	// (at 190 KB/s offered, 1.4 s of the pubend's ticks).
	DenseQueueLag time.Duration

	// DeliveryFloor: a rate decrease goes no lower than this fraction of
	// the rate at which the pubend's tree acknowledged events over the last
	// two seconds, and no higher than that rate (Regulator.OnUCA). Default
	// 0.5 (our addition): the queue ahead of the bottleneck drains at half
	// its rate while it stays busy. 0 decreases by eq. 2 and 3 alone, down
	// to r_min, as Table 1 does.
	DeliveryFloor float64
}

// DefaultConfig returns Table 1 of Gryphon CC and our choices (see each field).
func DefaultConfig() Config {
	return Config{
		DCQInterval:       time.Second,
		NoUCAInterval:     2 * time.Second,
		RateMinIncrease:   2,
		IncreaseFactor:    0.05,
		DecreaseFactor1:   0.5,
		DecreaseFactor2:   0.25,
		Smoothing:         0.1,
		SampleInterval:    100 * time.Millisecond,
		SampleMax:         10,
		NonRecThreshold:   0.05,
		RecThreshold:      1.0,
		LagThreshold:      4 * time.Second,
		KeepUpLag:         1500 * time.Millisecond,
		ReceiveWindow:     10 * time.Second,
		NackSize:          100 * time.Millisecond,
		NackWindowInitial: 100 * time.Millisecond,
		NackAlpha:         0.1,
		NackBeta:          0.3,
		DeliveryFloor:     0.5,
		QueueLag:          1500 * time.Millisecond,
		DenseQueueLag:     400 * time.Millisecond,
	}
}

// BrokerConfig is DefaultConfig for brokers on real networks: Table 1 but
// for two values chosen for links whose delay is milliseconds (the
// simulator keeps DefaultConfig, so its figures stay those of Table 1).
//
//   - DCQInterval 250ms: an SHB learns where the pubend is four times a
//     second, so a queue building on an overloaded link is seen, and the
//     rate lowered, before it holds seconds of events. A DCQ is a few
//     dozen bytes per pubend and link.
//   - QueueLag 500ms: half a second behind the pubend's position is a
//     queue, not the path's delay, on a LAN (a broker's own fsync and
//     batching add tens of milliseconds).
func BrokerConfig() Config {
	c := DefaultConfig()
	c.DCQInterval = 250 * time.Millisecond
	c.QueueLag = 500 * time.Millisecond
	return c
}

// ErrConfig reports an invalid configuration.
var ErrConfig = errors.New("congestion: invalid config")

// Validate checks each parameter's range and the relations between them.
func (c Config) Validate() error {
	for _, d := range []struct {
		name string
		v    time.Duration
	}{{"DCQInterval", c.DCQInterval}, {"NoUCAInterval", c.NoUCAInterval}, {"SampleInterval", c.SampleInterval},
		{"LagThreshold", c.LagThreshold}, {"KeepUpLag", c.KeepUpLag}, {"QueueLag", c.QueueLag}, {"DenseQueueLag", c.DenseQueueLag}, {"ReceiveWindow", c.ReceiveWindow},
		{"NackSize", c.NackSize}, {"NackWindowInitial", c.NackWindowInitial}} {
		if d.v <= 0 {
			return fmt.Errorf("%w: %s must be positive, got %v", ErrConfig, d.name, d.v)
		}
	}
	for _, f := range []struct {
		name   string
		v      float64
		lo, hi float64
	}{{"RateMinIncrease", c.RateMinIncrease, 1e-9, 1e9}, {"IncreaseFactor", c.IncreaseFactor, 0, 10},
		{"DecreaseFactor1", c.DecreaseFactor1, 1e-9, 1 - 1e-9}, {"DecreaseFactor2", c.DecreaseFactor2, 0, 1},
		{"Smoothing", c.Smoothing, 1e-9, 1}, {"SampleMax", c.SampleMax, 1, 1e6}, {"NonRecThreshold", c.NonRecThreshold, 0, 1},
		{"RecThreshold", c.RecThreshold, -1, 100}, {"NackAlpha", c.NackAlpha, 0, 10}, {"NackBeta", c.NackBeta, 0, 1},
		{"DeliveryFloor", c.DeliveryFloor, 0, 1}} {
		if !(f.v >= f.lo && f.v <= f.hi) { // also refuses NaN
			return fmt.Errorf("%w: %s must be in [%g, %g], got %g", ErrConfig, f.name, f.lo, f.hi, f.v)
		}
	}
	if c.ReceiveWindow <= c.KeepUpLag {
		return fmt.Errorf("%w: ReceiveWindow %v must exceed KeepUpLag %v", ErrConfig, c.ReceiveWindow, c.KeepUpLag)
	}
	return nil
}
