package main

import (
	"bufio"
	"encoding/json"
	"strings"
	"testing"
)

func TestBenchHelp(t *testing.T) {
	var out, errw strings.Builder
	if code := runBench([]string{"-h"}, &out, &errw); code != 0 {
		t.Fatalf("exit %d", code)
	}
	for _, f := range []string{"-workload", "-peer", "-duration", "-runs", "-json", "-plots", "-quick", "-procs"} {
		if !strings.Contains(errw.String(), f) {
			t.Errorf("-h does not mention %s:\n%s", f, errw.String())
		}
	}
}

func TestBenchBadFlags(t *testing.T) {
	for _, args := range [][]string{{"--workload", "nope"}, {"--peer", "kafka"}, {"--rates", "x"}} {
		var out, errw strings.Builder
		if code := runBench(args, &out, &errw); code == 0 || errw.Len() == 0 {
			t.Errorf("%v: exit %d, stderr %q", args, code, errw.String())
		}
	}
}

// TestBenchJSON: the --json contract (docs/BENCHMARKS.md "Method") on one quick workload.
func TestBenchJSON(t *testing.T) {
	if testing.Short() {
		t.Skip("runs real brokers")
	}
	var out, errw strings.Builder
	args := []string{"--quick", "--json", "--workload", "throughput,overhead", "--duration", "500ms", "--dir", t.TempDir()}
	if code := runBench(args, &out, &errw); code != 0 {
		t.Fatalf("exit %d\n%s", code, errw.String())
	}
	systems := map[string]bool{"aerie": true, "aerie-best-effort": true, "nats-core": true, "nats-jetstream-sync": true, "nats-jetstream-default": true}
	seen := map[string]bool{}
	sc := bufio.NewScanner(strings.NewReader(out.String()))
	for sc.Scan() {
		var obj map[string]any
		if err := json.Unmarshal(sc.Bytes(), &obj); err != nil {
			t.Fatalf("not JSON: %q: %v", sc.Text(), err)
		}
		for _, k := range []string{"workload", "system", "msgs_per_sec", "p50_us", "p99_us", "p999_us", "cpu_s_per_million"} {
			if _, ok := obj[k]; !ok {
				t.Errorf("object lacks %q: %s", k, sc.Text())
			}
		}
		sys, _ := obj["system"].(string)
		if !systems[sys] {
			t.Errorf("unknown system %q", sys)
		}
		key := obj["workload"].(string) + "/" + sys
		if seen[key] {
			t.Errorf("two objects for %s", key)
		}
		seen[key] = true
	}
	if !seen["throughput/aerie"] || !seen["overhead/aerie"] || !seen["overhead/aerie-best-effort"] {
		t.Errorf("missing objects; have %v", seen)
	}
}

// TestBenchProcsJSON: with --procs the overhead objects keep their fields
// and add each broker's CPU per event and, for GD, its ratio to best
// effort (the brokers are this test binary, as `aerie bench-child`).
func TestBenchProcsJSON(t *testing.T) {
	if testing.Short() {
		t.Skip("runs broker processes")
	}
	var out, errw strings.Builder
	args := []string{"--quick", "--json", "--procs", "--workload", "overhead", "--duration", "500ms", "--dir", t.TempDir()}
	if code := runBench(args, &out, &errw); code != 0 {
		t.Fatalf("exit %d\n%s", code, errw.String())
	}
	sc := bufio.NewScanner(strings.NewReader(out.String()))
	seen := 0
	for sc.Scan() {
		var obj struct {
			System        string             `json:"system"`
			CPUPerMillion float64            `json:"cpu_s_per_million"`
			Extra         map[string]float64 `json:"extra"`
		}
		if err := json.Unmarshal(sc.Bytes(), &obj); err != nil {
			t.Fatalf("not JSON: %q: %v", sc.Text(), err)
		}
		seen++
		for _, k := range []string{"phb_cpu_s_per_million", "ib_cpu_s_per_million", "shb_cpu_s_per_million"} {
			if obj.Extra[k] <= 0 {
				t.Errorf("%s: extra %s = %v", obj.System, k, obj.Extra[k])
			}
		}
		if obj.CPUPerMillion < obj.Extra["phb_cpu_s_per_million"] {
			t.Errorf("%s: whole-system CPU %v below the PHB's alone", obj.System, obj.CPUPerMillion)
		}
		if _, ok := obj.Extra["phb_gd_ratio"]; ok != (obj.System == "aerie") {
			t.Errorf("%s: phb_gd_ratio present %v", obj.System, ok)
		}
	}
	if seen != 2 {
		t.Errorf("%d objects, want aerie and aerie-best-effort:\n%s", seen, out.String())
	}
}
