package main

import (
	"bytes"
	"context"
	"image/png"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/aerie-mq/aerie/internal/lab/failover"
	"github.com/aerie-mq/aerie/internal/lab/scaleexp"
	"github.com/aerie-mq/aerie/internal/sim"
)

// TestExperimentSmoke runs case (b) of the seed 000 §4.2 experiment in
// small — ten broker processes, b1 of the redundant cell IB1 stalled for a
// second and then killed — so that the harness keeps working. failover.Run
// checks that all five SHBs received every event exactly once, in order;
// this test also requires that the nacks were measured and that s1 kept
// receiving events after the crash (through b2). Speed is not asserted.
func TestExperimentSmoke(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs ten processes")
	}
	f := newProcFixture(t)
	bin, dir := f.bin, f.dir
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	res, err := failover.Run(ctx, failover.Options{Bin: bin, Dir: dir, Case: "b",
		FaultAt: 3 * time.Second, Stall: time.Second, End: 8 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	after := 0
	for _, s := range res.Latency["s1"] {
		if s.At > res.FailAt+time.Second {
			after++
		}
	}
	if after == 0 {
		t.Fatalf("s1 received nothing after b1 crashed at %v", res.FailAt)
	}
	if len(res.Nacks) == 0 {
		t.Fatal("no nack samples: the brokers' /status was not polled")
	}
	if err := failover.Plot(res, filepath.Join(dir, "smoke.png")); err != nil {
		t.Fatal(err)
	}
	t.Log(failover.Summary(res))
}

// TestExperimentCCE1 runs `aerie experiment --case cc-e1` into a temporary
// directory: the plot of Gryphon CC §5 E1 is a PNG of three panels and
// the summary says the oracle held with congestion control and not
// without.
func TestExperimentCCE1(t *testing.T) {
	dir := t.TempDir()
	var out, errs bytes.Buffer
	if code := runExperiment([]string{"--case", "cc-e1", "--out", dir}, &out, &errs); code != 0 {
		t.Fatalf("exit %d: %s", code, errs.String())
	}
	f, err := os.Open(filepath.Join(dir, "cc-e1-link-failure.png"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	cfg, err := png.DecodeConfig(f)
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Width < 600 || cfg.Height < cfg.Width {
		t.Errorf("plot is %d×%d pixels: want three panels stacked, at least 600 wide", cfg.Width, cfg.Height)
	}
	for _, want := range []string{"no violation (CC2 holds)", "CC2: s2 has not recovered", "s2 back within 2 s of the present at"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("summary lacks %q:\n%s", want, out.String())
		}
	}
}

// TestExperimentZapPlots runs `aerie experiment --case zap-plots --from
// FILE`: both of P2S's figures as PNGs from a small CSV; a file that does
// not parse fails the case.
func TestExperimentZapPlots(t *testing.T) {
	dir := t.TempDir()
	csv := filepath.Join(dir, "zap.csv")
	if err := os.WriteFile(csv, []byte("source,replicas,publishers,p50_ms,p99_ms,msgs_per_s,vs_r1\n"+
		"aerie,1,1,1.6,2.6,128000,\naerie,1,3,1.3,3.4,257000,\naerie,3,1,1.6,4.5,,0.45\naerie,3,3,2.5,5.8,,0.39\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	var out, errs bytes.Buffer
	if code := runExperiment([]string{"--case", "zap-plots", "--from", csv, "--out", dir}, &out, &errs); code != 0 {
		t.Fatalf("exit %d: %s", code, errs.String())
	}
	for _, name := range []string{"zap-p2s-fig6-latency.png", "zap-p2s-fig7-throughput.png"} {
		f, err := os.Open(filepath.Join(dir, name))
		if err != nil {
			t.Fatal(err)
		}
		cfg, err := png.DecodeConfig(f)
		f.Close()
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if cfg.Width < 600 || cfg.Height < cfg.Width/2 {
			t.Errorf("%s is %d×%d pixels: want two panels stacked, at least 600 wide", name, cfg.Width, cfg.Height)
		}
		if !strings.Contains(out.String(), name) {
			t.Errorf("output does not name %s:\n%s", name, out.String())
		}
	}
	if err := os.WriteFile(csv, []byte("source,replicas\naerie,1\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	out.Reset()
	errs.Reset()
	if code := runExperiment([]string{"--case", "zap-plots", "--from", csv, "--out", dir}, &out, &errs); code == 0 || !strings.Contains(errs.String(), "no column") {
		t.Errorf("a CSV without the columns: exit %d, %q", code, errs.String())
	}
}

// TestExperimentRegistryDrivesDispatch: every case of the registry is run
// by exactly one kind of run function, and every case those know is in
// the registry (so -h lists every case, and --case refuses no real one).
func TestExperimentRegistryDrivesDispatch(t *testing.T) {
	registered := map[string]bool{}
	for _, c := range experimentCases() {
		if registered[c.name] {
			t.Errorf("case %s registered twice", c.name)
		}
		registered[c.name] = true
		n := 0
		for _, is := range []func(string) bool{isCCRealCase, isCCCase, isScaleCase, isDSCase, isFailoverCase,
			func(c string) bool { return c == zapPlotsCase }} {
			if is(c.name) {
				n++
			}
		}
		if n != 1 {
			t.Errorf("case %s is claimed by %d kinds of run, want 1", c.name, n)
		}
	}
	var known []string
	for c := range ccPlots {
		known = append(known, c)
	}
	for c := range ccRealPlots {
		known = append(known, c)
	}
	for c := range scaleexp.Cases {
		known = append(known, c)
	}
	known = append(known, sim.ScenarioDSChurn, sim.ScenarioDSCrash, "a", "b", "c", zapPlotsCase)
	for _, c := range known {
		if !registered[c] {
			t.Errorf("case %s runs but is not in the registry", c)
		}
	}
	var out, errOut bytes.Buffer
	if code := run([]string{"experiment", "--case", "a,nope"}, &out, &errOut); code != 2 || !strings.Contains(errOut.String(), `unknown case "nope"`) {
		t.Errorf("an unknown case: exit %d, %q", code, errOut.String())
	}
}
