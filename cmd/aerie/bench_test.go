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

// TestBenchJSON: the --json contract (DESIGN.md §6) on one quick workload.
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
