package broker_test

import (
	"testing"
	"time"

	"github.com/aerie-mq/aerie/internal/broker"
	"github.com/aerie-mq/aerie/internal/gd"
	"github.com/aerie-mq/aerie/internal/msg"
	"github.com/aerie-mq/aerie/internal/vfs"
)

// TestBootNonceGrowsAcrossRestarts: a broker with a data dir boots with a
// nonce larger than its previous boot's, even when boots come faster than
// the clock moves or the clock stepped back (the nonce is max(clock,
// last+1), last read from the data dir). Membership relies on it: the
// incarnation with the larger nonce supersedes the older one.
func TestBootNonceGrowsAcrossRestarts(t *testing.T) {
	fs := vfs.NewMem()
	opts := broker.Options{ID: "s1", Routes: []gd.Route{{Pubend: "P1", Up: "b1"}}, DataDir: "/data/s1", FS: fs, Logger: quietLogger()}
	var last uint64
	for i := range 50 {
		n, err := broker.New(opts)
		if err != nil {
			t.Fatal(err)
		}
		inc := n.Incarnation()
		if inc <= last {
			t.Fatalf("boot %d: nonce %d is not above the previous boot's %d", i, inc, last)
		}
		last = inc
	}
	// A nonce far in the future (a clock that later stepped back) still
	// bounds the next boot from below.
	future := uint64(time.Now().Add(time.Hour).UnixNano())
	setNonce(t, fs, "/data/s1/boot.nonce", future)
	n, err := broker.New(opts)
	if err != nil {
		t.Fatal(err)
	}
	if n.Incarnation() != future+1 {
		t.Fatalf("after a clock step back: nonce %d, want %d", n.Incarnation(), future+1)
	}
	// Without a data dir the clock decides, and it is never 0.
	opts.DataDir = ""
	opts.ID = msg.NodeID("b1")
	opts.Routes = []gd.Route{{Pubend: "P1", Up: "p1", Down: []msg.NodeID{"s1"}}}
	before := uint64(time.Now().UnixNano())
	if n, err = broker.New(opts); err != nil {
		t.Fatal(err)
	}
	if n.Incarnation() < before {
		t.Fatalf("no data dir: nonce %d below the clock %d", n.Incarnation(), before)
	}
}

func setNonce(t *testing.T, fs vfs.FS, path string, v uint64) {
	t.Helper()
	f, err := fs.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	b := make([]byte, 8)
	for i := range 8 {
		b[i] = byte(v >> (56 - 8*i))
	}
	if _, err := f.Write(b); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
}
