package main

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/aerie-mq/aerie/client"
	"github.com/aerie-mq/aerie/internal/failover"
)

// TestSIGTERMGraceful: a PHB process told to stop mid-stream exits 0 after
// finishing its fsync; after a restart its publisher completes without a
// duplicate (each seq gets one tick, and the retried ones their original).
func TestSIGTERMGraceful(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs a process")
	}
	bin, dir := buildAerie(t)
	var free failover.Ports
	addr := fmt.Sprintf("127.0.0.1:%d", freePort(t, &free))
	listen := fmt.Sprintf("127.0.0.1:%d", freePort(t, &free))
	cfg := fmt.Sprintf("[[broker]]\nid = \"p1\"\nlisten = %q\nclients = %q\ndata = \"data\"\npubends = [\"P1\"]\n", listen, addr)
	cfgPath := filepath.Join(dir, "network.toml")
	os.WriteFile(cfgPath, []byte(cfg), 0o644)
	start := func() *exec.Cmd {
		cmd := exec.Command(bin, "broker", "--config", cfgPath, "--id", "p1")
		cmd.Stderr, _ = os.Create(filepath.Join(dir, "p1.log"))
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		return cmd
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	dial := func() *client.Client {
		// The process is still starting: RetryDial waits for it (until ctx ends).
		c, err := client.Dial(ctx, addr, client.Options{ID: "pub", Logger: quiet, RetryDial: true})
		if err != nil {
			t.Fatalf("dial: %v", err)
		}
		return c
	}
	cmd := start()
	c := dial()
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
	cmd.Process.Signal(syscall.SIGTERM)
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	select {
	case err := <-exited:
		if err != nil {
			t.Fatalf("broker did not exit cleanly on SIGTERM: %v (log in %s)", err, dir)
		}
	case <-time.After(20 * time.Second):
		cmd.Process.Kill()
		t.Fatal("broker did not stop within 20s of SIGTERM")
	}
	cmd = start()
	defer func() { cmd.Process.Kill(); cmd.Wait() }()
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
