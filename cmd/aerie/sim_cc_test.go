package main

import (
	"io"
	"strings"
	"testing"
)

// `aerie sim --topology cc-e3` prints Gryphon CC §5 E3's five phases and
// passes the oracle.
func TestSimCCE3Phases(t *testing.T) {
	var out, errw strings.Builder
	if code := runSim([]string{"--topology", "cc-e3", "--seed", "1"}, &out, &errw); code != 0 {
		t.Fatalf("exit %d\n%s%s", code, out.String(), errw.String())
	}
	for _, want := range []string{"phase 1,", "phase 5,", "events/s published", "sim: 1 runs, 0 violations"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("output lacks %q:\n%s", want, out.String())
		}
	}
}

// `aerie sim --topology cc-e4 --dt-rec A,B` prints one table row per value;
// one value is an ordinary run that reports the recovery time.
func TestSimCCE4Table(t *testing.T) {
	var out, errw strings.Builder
	if code := runSim([]string{"--topology", "cc-e4", "--dt-rec", "0.5,1.5", "--workers", "2"}, &out, &errw); code != 0 {
		t.Fatalf("exit %d\n%s%s", code, out.String(), errw.String())
	}
	for _, want := range []string{"| Δt_rec (tick-s/s) |", "| 0.5 | ", "| 1.5 | ", "sim: 2 runs, 0 violations"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("output lacks %q:\n%s", want, out.String())
		}
	}
	out.Reset()
	if code := runSim([]string{"--topology", "cc-e4", "--dt-rec", "1", "--seed", "1"}, &out, &errw); code != 0 {
		t.Fatalf("exit %d\n%s%s", code, out.String(), errw.String())
	}
	if !strings.Contains(out.String(), "s after b1–s2 returned") {
		t.Errorf("one value does not report s2's recovery:\n%s", out.String())
	}
}

func TestSimCCE4BadFlags(t *testing.T) {
	for _, args := range [][]string{
		{"--topology", "cc-e4", "--dt-rec", "x"},
		{"--topology", "cc-e4", "--dt-rec", "0.5,200"},
		{"--topology", "cc-e4", "--trace"},
	} {
		var out, errw strings.Builder
		if code := runSim(args, &out, &errw); code != 2 || errw.Len() == 0 {
			t.Errorf("%v: exit %d, stderr %q", args, code, errw.String())
		}
	}
}

// `aerie sim --topology cc-collapse-ib` prints the windows of Gryphon CC
// §2 Fig. 2 and passes the oracle with congestion control; without it the
// oracle reports the collapse (CC2) with the command that replays it.
func TestSimCCCollapseIB(t *testing.T) {
	var out, errw strings.Builder
	if code := runSim([]string{"--topology", "cc-collapse-ib", "--seed", "1"}, &out, &errw); code != 0 {
		t.Fatalf("exit %d\n%s%s", code, out.String(), errw.String())
	}
	for _, want := range []string{"steady (0–20 s)", "first minute throttled", "last minute (60–120 s)", "sim: 1 runs, 0 violations"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("output lacks %q:\n%s", want, out.String())
		}
	}
	out.Reset()
	if code := runSim([]string{"--topology", "cc-collapse-ib", "--seed", "1", "--congestion-control=false"}, &out, &errw); code != 1 {
		t.Fatalf("exit %d without congestion control, want 1", code)
	}
	if want := "CC2: s1 lags the present"; !strings.Contains(out.String(), want) || !strings.Contains(out.String(), "--topology cc-collapse-ib --congestion-control=false") {
		t.Errorf("output lacks %q or the replay command:\n%.2000s", want, out.String())
	}
}

// The help of `aerie sim` and `aerie experiment` names the collapse
// scenarios.
func TestCollapseHelp(t *testing.T) {
	for _, run := range []func([]string, io.Writer, io.Writer) int{runSim, runExperiment} {
		var out, errw strings.Builder
		run([]string{"-h"}, &out, &errw)
		for _, want := range []string{"cc-collapse-ib", "cc-collapse-pb"} {
			if !strings.Contains(errw.String(), want) {
				t.Errorf("help lacks %q:\n%s", want, errw.String())
			}
		}
	}
}
