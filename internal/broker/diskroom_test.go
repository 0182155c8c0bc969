package broker_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/aerie-mq/aerie/client"
	"github.com/aerie-mq/aerie/internal/broker"
	"github.com/aerie-mq/aerie/internal/vfs"
)

// smallDisk mounts a tmpfs of size bytes for the test, or skips it where
// mounting is not allowed.
func smallDisk(t *testing.T, size string) string {
	t.Helper()
	dir := t.TempDir()
	if os.Geteuid() != 0 {
		t.Skip("mounting a small filesystem needs root")
	}
	if out, err := exec.Command("mount", "-t", "tmpfs", "-o", "size="+size, "tmpfs", dir).CombinedOutput(); err != nil {
		t.Skipf("cannot mount a tmpfs here: %v: %s", err, out)
	}
	t.Cleanup(func() { exec.Command("umount", dir).Run() })
	return dir
}

// TestDiskFullRefusesPublishes: a PHB whose data directory's filesystem has
// less room than its reserve refuses publishes with the reason, keeps
// running, and takes them again once an operator makes room.
func TestDiskFullRefusesPublishes(t *testing.T) {
	disk := smallDisk(t, "40m")
	filler := filepath.Join(disk, "filler")
	if err := os.WriteFile(filler, make([]byte, 30<<20), 0o644); err != nil {
		t.Fatal(err)
	}
	opts := phbOptions(t)
	opts.FS, opts.DataDir = vfs.OS(), filepath.Join(disk, "p1")
	opts.DiskReserve, opts.TrimInterval = 16<<20, 50*time.Millisecond
	_, stop := runNode(t, opts)
	t.Cleanup(func() { stop() })

	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	c, err := client.Dial(ctx, opts.Clients, client.Options{ID: "pub", Pubend: "P1", Logger: quietLogger()})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	// The broker learns its room after its first disk work (or trim
	// tick): until then a publish may still go through.
	var refused error
	for i := 0; refused == nil; i++ {
		_, err := c.Publish(ctx, client.Message{Topic: "a"})
		switch {
		case errors.Is(err, client.ErrRejected):
			refused = err
		case err != nil:
			t.Fatalf("publish %d: %v", i, err)
		}
	}
	if !strings.Contains(refused.Error(), "below its 16 MiB reserve: publishes are refused until space returns") {
		t.Fatalf("refusal without its reason: %v", refused)
	}
	if err := os.Remove(filler); err != nil {
		t.Fatal(err)
	}
	for {
		_, err := c.Publish(ctx, client.Message{Topic: "a"})
		if err == nil {
			return // taken again
		}
		if !errors.Is(err, client.ErrRejected) {
			t.Fatalf("publish after room returned: %v", err)
		}
	}
}

// TestRaftDiskReserve: the serving member of a replicated PHB cell whose
// data directory has less room than its reserve refuses publishes with
// the reason, and takes them again once an operator makes room. (The
// three members share one small filesystem here.)
func TestRaftDiskReserve(t *testing.T) {
	disk := smallDisk(t, "40m")
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	i := 0
	c := startRaftCellWith(t, ctx, 3, broker.RaftClientsForward, func(o *broker.Options) {
		i++
		o.FS, o.DataDir = vfs.OS(), filepath.Join(disk, fmt.Sprintf("p%d", i))
		o.DiskReserve, o.TrimInterval = 16<<20, 50*time.Millisecond
	})
	pub := dialPub(t, ctx, c.nodes[c.leader])
	defer pub.Close()
	if _, err := pub.Publish(ctx, client.Message{Topic: "t"}); err != nil {
		t.Fatalf("publish with room: %v", err)
	}
	filler := filepath.Join(disk, "filler")
	if err := os.WriteFile(filler, make([]byte, 30<<20), 0o644); err != nil {
		t.Fatal(err)
	}
	var refused error
	for i := 0; refused == nil; i++ { // until the next trim tick measures the room
		_, err := pub.Publish(ctx, client.Message{Topic: "t"})
		switch {
		case errors.Is(err, client.ErrRejected):
			refused = err
		case err != nil:
			t.Fatalf("publish %d: %v", i, err)
		}
	}
	if !strings.Contains(refused.Error(), "below its 16 MiB reserve: publishes are refused until space returns") {
		t.Fatalf("refusal without its reason: %v", refused)
	}
	if err := os.Remove(filler); err != nil {
		t.Fatal(err)
	}
	for {
		_, err := pub.Publish(ctx, client.Message{Topic: "t"})
		if err == nil {
			return // taken again
		}
		if !errors.Is(err, client.ErrRejected) {
			t.Fatalf("publish after room returned: %v", err)
		}
	}
}

// TestDiskFullShutdown: a PHB whose append failed on a full disk keeps
// running and refuses publishes with the reason; asked to stop, it stops
// (the failed batch, never acked, waits for nothing), and a restart with
// room takes publishes again, the acked event still in the log.
func TestDiskFullShutdown(t *testing.T) {
	mem := vfs.NewMem()
	opts := phbOptions(t)
	opts.FS, opts.DiskReserve = mem, -1
	node, stop := runNode(t, opts)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	c, err := client.Dial(ctx, opts.Clients, client.Options{ID: "pub", Pubend: "P1", Logger: quietLogger()})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if _, err := c.Publish(ctx, client.Message{Topic: "a", Payload: []byte("kept")}); err != nil {
		t.Fatal(err)
	}
	mem.SetFull(syscall.ENOSPC)
	pending, err := c.PublishAsync(client.Message{Topic: "a", Payload: []byte("failed")})
	if err != nil {
		t.Fatal(err)
	}
	for {
		st, err := node.Status(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if st.DiskFull != "" {
			break
		}
		select {
		case <-ctx.Done():
			t.Fatal("the broker never found its disk full")
		case r := <-pending:
			t.Fatalf("publish on a full disk answered %+v", r)
		case <-time.After(10 * time.Millisecond):
		}
	}
	if _, err := c.Publish(ctx, client.Message{Topic: "a"}); !errors.Is(err, client.ErrRejected) || !strings.Contains(err.Error(), "pubend P1 at broker p1: disk full (no space left on device)") {
		t.Fatalf("publish on a full disk: %v", err)
	}
	stopped := make(chan error, 1)
	go func() { stopped <- stop() }()
	select {
	case err := <-stopped:
		if err != nil {
			t.Fatalf("stop: %v", err)
		}
	case <-ctx.Done():
		t.Fatal("a broker whose disk is full never stopped")
	}
	select {
	case r := <-pending:
		if r.Err == nil {
			t.Fatalf("the publish of the failed batch was acked: %+v", r)
		}
	default:
	}
	mem.SetFull(nil)
	node, stop = runNode(t, opts)
	t.Cleanup(func() { stop() })
	if st, err := node.Status(ctx); err != nil || st.LogNext == 0 {
		t.Fatalf("restarted: %+v, %v; want the acked event in the log", st, err)
	}
	c2, err := client.Dial(ctx, opts.Clients, client.Options{ID: "pub2", Pubend: "P1", Logger: quietLogger()})
	if err != nil {
		t.Fatal(err)
	}
	defer c2.Close()
	if _, err := c2.Publish(ctx, client.Message{Topic: "a"}); err != nil {
		t.Fatalf("publish after a restart with room: %v", err)
	}
}
