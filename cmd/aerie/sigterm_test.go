package main

import (
	"context"
	"fmt"
	"syscall"
	"testing"
	"time"

	"github.com/aerie-mq/aerie/client"
)

// TestSIGTERMGraceful: a PHB process told to stop mid-stream exits 0 after
// finishing its fsync; after a restart its publisher completes without a
// duplicate (each seq gets one tick, and the retried ones their original).
func TestSIGTERMGraceful(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs a process")
	}
	f := newProcFixture(t)
	addr, listen := f.addr(), f.addr()
	f.writeConfig(fmt.Sprintf("[[broker]]\nid = \"p1\"\nlisten = %q\nclients = %q\ndata = \"data\"\npubends = [\"P1\"]\n", listen, addr))
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	p1 := f.startOwn("p1")
	c := f.dial(ctx, addr, "pub")
	var chans []<-chan client.Result
	for i := 1; i <= 2000; i++ {
		ch, err := c.PublishAsync(client.Message{Topic: "t", Props: map[string]any{"seq": int64(i)}})
		if err != nil {
			t.Fatal(err)
		}
		chans = append(chans, ch)
	}
	first := <-chans[0]
	if first.Err != nil {
		t.Fatal(first.Err)
	}
	p1.cmd.Process.Signal(syscall.SIGTERM)
	switch exited, err := p1.wait(20 * time.Second); {
	case !exited:
		t.Fatal("broker did not stop within 20s of SIGTERM")
	case err != nil:
		t.Fatalf("broker did not exit cleanly on SIGTERM: %v (log in %s)", err, f.dir)
	}
	f.startOwn("p1")
	// The same client resends every unacknowledged publish on reconnect.
	ticks := map[uint64]bool{}
	for i, ch := range chans {
		r := first
		if i > 0 {
			select {
			case r = <-ch:
			case <-ctx.Done():
				t.Fatalf("publish %d never acked after the restart", i+1)
			}
		}
		if r.Err != nil {
			t.Fatalf("publish %d: %v", i+1, r.Err)
		}
		if ticks[r.Ack.Tick] {
			t.Fatalf("tick %d acked for two publishes", r.Ack.Tick)
		}
		ticks[r.Ack.Tick] = true
	}
	c.Close()
}
