package bench

import (
	"context"
	"os"
	"strings"
	"testing"
	"time"
)

// TestMain lets this test binary stand in for `aerie bench-child` when a
// test runs the harness with Procs.
func TestMain(m *testing.M) {
	if len(os.Args) > 1 && os.Args[1] == ChildCommand {
		ctx, cancel := context.WithCancel(context.Background())
		code := ChildMain(ctx, os.Args[2:], os.Stdin, os.Stdout, os.Stderr)
		cancel()
		os.Exit(code)
	}
	os.Exit(m.Run())
}

// TestProcs runs the overhead and fanout workloads with every broker and
// the subscribers in child processes, briefly: everything is delivered
// exactly once, in order, and each broker's CPU is reported. Speed is
// never asserted.
func TestProcs(t *testing.T) {
	if testing.Short() {
		t.Skip("runs broker processes for several seconds")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	var progress strings.Builder
	rep, err := Run(ctx, Options{Workloads: []string{"overhead", "fanout"}, Procs: true, Quick: true, Duration: time.Second,
		FanoutN: []int{30}, Dir: t.TempDir(), Progress: &progress})
	if err != nil {
		t.Fatalf("%v\n%s", err, progress.String())
	}
	t.Log(progress.String())
	var sb strings.Builder
	WriteTables(&sb, rep)
	t.Log(sb.String())
	for _, r := range rep.Results {
		name := r.Workload + "/" + r.Point + "/" + r.System
		if r.Err != "" || r.Runs == 0 {
			t.Errorf("%s: failed: %s %s", name, r.Err, r.Note)
			continue
		}
		if r.Published == 0 || r.Delivered != r.Expected || r.Dups != 0 || r.Gaps != 0 {
			t.Errorf("%s: published %d, delivered %d of %d expected, %d dups, %d gaps", name, r.Published, r.Delivered, r.Expected, r.Dups, r.Gaps)
		}
		for _, role := range []string{"phb", "ib", "shb", "subscribers", "harness"} {
			v, ok := r.Extra[role+"_cpu_s_per_million"]
			// The fan-out point delivers too little for a 10 ms clock tick
			// to be sure to show; the overhead points cannot miss it.
			if !ok || (r.Workload == "overhead" && role != "subscribers" && v <= 0) {
				t.Errorf("%s: %s CPU per million %v (reported: %v)", name, role, v, ok)
			}
		}
		if r.Workload == "overhead" && r.System == SysAerie && r.Extra["phb_gd_ratio"] <= 0 {
			t.Errorf("%s: no GD ÷ best effort ratio at the PHB: %v", name, r.Extra)
		}
	}
	if !strings.Contains(sb.String(), "GD ÷ best effort") {
		t.Errorf("the tables lack the per-broker ratios:\n%s", sb.String())
	}
}

func TestParseStatCPU(t *testing.T) {
	// pid (comm) state ppid … utime stime: fields 14 and 15.
	line := "4242 (aerie (x) y) S 1 2 3 4 5 6 7 8 9 10 250 125 0 0 20 0 12 0"
	d, err := parseStatCPU(line)
	if err != nil || d != 3750*time.Millisecond {
		t.Fatalf("got %v, %v; want 3.75s", d, err)
	}
	if _, err := parseStatCPU("garbage"); err == nil {
		t.Error("no error for a malformed line")
	}
}
