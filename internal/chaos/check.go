package chaos

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"strings"
	"sync"
	"time"

	"github.com/aerie-mq/aerie/client"
)

// filter is one kind of subscription the run keeps at every subscriber
// broker, with the rule the checker applies to what it receives.
type filter struct {
	name, pattern, selector string
	match                   func(topic string, qty int64) bool
}

var filters = []filter{
	{"all", ">", "", func(string, int64) bool { return true }},
	{"orders", "orders.*", "", func(t string, _ int64) bool { return strings.HasPrefix(t, "orders.") }},
	{"qty>5", ">", "qty > 5", func(_ string, q int64) bool { return q > 5 }},
}

var topics = []string{"orders.eu", "orders.us", "stock.x"}

// published is what the checker knows of one acknowledged publish.
type published struct {
	tick  uint64
	topic string
	qty   int64
}

type pubKey struct {
	pubend string
	seq    int64
}

// checker holds what was published and what each subscription received,
// and counts violations as they are seen.
type checker struct {
	mu         sync.Mutex
	acked      map[pubKey]published
	subs       []*watch
	delivered  int
	violations []string
	report     func(string) // prints a violation as it is found
}

// watch is one subscription under check.
type watch struct {
	where  string // "s1/orders"
	f      filter
	start  map[string]uint64
	last   map[string]uint64
	gaps   []client.Gap
	got    map[pubKey]uint64 // what arrived, at which tick
	client *client.Client
}

func (c *checker) violation(format string, args ...any) {
	v := fmt.Sprintf(format, args...)
	c.violations = append(c.violations, v)
	c.report(v)
}

// receive checks one delivery online (c.mu held).
func (c *checker) receive(w *watch, ev client.Event) {
	if g := ev.Gap; g != nil {
		if g.From < w.last[g.Pubend] {
			c.violation("%s: gap notice %s (%d, %d] reaches back before what was delivered (%d)", w.where, g.Pubend, g.From, g.To, w.last[g.Pubend])
		}
		w.gaps = append(w.gaps, *g)
		w.last[g.Pubend] = max(w.last[g.Pubend], g.To)
		return
	}
	c.delivered++
	seq, _ := ev.Props["seq"].(int64)
	qty, _ := ev.Props["qty"].(int64)
	k := pubKey{ev.Pubend, seq}
	switch {
	case ev.Tick <= w.last[ev.Pubend]:
		c.violation("%s: %s@%d delivered after %d: duplicate or out of order (I2, I3)", w.where, ev.Pubend, ev.Tick, w.last[ev.Pubend])
	case !w.f.match(ev.Topic, qty):
		c.violation("%s: %s@%d (%s, qty %d) does not match the subscription (I1)", w.where, ev.Pubend, ev.Tick, ev.Topic, qty)
	}
	if p, ok := c.acked[k]; ok && (p.tick != ev.Tick || p.topic != ev.Topic || p.qty != qty) {
		c.violation("%s: %s@%d is not what was published as seq %d at tick %d (I1)", w.where, ev.Pubend, ev.Tick, seq, p.tick)
	}
	if t, dup := w.got[k]; dup {
		c.violation("%s: publish %s seq %d delivered twice, at ticks %d and %d (I2)", w.where, ev.Pubend, seq, t, ev.Tick)
	}
	w.got[k] = ev.Tick
	w.last[ev.Pubend] = max(w.last[ev.Pubend], ev.Tick)
}

// missing lists, for each subscription, the acknowledged publishes its
// filter selects, after its start and outside its gap notices, that have
// not arrived (c.mu held). It also checks what arrived against what was
// acknowledged later (I1).
func (c *checker) missing() (n int, sample []string) {
	for _, w := range c.subs {
		for k, p := range c.acked {
			if p.tick <= w.start[k.pubend] || !w.f.match(p.topic, p.qty) || inGap(w.gaps, k.pubend, p.tick) {
				continue
			}
			if _, ok := w.got[k]; !ok {
				n++
				if len(sample) < 5 {
					sample = append(sample, fmt.Sprintf("%s: %s seq %d at tick %d", w.where, k.pubend, k.seq, p.tick))
				}
			}
		}
	}
	return n, sample
}

func inGap(gaps []client.Gap, pubend string, t uint64) bool {
	for _, g := range gaps {
		if g.Pubend == pubend && t > g.From && t <= g.To {
			return true
		}
	}
	return false
}

// subscribe opens every filter at every subscriber broker, each on its own
// connection, which subscribes again when its broker comes back.
func (c *checker) subscribe(ctx context.Context, nw *network) error {
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	for _, b := range nw.subs {
		for _, f := range filters {
			cl, err := client.Dial(ctx, b.Clients, client.Options{ID: "chaos-sub-" + b.ID + "-" + f.name, RetryDial: true, Resubscribe: true, Logger: quiet})
			if err != nil {
				return fmt.Errorf("chaos: subscriber at %s: %w", b.ID, err)
			}
			sub, err := cl.SubscribeSelector(ctx, f.pattern, f.selector)
			if err != nil {
				cl.Close()
				return fmt.Errorf("chaos: subscribe at %s: %w", b.ID, err)
			}
			w := &watch{where: b.ID + "/" + f.name, f: f, start: sub.Token(), last: sub.Token(), got: map[pubKey]uint64{}, client: cl}
			c.mu.Lock()
			c.subs = append(c.subs, w)
			c.mu.Unlock()
			go func() {
				for ev := range sub.Events() {
					c.mu.Lock()
					c.receive(w, ev)
					c.mu.Unlock()
				}
			}()
		}
	}
	return nil
}

// publisher publishes to one pubend at rate per second until stop is
// closed, recording what was acknowledged; it returns once every publish
// has its outcome.
func (c *checker) publisher(ctx context.Context, addr, pubend string, rate int, seed uint64, stop <-chan struct{}) (sent int, err error) {
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	cl, err := client.Dial(ctx, addr, client.Options{ID: "chaos-pub-" + pubend, Pubend: pubend, RetryDial: true, Logger: quiet})
	if err != nil {
		return 0, fmt.Errorf("chaos: publisher for %s: %w", pubend, err)
	}
	defer cl.Close()
	rng := rand.New(rand.NewPCG(seed, 0x707562)) // "pub"
	tick := time.NewTicker(time.Second / time.Duration(rate))
	defer tick.Stop()
	var wg sync.WaitGroup
	var failed error
	var fmu sync.Mutex
	for seq := int64(1); ; seq++ {
		select {
		case <-stop:
			wg.Wait()
			return sent, failed
		case <-ctx.Done():
			wg.Wait()
			return sent, ctx.Err()
		case <-tick.C:
		}
		topic, qty := topics[rng.IntN(len(topics))], int64(rng.IntN(10))
		ch, err := cl.PublishAsync(client.Message{Topic: topic, Props: map[string]any{"seq": seq, "qty": qty}, Payload: []byte(fmt.Sprintf("%s-%d", pubend, seq))})
		if err != nil {
			wg.Wait()
			return sent, fmt.Errorf("chaos: publish to %s: %w", pubend, err)
		}
		sent++
		wg.Add(1)
		go func(seq int64) {
			defer wg.Done()
			r := <-ch
			if r.Err != nil {
				fmu.Lock()
				failed = fmt.Errorf("chaos: publish %s seq %d: %w", pubend, seq, r.Err)
				fmu.Unlock()
				return
			}
			c.mu.Lock()
			c.acked[pubKey{pubend, seq}] = published{tick: r.Ack.Tick, topic: topic, qty: qty}
			c.mu.Unlock()
		}(seq)
	}
}

func (c *checker) close() {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, w := range c.subs {
		w.client.Close()
	}
}
