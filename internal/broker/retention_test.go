package broker_test

import (
	"context"
	"testing"
	"time"

	"github.com/aerie-mq/aerie/client"
	"github.com/aerie-mq/aerie/internal/broker"
)

// TestLogTrimmedAndRecoveredAcrossRestart: released log segments are
// dropped; after a restart, a publisher retrying old sequence numbers gets
// the original ticks (dedup survived the trim) and new publishes land above
// the recovered high-water mark.
func TestLogTrimmedAndRecoveredAcrossRestart(t *testing.T) {
	opts := phbOptions(t) // one in-memory FS, kept across the restart
	opts.SegmentBytes, opts.TrimInterval = 4<<10, 20*time.Millisecond
	run := func() (*broker.Node, func() error) { return runNode(t, opts) }
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()

	node, stop := run()
	c, err := client.Dial(ctx, opts.Clients, client.Options{ID: "pub", Logger: quietLogger()})
	if err != nil {
		t.Fatal(err)
	}
	first := map[uint64]uint64{} // seq -> tick
	for i := 1; i <= 500; i++ {
		a, err := c.Publish(ctx, client.Message{Topic: "t", Payload: make([]byte, 100)})
		if err != nil {
			t.Fatal(err)
		}
		first[uint64(i)] = a.Tick
	}
	// Wait (on the broker's own status, with a deadline) until trimming ran.
	var st broker.Status
	for st.LogFirst == 0 {
		if st, err = node.Status(ctx); err != nil {
			t.Fatalf("log never trimmed: %v", err)
		}
		select {
		case <-ctx.Done():
			t.Fatalf("log never trimmed (first index %d of %d)", st.LogFirst, st.LogNext)
		case <-time.After(10 * time.Millisecond):
		}
	}
	c.Close()
	stop()

	_, stop = run()
	defer stop()
	// Replay the same client's publishes 1..3 by hand: a new client with the
	// same id and seqs starting over is exactly a publisher retrying.
	c2, err := client.Dial(ctx, opts.Clients, client.Options{ID: "pub", Logger: quietLogger()})
	if err != nil {
		t.Fatal(err)
	}
	defer c2.Close()
	for i := 1; i <= 3; i++ {
		a, err := c2.Publish(ctx, client.Message{Topic: "t", Payload: make([]byte, 100)})
		if err != nil {
			t.Fatal(err)
		}
		if a.Tick != first[uint64(i)] {
			t.Fatalf("retried seq %d got tick %d, originally %d: dedup lost with the trimmed segments", i, a.Tick, first[uint64(i)])
		}
	}
	fresh, err := client.Dial(ctx, opts.Clients, client.Options{ID: "other", Logger: quietLogger()})
	if err != nil {
		t.Fatal(err)
	}
	defer fresh.Close()
	a, err := fresh.Publish(ctx, client.Message{Topic: "t"})
	if err != nil {
		t.Fatal(err)
	}
	if a.Tick <= first[500] {
		t.Fatalf("new publish got tick %d, not above the last before restart %d", a.Tick, first[500])
	}
}
