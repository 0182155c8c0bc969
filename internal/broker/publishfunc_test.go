package broker_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/aerie-mq/aerie/client"
	"github.com/aerie-mq/aerie/internal/vfs"
)

// outcomes records what PublishFunc's done functions were called with.
type outcomes struct {
	mu   sync.Mutex
	seqs map[uint64]int // calls per sequence number
	errs []error
	all  chan struct{} // closed once want outcomes arrived
	want int
}

func newOutcomes(want int) *outcomes {
	return &outcomes{seqs: map[uint64]int{}, all: make(chan struct{}), want: want}
}

func (o *outcomes) done(r client.Result) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.seqs[r.Seq]++
	if r.Err != nil {
		o.errs = append(o.errs, r.Err)
	}
	if n := len(o.seqs); n == o.want {
		close(o.all)
	}
}

// TestPublishFuncCallsDoneOncePerPublish: every publish through three hops
// gets exactly one outcome, an ack, under its own sequence number, and the
// events are delivered.
func TestPublishFuncCallsDoneOncePerPublish(t *testing.T) {
	n := startNet(t, vfs.OS())
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	sub, err := n.dial("s2", client.Options{}).Subscribe(ctx, ">")
	if err != nil {
		t.Fatal(err)
	}
	got := collect(t, sub)
	pub := n.dial("p1", client.Options{ID: "pub-f", MaxInflight: 16})
	const total = 500
	o := newOutcomes(total)
	want := map[int64]bool{}
	for i := 1; i <= total; i++ {
		if err := pub.PublishFunc(client.Message{Topic: topicOf(i), Props: map[string]any{"seq": int64(i)}}, o.done); err != nil {
			t.Fatal(err)
		}
		want[int64(i)] = true
	}
	select {
	case <-o.all:
	case <-ctx.Done():
		t.Fatalf("%d of %d outcomes", len(o.seqs), total)
	}
	o.mu.Lock()
	for seq := uint64(1); seq <= total; seq++ {
		if o.seqs[seq] != 1 {
			t.Errorf("publish %d: %d outcomes, want 1", seq, o.seqs[seq])
		}
	}
	if len(o.errs) > 0 {
		t.Errorf("%d publishes failed, first: %v", len(o.errs), o.errs[0])
	}
	o.mu.Unlock()
	got.waitFor(t, total, 20*time.Second)
	got.check(t, want)
	if err := pub.PublishFunc(client.Message{Topic: "t"}, nil); !errors.Is(err, client.ErrRejected) {
		t.Errorf("PublishFunc without a done function: %v, want ErrRejected", err)
	}
}

// TestPublishFuncFailsPendingOnClose: a publish whose fsync never completes
// gets ErrClosed when its client closes, once.
func TestPublishFuncFailsPendingOnClose(t *testing.T) {
	h := startHeldPublish(t) // one publish held in its fsync
	o := newOutcomes(1)
	if err := h.c.PublishFunc(client.Message{Topic: "t"}, o.done); err != nil {
		t.Fatal(err)
	}
	h.c.Close()
	select {
	case <-o.all:
	case <-time.After(10 * time.Second):
		t.Fatal("no outcome after Close")
	}
	if r := <-h.ch; !errors.Is(r.Err, client.ErrClosed) {
		t.Errorf("held PublishAsync after Close: %v, want ErrClosed", r.Err)
	}
	o.mu.Lock()
	defer o.mu.Unlock()
	if len(o.errs) != 1 || !errors.Is(o.errs[0], client.ErrClosed) {
		t.Errorf("outcomes after Close: %v, want one ErrClosed", o.errs)
	}
	if err := h.c.PublishFunc(client.Message{Topic: "t"}, o.done); !errors.Is(err, client.ErrClosed) {
		t.Errorf("PublishFunc after Close: %v, want ErrClosed", err)
	}
	h.g.release()
}
