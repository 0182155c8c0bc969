package broker_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
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
