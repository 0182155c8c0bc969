// Package ccreal runs Gryphon CC §5 E1 and E2 (Middleware 2003) with real
// `aerie broker` processes: Fig. 1's network p1 → b1 → s1, s2, one pubend
// at p1, one publisher offering 1 KB events at a fixed rate and one
// subscriber at each SHB. The link b1 → s2 goes through a faultnet proxy
// (s2 has a config of its own in which b1 listens at the proxy), which
// counts its bytes and cuts it (E1). Its cap is a `bandwidth` in the
// network config, which b1's paced writer keeps: fixed in E1, changed
// phase by phase in E2 by rewriting b1's config and sending it SIGHUP; or,
// for a bottleneck b1 does not know of, the proxy limits the link instead
// (Options.ProxyLimit).
//
// Every 250 ms it polls the brokers' /status: p1's rate limit, s2's doubt
// horizon (its lag behind the present) and NACK window. It records every
// delivery at s1 and s2 and checks that each subscriber receives every
// published event exactly once and in order. internal/lab/ccexp plots and
// summarises the result next to the simulator's runs.
package ccreal

import (
	"fmt"
	"io"
	"time"
)

// Phase is a stretch of E2 during which the proxy limits b1 → s2 to Cap
// bytes/s.
type Phase struct {
	Cap int64
	Len time.Duration
}

// Options configure one run. E1Options and E2Options give the experiments'
// shapes.
type Options struct {
	Bin, Dir string // the aerie binary; configs, data and broker logs
	Name     string // for progress and the summary: "e1", "e2"
	// CongestionControl is the network config's congestion_control.
	CongestionControl bool
	Rate              float64 // events/s offered by the publisher
	Size              int     // payload bytes per event
	// Cap is b1 → s2's `bandwidth` in the config (bytes/s; 0: none).
	Cap int64
	// CutAt, BackAt: the proxy cuts b1 → s2 from CutAt to BackAt (both
	// zero: no cut).
	CutAt, BackAt time.Duration
	// PhasesFrom: b1 → s2 is limited phase by phase from here, and the
	// limit is lifted after the last phase: by its `bandwidth`, changed in
	// b1's config and reloaded (SIGHUP), or with ProxyLimit by the proxy.
	PhasesFrom time.Duration
	Phases     []Phase
	ProxyLimit bool
	// End is when publishing stops; Drain how long the subscribers then
	// have to receive the rest.
	End, Drain time.Duration
	Progress   io.Writer `json:"-"`
}

// E1Options is E1 at LAN scale: b1 → s2 capped at 100 KB/s, the publisher
// offering 80 events/s of 1 KB (about 89 KB/s with headers: the
// simulator's E1 leaves the same ~12 % of headroom, 42 of 48 KB/s), the
// link cut for 15 s from 10 s.
func E1Options(bin, dir string, cc bool) Options {
	return Options{Bin: bin, Dir: dir, Name: "e1", CongestionControl: cc, Rate: 80, Size: 1000, Cap: 100_000,
		CutAt: 10 * time.Second, BackAt: 25 * time.Second, End: 70 * time.Second, Drain: 3 * time.Minute}
}

// E2Options is E2 with the phases scaled from 60 s to 30 s: b1 → s2
// limited to 60, 150 and 60 KB/s while the publisher offers 180 events/s
// of 1 KB (about 195 KB/s), more than the highest limit. By default the
// limit is b1 → s2's `bandwidth`, reloaded by b1 at each phase, so b1's
// paced writer holds the queue; with proxy the proxy limits the link and
// the queue builds in the kernel's socket buffers instead. Congestion
// control is on explicitly: the config starts without a `bandwidth`.
func E2Options(bin, dir string, proxy bool) Options {
	ph := 30 * time.Second
	return Options{Bin: bin, Dir: dir, Name: "e2", CongestionControl: true, Rate: 180, Size: 1000,
		PhasesFrom: 5 * time.Second, Phases: []Phase{{60_000, ph}, {150_000, ph}, {60_000, ph}}, ProxyLimit: proxy,
		End: 95 * time.Second, Drain: 2 * time.Minute}
}

// Poll is one sample of the brokers' /status and the proxy.
type Poll struct {
	At time.Duration // since publishing began
	// Limit is p1's rate limit in events/s (0: unlimited), Held the
	// publishes waiting for it, Delivered the tree's delivery rate the
	// pubend measured; HasCC says p1 reported congestion state.
	Limit, Delivered float64
	Held             int
	HasCC            bool
	// S1Lag, S2Lag: how far each SHB's doubt horizon lags the present
	// (negative: not known yet).
	S1Lag, S2Lag time.Duration
	// S2Recovering and S2Window (ms of ticks): s2's SDCC state.
	S2Recovering bool
	S2Window     int64
	// LinkBytes is what the proxy forwarded from b1 to s2 so far.
	LinkBytes int64
	// S2Nacks is the nacks s2 sent so far, S2NackTicks the ticks they
	// asked for (1024 a millisecond).
	S2Nacks, S2NackTicks uint64
	// B1ToS2 is the events b1 sent to s2 so far, first-time and in
	// answer to nacks; B1Retrans the retransmissions b1 sent to anyone.
	B1ToS2, B1Retrans uint64
	// S2UCAs is the UCAs (alerts) s2 sent so far, P1Decreases the rate
	// decreases p1 made.
	S2UCAs, P1Decreases uint64
}

// Recv is one delivery at a subscriber.
type Recv struct {
	At      time.Duration // since publishing began
	Latency time.Duration // publish (the pubend's tick) → delivery
}

// Result is what a run observed.
type Result struct {
	Options   Options
	Published int
	Polls     []Poll
	S1, S2    []Recv
	// Load is the machine's 1-minute load average at the start, after
	// End, and at the end of the drain.
	Load [3]float64
	// Done is when both subscribers had every event.
	Done time.Duration
}

// PhaseStart returns when phase i of E2 begins.
func (o Options) PhaseStart(i int) time.Duration {
	t := o.PhasesFrom
	for _, p := range o.Phases[:i] {
		t += p.Len
	}
	return t
}

func (o Options) String() string {
	cc := "on"
	if !o.CongestionControl {
		cc = "off"
	}
	if len(o.Phases) > 0 && o.ProxyLimit {
		return fmt.Sprintf("%s, congestion control %s, b1 → s2 limited by the proxy", o.Name, cc)
	}
	if len(o.Phases) > 0 {
		return fmt.Sprintf("%s, congestion control %s, b1 → s2 limited by its bandwidth, reloaded", o.Name, cc)
	}
	return fmt.Sprintf("%s, congestion control %s", o.Name, cc)
}
