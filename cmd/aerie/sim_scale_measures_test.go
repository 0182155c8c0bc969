package main

import (
	"strings"
	"testing"
)

// `aerie sim --topology scale` prints the measurements behind the scaling
// laws of docs/SCALE.md: traffic by kind, the steady window's control
// traffic, subscription propagation and recovery.
func TestSimScaleMeasures(t *testing.T) {
	var out, errw strings.Builder
	args := []string{"--topology", "scale", "--brokers", "14", "--depth", "2", "--fanout", "1", "--subscriptions", "100",
		"--fault-phase", "10s", "--converge", "10s"}
	if code := runSim(args, &out, &errw); code != 0 {
		t.Fatalf("exit %d\n%s%s", code, out.String(), errw.String())
	}
	for _, want := range []string{"traffic: ", " silence ", " ack ", " subreq ", "control traffic", "messages per delivered event",
		"subscriptions: 100 started, Subscribe → SubStarted p50", "recovery after the heal: deep link (10 SHBs)", "sim: 1 runs, 0 violations"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("output lacks %q:\n%s", want, out.String())
		}
	}
	if strings.Contains(out.String(), "not recovered") {
		t.Errorf("a partition did not recover:\n%s", out.String())
	}
}

// `aerie experiment` knows the four scaling-law sweeps.
func TestExperimentScaleCases(t *testing.T) {
	for _, c := range []string{"scale-control", "scale-subs", "scale-selectivity", "scale-recovery"} {
		if !isScaleCase(c) {
			t.Errorf("%s is not an experiment case", c)
		}
	}
	var out, errw strings.Builder
	runExperiment([]string{"--help"}, &out, &errw)
	if !strings.Contains(errw.String(), "scale-selectivity") {
		t.Errorf("usage does not name the scale cases:\n%s", errw.String())
	}
}
