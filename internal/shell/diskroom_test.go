package shell_test

import (
	"errors"
	"fmt"
	"io/fs"
	"reflect"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/aerie-mq/aerie/internal/gd"
	"github.com/aerie-mq/aerie/internal/msg"
	"github.com/aerie-mq/aerie/internal/shell"
)

// TestDiskReserve: below its disk reserve a PHB refuses new publishes with
// the reason and logs nothing for them; once room returns it takes them
// again. Unknown room refuses nothing.
func TestDiskReserve(t *testing.T) {
	eng, err := gd.New("p1", gd.DefaultConfig(), []gd.Route{{Pubend: "P1"}})
	if err != nil {
		t.Fatal(err)
	}
	f := &fake{now: 1767225600 * 1e9, clients: map[shell.ClientID][]msg.Msg{}, closed: map[shell.ClientID]string{}}
	b := shell.New(shell.Config{ID: "p1", Engine: eng, Clock: f, Net: f, Durability: f, Hosted: []msg.PubendID{"P1"},
		Strict: true, DiskReserve: 32 << 20})
	var next uint64 = 1
	b.ClientUp(1)
	b.ClientRequest(1, publish(1)) // room unknown: taken
	b.Drain()
	persistAll(t, b, f, &next)
	b.DiskRoom(8 << 20)
	b.ClientRequest(1, publish(2))
	b.Drain()
	rej := ofType[msg.PubReject](f.clients[1])
	if len(rej) != 1 || rej[0].Seq != 2 || !strings.Contains(rej[0].Reason, "pubend P1 at broker p1: disk nearly full: the event log's disk has 8 MiB free, below its 32 MiB reserve") || len(f.appends) != 0 {
		t.Fatalf("publish below the reserve: rejects %v, appends %v", rej, f.appends)
	}
	b.DiskRoom(64 << 20)
	b.ClientRequest(1, publish(2))
	b.Drain()
	persistAll(t, b, f, &next)
	acks := pubAcks(f.clients[1])
	if len(acks) != 2 || acks[1].Seq != 2 {
		t.Fatalf("publish after room returned: acks %v", acks)
	}
}

// reopenable is a Durability that can reopen its log (shell.Reopener).
type reopenable struct {
	*fake
	reopens int
}

func (r *reopenable) ReopenLog() { r.reopens++ }

func (r *reopenable) NoRoom(err error) (string, bool) {
	var errno syscall.Errno
	if (errors.Is(err, syscall.ENOSPC) || errors.Is(err, syscall.EDQUOT)) && errors.As(err, &errno) {
		return errno.Error(), true
	}
	return "", false
}

// TestDiskFullRefusesAndResumes: appends that fail for want of room stop
// nothing. The failed batches are not acked; new publishes are refused
// with a reason naming the pubend and the full disk; the log is reopened
// after a backoff that doubles while reopening fails; once reopened, the
// failed batches are appended again, the same records in the same order,
// their publishes acked once each when durable, and publishes are taken
// again.
func TestDiskFullRefusesAndResumes(t *testing.T) {
	cfg := gd.DefaultConfig()
	cfg.PersistWindow = 2
	eng, err := gd.New("p1", cfg, []gd.Route{{Pubend: "P1"}})
	if err != nil {
		t.Fatal(err)
	}
	f := &reopenable{fake: &fake{now: 1767225600 * 1e9, clients: map[shell.ClientID][]msg.Msg{}, closed: map[shell.ClientID]string{}}}
	b := shell.New(shell.Config{ID: "p1", Engine: eng, Clock: f, Net: f, Durability: f, Hosted: []msg.PubendID{"P1"}, Strict: true})
	b.ClientUp(1)
	for seq := uint64(1); seq <= 3; seq++ {
		b.ClientRequest(1, publish(seq))
		b.Drain()
	}
	if len(f.appends) != 2 {
		t.Fatalf("%d batches out, want 2 (the window)", len(f.appends))
	}
	failed := slices.Clone(f.appends)
	f.appends = nil
	full := fmt.Errorf("eventlog: log failed: %w", &fs.PathError{Op: "write", Path: "/data/x.log", Err: syscall.ENOSPC})
	for range failed {
		if err := b.Persisted(0, full); err != nil {
			t.Fatalf("a full disk stopped the broker: %v", err)
		}
		b.Drain()
	}
	if acks := pubAcks(f.clients[1]); len(acks) != 0 || len(f.appends) != 0 {
		t.Fatalf("after failed appends: acks %v, appends %v", acks, f.appends)
	}
	if d := b.Disk(); d.Full != "no space left on device" || d.FullTimes != 1 {
		t.Fatalf("Disk() = %+v", d)
	}
	b.ClientRequest(1, publish(4))
	b.Drain()
	rej := ofType[msg.PubReject](f.clients[1])
	if len(rej) != 1 || rej[0].Seq != 4 || !strings.Contains(rej[0].Reason, "pubend P1 at broker p1: disk full (no space left on device)") {
		t.Fatalf("publish on a full disk: rejects %v", rej)
	}
	// Backoff: 500 ms, then 1 s after a reopen that fails.
	tickAt := func(d time.Duration) {
		f.now = f.now.Add(d)
		b.Tick()
		b.Drain()
	}
	tickAt(400 * time.Millisecond)
	if f.reopens != 0 {
		t.Fatal("reopened before the backoff")
	}
	tickAt(100 * time.Millisecond)
	if f.reopens != 1 {
		t.Fatalf("%d reopens after the backoff, want 1", f.reopens)
	}
	tickAt(time.Second)
	if f.reopens != 1 {
		t.Fatal("a second reopen while one is out")
	}
	if err := b.LogReopened(fmt.Errorf("still full: %w", syscall.ENOSPC)); err != nil {
		t.Fatal(err)
	}
	tickAt(900 * time.Millisecond)
	if f.reopens != 1 {
		t.Fatal("reopened again before the doubled backoff")
	}
	tickAt(100 * time.Millisecond)
	if f.reopens != 2 {
		t.Fatalf("%d reopens after the doubled backoff, want 2", f.reopens)
	}
	if err := b.LogReopened(nil); err != nil {
		t.Fatal(err)
	}
	b.Drain()
	if !reflect.DeepEqual(f.appends, failed) {
		t.Fatalf("appended again %v, want the failed batches %v", f.appends, failed)
	}
	b.ClientRequest(1, publish(5)) // refused until the first is durable
	b.Drain()
	if rej := ofType[msg.PubReject](f.clients[1]); len(rej) != 2 || rej[1].Seq != 5 {
		t.Fatalf("publish before the reopened log took a batch: rejects %v", rej)
	}
	var next uint64 = 10
	persistAll(t, b, f.fake, &next)
	if d := b.Disk(); d.Full != "" || d.Refused != 2 {
		t.Fatalf("after the batches persisted: %+v, want not full, 2 refused", d)
	}
	b.ClientRequest(1, publish(4))
	b.Drain()
	persistAll(t, b, f.fake, &next)
	var seqs []uint64
	for _, a := range pubAcks(f.clients[1]) {
		seqs = append(seqs, a.Seq)
	}
	if !slices.Equal(seqs, []uint64{1, 2, 3, 4}) {
		t.Fatalf("acks %v, want 1 2 3 4, each once", seqs)
	}
}

// TestDiskFullReopenIOError: a reopen that fails for another reason than
// room (an I/O error) is reported to the caller, which must stop the
// broker (crash-only), as for a failed append; nothing was acked.
func TestDiskFullReopenIOError(t *testing.T) {
	eng, err := gd.New("p1", gd.DefaultConfig(), []gd.Route{{Pubend: "P1"}})
	if err != nil {
		t.Fatal(err)
	}
	f := &reopenable{fake: &fake{now: 1767225600 * 1e9, clients: map[shell.ClientID][]msg.Msg{}, closed: map[shell.ClientID]string{}}}
	b := shell.New(shell.Config{ID: "p1", Engine: eng, Clock: f, Net: f, Durability: f, Hosted: []msg.PubendID{"P1"}, Strict: true})
	b.ClientUp(1)
	b.ClientRequest(1, publish(1))
	b.Drain()
	if err := b.Persisted(0, fmt.Errorf("write: %w", syscall.EDQUOT)); err != nil {
		t.Fatalf("a quota reached stopped the broker: %v", err)
	}
	f.now = f.now.Add(time.Second)
	b.Tick()
	if f.reopens != 1 {
		t.Fatalf("%d reopens, want 1", f.reopens)
	}
	err = b.LogReopened(fmt.Errorf("fsync: %w", syscall.EIO))
	if err == nil || !strings.Contains(err.Error(), "event log reopen failed") {
		t.Fatalf("a reopen failed with EIO: %v, want the error", err)
	}
	if acks := pubAcks(f.clients[1]); len(acks) != 0 {
		t.Fatalf("acked: %v", acks)
	}
}
