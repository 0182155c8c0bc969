package bench

import (
	"context"
	"strings"
	"testing"
	"time"
)

// TestQuickSmoke runs every aerie workload briefly and checks aerie's results
// are sane: everything published is delivered exactly once, in order per
// pubend, and the percentiles are there. Speed is never asserted: CI
// machines are shared.
func TestQuickSmoke(t *testing.T) {
	if testing.Short() {
		t.Skip("runs real brokers for several seconds")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	var progress strings.Builder
	rep, err := Run(ctx, Options{Quick: true, Duration: time.Second, Dir: t.TempDir(), Progress: &progress})
	if err != nil {
		t.Fatalf("%v\n%s", err, progress.String())
	}
	t.Log(progress.String())
	if rep.Machine.GroupCommitPerS <= 0 || rep.Machine.FsyncP50us <= 0 || rep.Machine.LoopbackMBPerSec <= 0 {
		t.Errorf("machine limits missing: %+v", rep.Machine)
	}
	// The latency workload's floor, at its top rate: a record waits at
	// least for one fsync, so the floor is no lower than the probe's p50.
	if m := rep.Machine; m.CommitFloorRate != 10000 || m.CommitFloorP50us < m.FsyncP50us/2 || m.CommitFloorP99us < m.CommitFloorP50us {
		t.Errorf("latency floor missing or implausible: %+v", m)
	}
	seen := map[string]bool{}
	for _, r := range rep.Results {
		seen[r.Workload] = true
		name := r.Workload + "/" + r.Point + "/" + r.System
		if !strings.HasPrefix(r.System, "aerie") {
			// A peer (the embedded mochi broker) is measured, not checked:
			// at its maximum rate mochi itself loses QoS 1 messages on a
			// quiet machine, which says nothing about aerie.
			t.Logf("%s (peer): %s", name, r.Err)
			continue
		}
		if r.Err != "" || r.Runs == 0 {
			t.Errorf("%s: failed: %s", name, r.Err)
			continue
		}
		if r.Published == 0 || r.Delivered != r.Expected || r.Dups != 0 || r.Gaps != 0 {
			t.Errorf("%s: published %d, delivered %d of %d expected, %d dups, %d gaps", name, r.Published, r.Delivered, r.Expected, r.Dups, r.Gaps)
		}
		if r.MsgsPerSec <= 0 || r.P50 <= 0 || r.P99 < r.P50 || r.P999 < r.P99 || r.CPUPerMillion <= 0 {
			t.Errorf("%s: implausible figures %+v", name, r)
		}
	}
	for _, w := range Workloads {
		if !seen[w] {
			t.Errorf("workload %s missing from the report", w)
		}
	}
}

// TestSystemsKeepsOnlyThoseNamed: Options.Systems runs only the systems it
// names, skips the workloads none of them runs, and refuses a name no
// workload has, listing the ones it could have been.
func TestSystemsKeepsOnlyThoseNamed(t *testing.T) {
	if testing.Short() {
		t.Skip("runs real brokers")
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	var progress strings.Builder
	rep, err := Run(ctx, Options{Quick: true, Duration: 300 * time.Millisecond, Dir: t.TempDir(), Progress: &progress,
		Workloads: []string{"throughput", "mqtt"}, Systems: []string{SysAerieBestEffort}})
	if err != nil {
		t.Fatalf("%v\n%s", err, progress.String())
	}
	if len(rep.Results) != 2 {
		t.Errorf("%d results, want the 2 throughput points of %s alone", len(rep.Results), SysAerieBestEffort)
	}
	for _, r := range rep.Results {
		if r.System != SysAerieBestEffort || r.Workload != "throughput" {
			t.Errorf("ran %s/%s, not asked for", r.Workload, r.System)
		}
	}
	if !strings.Contains(progress.String(), "mqtt: none of the systems") {
		t.Errorf("no word of the skipped mqtt workload in:\n%s", progress.String())
	}
	_, err = Run(ctx, Options{Quick: true, Dir: t.TempDir(), Workloads: []string{"throughput"}, Systems: []string{"aerie-best-effrot"}})
	if err == nil || !strings.Contains(err.Error(), `unknown system "aerie-best-effrot"`) || !strings.Contains(err.Error(), SysAerieBestEffort) {
		t.Errorf("a misspelt system: %v, want it refused with the names there are", err)
	}
}

// TestMosquittoPeer: --peer mosquitto adds Debian's mosquitto to the mqtt
// workload at the one-broker points only, its broker child's CPU counted,
// and aerie at QoS 2 delivers everything once through three hops and on
// one broker.
func TestMosquittoPeer(t *testing.T) {
	if testing.Short() {
		t.Skip("runs real brokers")
	}
	if _, err := mosquittoPath(); err != nil {
		t.Skip(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	var progress strings.Builder
	rep, err := Run(ctx, Options{Quick: true, Duration: 500 * time.Millisecond, Dir: t.TempDir(), Progress: &progress,
		Workloads: []string{"mqtt"}, Peer: "mosquitto", Systems: []string{SysAerieMQTTQoS2, SysMosquittoQoS2}})
	if err != nil {
		t.Fatalf("%v\n%s", err, progress.String())
	}
	count := map[string]int{}
	for _, r := range rep.Results {
		count[r.System]++
		name := r.Point + "/" + r.System
		if r.Err != "" || r.Runs == 0 {
			t.Errorf("%s: failed: %s %s", name, r.Err, r.Note)
			continue
		}
		if r.Delivered != r.Expected || r.Dups != 0 || r.Gaps != 0 {
			t.Errorf("%s: delivered %d of %d, %d dups, %d gaps", name, r.Delivered, r.Expected, r.Dups, r.Gaps)
		}
		if r.System == SysMosquittoQoS2 {
			if !strings.HasPrefix(r.Point, "1broker") {
				t.Errorf("mosquitto ran at the three-hop point %s", r.Point)
			}
			if r.Extra["broker_cpu_s_per_million"] <= 0 {
				t.Errorf("%s: the mosquitto child's CPU is not counted: %v", name, r.Extra)
			}
		}
	}
	if count[SysAerieMQTTQoS2] != 4 || count[SysMosquittoQoS2] != 2 {
		t.Errorf("results per system %v, want aerie-mqtt-qos2 at the 4 points and mosquitto-qos2 at the 2 one-broker ones", count)
	}
	if _, err := Run(ctx, Options{Quick: true, Workloads: []string{"mqtt"}, Peer: "mosquito"}); err == nil || !strings.Contains(err.Error(), `unknown peer "mosquito"`) {
		t.Errorf("a misspelt peer: %v, want it refused", err)
	}
}
