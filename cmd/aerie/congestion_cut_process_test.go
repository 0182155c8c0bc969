package main

import (
	"context"
	"testing"
	"time"

	"github.com/aerie-mq/aerie/internal/lab/ccreal"
)

// TestCongestionControlRecoversAfterCut is Gryphon CC §5 E1 scaled for CI,
// with real broker processes (internal/lab/ccreal): p1 → b1 → s1, s2, b1 → s2
// capped at 100 KB/s with a `bandwidth`, a publisher offering 80 events/s
// of 1 KB (about 89 % of the cap), and b1 → s2 cut for 11.5 s — longer
// than the SHB's receive window (10 s), so that s2 recovers by SDCC with
// its NACK window (§3.2). After the restore s2 has 11.5 s of stream to
// recover over a link with ~11 % to spare: congestion control must lower
// p1's rate (PDCC, §3.1) so that s2 comes back within a bound, and both
// subscribers must get every event exactly once and in order (ccreal.Run
// fails otherwise). Without congestion control p1 is never limited and s2
// recovers only with the ~10 events/s the publisher leaves: minutes.
//
// docs/BENCHMARKS.md §11f has the full-size run (`aerie experiment --case
// cc-e1-real`). The bound is loose because the test machine is shared.
func TestCongestionControlRecoversAfterCut(t *testing.T) {
	o, res, ran := runE1Cut(t, 13500*time.Millisecond, 29*time.Second)
	t.Logf("%s(ran %v)", res.Summary(), ran.Round(time.Millisecond))
	// The full-size run recovers 15 s of stream in about 15 s; this one
	// took 11.5 s for its 11.5 s.
	checkS2Back(t, o, res, 15*time.Second)
	if low := res.LowestLimitAfter(o.BackAt); low <= 0 || low >= o.Rate {
		t.Errorf("p1's rate limit after the restore: lowest %.1f events/s, want below the %.0f offered (0: never limited)", low, o.Rate)
	}
	if res.MaxWindow() <= 0 {
		t.Errorf("s2 never had a NACK window: it did not recover by SDCC")
	}
}

// TestCongestionControlShortCutNacksOnce: the same network with b1 → s2
// cut for 6 s, shorter than s2's receive window (10 s). Cut off from the
// pubend's DCQs, s2 must still count as recovering before the link returns,
// so that its first nacks go through a NACK window (Gryphon CC §3.2) rather
// than ask for the whole outage at once (congestion.Monitor.Observe); and
// its nacks must not be repeated while their answers queue on the capped
// link (the retransmissions are the congestion), and it must be back within
// a bound. Before subends under congestion control held their repeats, s2
// nacked 18.8 s of ticks for a 6 s outage (3.1 times the outage) and needed
// 17.8–21.5 s to come back; with the hold 11.2–11.4 s of ticks and
// 10.8–11.0 s (docs/known-issues/congestion-real-links.md, 1).
func TestCongestionControlShortCutNacksOnce(t *testing.T) {
	o, res, _ := runE1Cut(t, 8*time.Second, 22*time.Second)
	t.Logf("%s", res.Summary())
	if p, ok := firstPollFrom(res, o.BackAt); !ok || !p.S2Recovering || p.S2Window <= 0 {
		t.Errorf("s2 when b1 → s2 returned (poll at %v): recovering %v, NACK window %d ms; want recovering with a window", p.At, p.S2Recovering, p.S2Window)
	}
	outage := (o.BackAt - o.CutAt).Seconds()
	if n := res.NackedAfterRestore(); n > 2.5*outage {
		t.Errorf("s2 nacked %.1f s of ticks after a %.0f s outage: repeats went out while answers queued", n, outage)
	}
	// Loose, for a shared test machine: the nack count above is what
	// tells the hold from its absence.
	checkS2Back(t, o, res, 16*time.Second)
}

// firstPollFrom is the first poll of the brokers' state at or after at.
func firstPollFrom(res *ccreal.Result, at time.Duration) (ccreal.Poll, bool) {
	for _, p := range res.Polls {
		if p.At >= at {
			return p, true
		}
	}
	return ccreal.Poll{}, false
}

// runE1Cut runs the E1 network with congestion control, b1 → s2 cut from
// 2 s until backAt and publishing until end (skipped with -short), and
// returns its options, its result and how long it ran.
func runE1Cut(t *testing.T, backAt, end time.Duration) (ccreal.Options, *ccreal.Result, time.Duration) {
	t.Helper()
	if testing.Short() {
		t.Skip("builds and runs processes")
	}
	o := ccreal.E1Options(aerieBinary(t), t.TempDir(), true)
	o.CutAt, o.BackAt, o.End, o.Drain = 2*time.Second, backAt, end, 40*time.Second
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	began := time.Now()
	res, err := ccreal.Run(ctx, o)
	if err != nil {
		t.Fatal(err)
	}
	return o, res, time.Since(began)
}

// checkS2Back fails the test unless s2 was back within ccreal.CaughtUp of
// the present by bound after b1 → s2 returned.
func checkS2Back(t *testing.T, o ccreal.Options, res *ccreal.Result, bound time.Duration) {
	t.Helper()
	if rec, ok := res.Recovered(); !ok || rec-o.BackAt > bound {
		t.Errorf("s2 not back within %v of the present by %v after b1 → s2 returned (recovered %v at %v; at most %v behind)",
			ccreal.CaughtUp, bound, ok, rec, res.MaxLag())
	}
}
