package broker_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/aerie-mq/aerie/client"
)

// TestSubscriberMovesToAnotherSHB: a plain subscription that lists two SHBs
// outlives the one it is on. When s1 stops, the client subscribes again at
// s2; it delivers no event twice and none out of order, and every
// acknowledged publish is either delivered or inside a Gap notice it
// delivered in its place.
func TestSubscriberMovesToAnotherSHB(t *testing.T) {
	n := startNet(t, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	sc, err := client.Dial(ctx, n.opts["s1"].Clients+","+n.opts["s2"].Clients,
		client.Options{Resubscribe: true, Logger: quietLogger()})
	if err != nil {
		t.Fatal(err)
	}
	defer sc.Close()
	sub, err := sc.Subscribe(ctx, ">")
	if err != nil {
		t.Fatal(err)
	}
	r := receive(sub)
	pub := n.dial("p1", client.Options{ID: "mover"})
	acks := map[int64]client.Ack{}
	publish := func(seq int64) {
		ack, err := pub.Publish(ctx, client.Message{Topic: "a.b", Props: map[string]any{"seq": seq}})
		if err != nil {
			t.Fatal(err)
		}
		acks[seq] = ack
	}
	seq := int64(0)
	for seq < 50 {
		seq++
		publish(seq)
	}
	r.waitFor(t, func(x *received) bool { return x.seqs[50] })
	n.stop("s1")
	moved := seq
	// Publish until events published after the move arrive through s2.
	for !r.has(func(x *received) bool { return x.maxSeq() > moved+10 }) {
		if ctx.Err() != nil {
			t.Fatalf("no event through s2 after %d more publishes", seq-moved)
		}
		seq++
		publish(seq)
	}
	last := seq
	r.waitFor(t, func(x *received) bool { return x.seqs[last] })
	sc.Close()
	<-r.done
	if r.err != nil {
		t.Fatal(r.err)
	}
	missed := 0
	for s, ack := range acks {
		if r.seqs[s] {
			continue
		}
		if !r.inGap(ack) {
			t.Errorf("seq %d (%s@%d) neither delivered nor announced in a gap (gaps %v)", s, ack.Pubend, ack.Tick, r.gaps)
		}
		missed++
	}
	if len(r.gaps) == 0 && missed > 0 {
		t.Errorf("%d events missed without a gap notice", missed)
	}
	t.Logf("%d published, %d delivered, %d announced as possibly missed in %d gaps", len(acks), len(r.seqs), missed, len(r.gaps))
}

// received is what one subscription delivered: events (checked for
// duplicates and order per pubend) and gap notices.
type received struct {
	mu   sync.Mutex
	last map[string]uint64
	seqs map[int64]bool
	gaps []client.Gap
	err  error
	more chan struct{}
	done chan struct{}
}

func receive(sub *client.Subscription) *received {
	r := &received{last: sub.Token(), seqs: map[int64]bool{}, more: make(chan struct{}, 1), done: make(chan struct{})}
	go func() {
		defer close(r.done)
		for ev := range sub.Events() {
			r.mu.Lock()
			switch {
			case ev.Gap != nil:
				g := *ev.Gap
				if g.From < r.last[g.Pubend] || g.To <= g.From {
					r.fail(fmt.Errorf("gap %+v overlaps what was delivered (up to %d)", g, r.last[g.Pubend]))
				}
				r.gaps = append(r.gaps, g)
				r.last[g.Pubend] = g.To
			case ev.Tick <= r.last[ev.Pubend]:
				r.fail(fmt.Errorf("%s@%d after %d: duplicate or out of order", ev.Pubend, ev.Tick, r.last[ev.Pubend]))
			default:
				r.last[ev.Pubend] = ev.Tick
				seq, _ := ev.Props.Int("seq")
				r.seqs[seq] = true
			}
			r.mu.Unlock()
			select {
			case r.more <- struct{}{}:
			default:
			}
		}
	}()
	return r
}

func (r *received) fail(err error) {
	if r.err == nil {
		r.err = err
	}
}

func (r *received) has(cond func(*received) bool) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return cond(r)
}

// waitFor waits on deliveries, up to a deadline, until cond holds.
func (r *received) waitFor(t *testing.T, cond func(*received) bool) {
	t.Helper()
	deadline := time.After(20 * time.Second)
	for !r.has(cond) {
		select {
		case <-r.more:
		case <-deadline:
			t.Fatal("condition not met within 20s")
		}
	}
}

func (r *received) maxSeq() int64 {
	var m int64
	for s := range r.seqs {
		m = max(m, s)
	}
	return m
}

func (r *received) inGap(a client.Ack) bool {
	for _, g := range r.gaps {
		if g.Pubend == a.Pubend && a.Tick > g.From && a.Tick <= g.To {
			return true
		}
	}
	return false
}
