package main

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	"github.com/aerie-mq/aerie/internal/failover"
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
