package sim

import (
	"testing"
	"time"

	"github.com/aerie-mq/aerie/internal/gd"
)

// TestReleaseUnderFaults: runs with release floors (SHBs standing in for
// durable subscribers) and a short max_retain hold pubends back and release
// early under faults without any violation, and the batch exercises both
// (Gryphon DS, DSN 2003 §3; docs/CONCEPTS.md I10).
func TestReleaseUnderFaults(t *testing.T) {
	held, early, runs := 0, 0, 0
	cleanRuns(t, 40, shortFaults, func(p plan) bool {
		return p.floors && p.maxRetain != 0 && p.maxRetain <= 10*time.Second
	}, func(res Result) bool {
		runs++
		held += res.HeldBack
		early += res.EarlyReleased
		return held > 0 && early > 0 && runs >= 4
	})
	t.Logf("%d runs: %d samples held back by a floor, %d released early", runs, held, early)
	if held == 0 || early == 0 {
		t.Fatalf("the batch never held a pubend back (%d) or never released early (%d)", held, early)
	}
}

// TestOracleBitesEarlyRelease: a pubend that releases everything older than
// max_retain, past what its downstreams acked (gd.MutReleaseEarly), must be
// reported as I10.
func TestOracleBitesEarlyRelease(t *testing.T) {
	for s := uint64(1); s <= 60; s++ {
		o := DefaultOptions(s)
		o.Mutation = gd.MutReleaseEarly
		o.Config.MaxRetain = time.Second
		o.Faults = []string{FaultCut, FaultStall, FaultCrash}
		res, err := Run(o)
		if err != nil {
			t.Fatal(err)
		}
		for _, v := range res.Violations {
			if v.Invariant == "I10" {
				t.Logf("caught after %d seeds: %v", s, v)
				return
			}
		}
		if len(res.Violations) > 0 {
			t.Logf("seed %d: other violation first: %v", s, res.Violations[0])
		}
	}
	t.Fatal("no I10 violation in 60 seeds with early release past T_d")
}

// TestReleaseBySize: runs with release floors, early release by age off
// and a size bound (max_retain_bytes) release early by size under faults
// without any violation (docs/CONCEPTS.md I10).
func TestReleaseBySize(t *testing.T) {
	early, runs := 0, 0
	cleanRuns(t, 80, shortFaults, bySizeOnly, func(res Result) bool {
		runs++
		early += res.EarlyReleased
		return early > 0 && runs >= 4
	})
	t.Logf("%d runs: %d samples released early by size", runs, early)
	if runs == 0 || early == 0 {
		t.Fatalf("%d runs never released early by size", runs)
	}
}

// TestOracleBitesReleaseOneMore: a pubend past its size bound that releases
// one event more than the bound needs (gd.MutReleaseOneMore) is reported
// as I10.
func TestOracleBitesReleaseOneMore(t *testing.T) {
	for s := uint64(1); s <= 80; s++ {
		o := DefaultOptions(s)
		p, err := makePlan(o, seedRng(s))
		if err != nil {
			t.Fatal(err)
		}
		if !bySizeOnly(p) {
			continue
		}
		o.Mutation = gd.MutReleaseOneMore
		res, err := Run(o)
		if err != nil {
			t.Fatal(err)
		}
		for _, v := range res.Violations {
			if v.Invariant == "I10" {
				t.Logf("caught at seed %d: %v", s, v)
				return
			}
		}
	}
	t.Fatal("no I10 violation in 80 seeds with one event released past the size bound's need")
}

// bySizeOnly: runs with release floors whose pubends release early by size
// alone (max_retain_bytes, no max_retain).
func bySizeOnly(p plan) bool { return p.floors && p.maxRetain == 0 && p.maxRetainBytes > 0 }

// shortFaults is a seed's default options with a 15 s fault phase and
// 40 s to converge.
func shortFaults(seed uint64) Options {
	o := DefaultOptions(seed)
	o.FaultPhase, o.ConvergePhase = 15*time.Second, 40*time.Second
	return o
}

// cleanRuns runs the seeds 1…last whose plan wants selects, with the
// options opts gives, failing the test at the first violation; it hands
// each result to seen and stops once seen says the batch has enough.
func cleanRuns(t *testing.T, last uint64, opts func(seed uint64) Options, wants func(plan) bool, seen func(Result) (enough bool)) {
	t.Helper()
	for s := uint64(1); s <= last; s++ {
		o := opts(s)
		p, err := makePlan(o, seedRng(s))
		if err != nil {
			t.Fatal(err)
		}
		if !wants(p) {
			continue
		}
		res, err := Run(o)
		if err != nil {
			t.Fatal(err)
		}
		if len(res.Violations) > 0 {
			t.Fatalf("seed %d: %v\n%s", s, res.Violations[0], res.Plan)
		}
		if seen(res) {
			return
		}
	}
}
