package main

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/aerie-mq/aerie/client"
)

// TestDiskFullProcess runs a PHB whose data directory is a 16 MiB tmpfs
// (a real filesystem that fills), with no disk reserve, so that its own
// appends fail with ENOSPC. With the disk filled by another file: the
// publisher's publishes are refused with a reason naming the pubend and
// the full disk, and `aerie pub` prints it; /metrics and the log say so;
// the broker keeps running. Once the file is removed: the publishes that
// were waiting are acked, new ones are taken, and after a kill -9 and a
// restart a durable subscriber gets every acked event exactly once and
// none that was refused.
//
// It needs to mount a tmpfs (root or CAP_SYS_ADMIN) and is skipped
// without: a loop device would need the same, and RLIMIT_FSIZE fails
// writes with EFBIG on one file's size, not on the filesystem's room.
func TestDiskFullProcess(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs processes")
	}
	f := newProcFixture(t)
	disk := filepath.Join(f.dir, "disk")
	if err := os.MkdirAll(disk, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Mount("tmpfs", disk, "tmpfs", 0, "size=16m"); err != nil {
		t.Skipf("cannot mount a size-limited tmpfs here (%v): needs CAP_SYS_ADMIN", err)
	}
	t.Cleanup(func() { syscall.Unmount(disk, syscall.MNT_DETACH) }) // after the broker is killed (cleanups run last first)
	clients, httpAddr := f.addr(), f.addr()
	f.writeConfig(fmt.Sprintf(`[[broker]]
id = "p1"
listen = %q
clients = %q
http = %q
data = %q
pubends = ["P1"]
disk_reserve = "0"
`, f.addr(), clients, httpAddr, filepath.Join(disk, "p1")))
	f.start("p1")
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()

	sc := f.dial(ctx, clients, "sub")
	if _, err := sc.SubscribeDurable(ctx, client.Durable{Name: "audit", Pattern: "t.>"}); err != nil {
		t.Fatal(err)
	}
	c := f.dial(ctx, clients, "pub")
	acked := map[string]bool{}
	publish := func(i int) (<-chan client.Result, string) {
		p := strconv.Itoa(i)
		ch, err := c.PublishAsync(client.Message{Topic: "t.a", Payload: []byte(p)})
		if err != nil {
			t.Fatal(err)
		}
		return ch, p
	}
	i := 0
	for ; i < 200; i++ {
		ch, p := publish(i)
		if r := <-ch; r.Err != nil {
			t.Fatalf("publish %d with room: %v", i, r.Err)
		}
		acked[p] = true
	}

	filler := filepath.Join(disk, "filler")
	fill(t, filler)
	// Publish until one is refused; those sent before the broker saw its
	// disk full wait unacked, or were acked if they fitted.
	waiting := map[string]<-chan client.Result{}
	refused := map[string]bool{}
	for len(refused) == 0 {
		ch, p := publish(i)
		i++
		waiting[p] = ch
		select {
		case <-ctx.Done():
			t.Fatal("no publish was refused on a full disk")
		case <-time.After(20 * time.Millisecond): // a publisher's pace, not a wait for the broker
		}
		for p, ch := range waiting {
			select {
			case r := <-ch:
				delete(waiting, p)
				switch {
				case r.Err == nil:
					acked[p] = true
				case errors.Is(r.Err, client.ErrRejected) && strings.Contains(r.Err.Error(), "pubend P1 at broker p1: disk full (no space left on device)"):
					refused[p] = true
				default:
					t.Fatalf("publish %s on a full disk: %v", p, r.Err)
				}
			default:
			}
		}
	}
	out, err := exec.Command(f.bin, "pub", "--connect", clients, "--id", "cli", "--topic", "t.cli", "--timeout", "30s").CombinedOutput()
	if err == nil || !strings.Contains(string(out), "aerie pub: aerie: rejected by broker: pubend P1 at broker p1: disk full") {
		t.Fatalf("aerie pub on a full disk: %v\n%s", err, out)
	}
	waitMetric(ctx, t, http.DefaultClient, "http://"+httpAddr+"/metrics", `aerie_disk_full{broker="p1"} 1`)
	if logText, _ := os.ReadFile(f.logPath("p1")); !strings.Contains(string(logText), "event log disk full: refusing publishes until space returns") {
		t.Fatalf("the broker's log does not say its disk is full:\n%s", logText)
	}

	if err := os.Remove(filler); err != nil {
		t.Fatal(err)
	}
	freed := time.Now()
	for p, ch := range waiting {
		select {
		case r := <-ch:
			if r.Err != nil && !(errors.Is(r.Err, client.ErrRejected) && strings.Contains(r.Err.Error(), "disk full")) {
				t.Fatalf("publish %s: %v", p, r.Err)
			}
			if r.Err == nil {
				acked[p] = true
			} else {
				refused[p] = true
			}
		case <-ctx.Done():
			t.Fatalf("publish %s never answered once room returned", p)
		}
	}
	for n := i + 10; i < n; i++ {
		ch, p := publish(i)
		if r := <-ch; r.Err != nil {
			t.Fatalf("publish %d once room returned: %v", i, r.Err)
		}
		acked[p] = true
	}
	resumed := time.Since(freed)
	waitMetric(ctx, t, http.DefaultClient, "http://"+httpAddr+"/metrics", `aerie_disk_full{broker="p1"} 0`)
	waitMetric(ctx, t, http.DefaultClient, "http://"+httpAddr+"/metrics", `aerie_disk_full_total{broker="p1"} 1`)

	// Durable: a kill -9, a restart, and the durable subscriber, which
	// acknowledged nothing, gets the whole log again.
	sc.Close()
	f.kill("p1")
	f.start("p1")
	sc = f.dial(ctx, clients, "sub2")
	sub, err := sc.SubscribeDurable(ctx, client.Durable{Name: "audit", Pattern: "t.>"})
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]int{}
	for seen := 0; seen < len(acked); {
		select {
		case ev := <-sub.Events():
			p := string(ev.Payload)
			if got[p]++; got[p] > 1 {
				t.Fatalf("event %s delivered twice", p)
			}
			if refused[p] {
				t.Fatalf("event %s was refused, and delivered", p)
			}
			if acked[p] {
				seen++
			}
		case <-ctx.Done():
			var missing []string
			for p := range acked {
				if got[p] == 0 {
					missing = append(missing, p)
				}
			}
			t.Fatalf("acked events never delivered after the restart: %v", missing)
		}
	}
	t.Logf("%d events acked, %d refused on the full disk; publishing resumed %v after room returned", len(acked), len(refused), resumed.Round(time.Millisecond))
}

// fill writes name until its filesystem has no room left.
func fill(t *testing.T, name string) {
	t.Helper()
	fh, err := os.Create(name)
	if err != nil {
		t.Fatal(err)
	}
	defer fh.Close()
	chunk := make([]byte, 64<<10)
	for {
		if _, err := fh.Write(chunk); err != nil {
			if !errors.Is(err, syscall.ENOSPC) {
				t.Fatal(err)
			}
			return
		}
	}
}
