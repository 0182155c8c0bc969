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
	ackOrder   []pubKey // acked's keys in the order acknowledged (missing's cursor)
	subs       []*watch
	delivered  int
	violations []string
	report     func(string) // prints a violation as it is found
}

// watch is one subscription under check.
type watch struct {
	where string // "s1/orders"
	f     filter
	start map[string]uint64
	last  map[string]uint64
	gaps  []client.Gap
	got   map[pubKey]uint64 // what arrived, at which tick
	// scanned is how much of checker.ackOrder missing has looked at;
	// pending, what it found this subscription should get and had not got.
	scanned int
	pending map[pubKey]bool
	client  *client.Client
	// durable: a durable subscription (Gryphon DS, DSN 2003): it must miss
	// nothing across its reconnections, and a gap notice is a violation,
	// since nothing in a run is old enough for early release (max_retain).
	durable bool
}

func (c *checker) violation(format string, args ...any) {
	v := fmt.Sprintf(format, args...)
	c.violations = append(c.violations, v)
	c.report(v)
}

// receive checks one delivery online (c.mu held).
func (c *checker) receive(w *watch, ev client.Event) {
	if ev.Progress {
		return // a durable subscription's checkpoint moved: nothing to check
	}
	if g := ev.Gap; g != nil {
		if w.durable {
			c.violation("%s: durable subscription got a gap notice %s (%d, %d], though nothing was released early (I6)", w.where, g.Pubend, g.From, g.To)
		}
		if g.From < w.last[g.Pubend] {
			c.violation("%s: gap notice %s (%d, %d] reaches back before what was delivered (%d)", w.where, g.Pubend, g.From, g.To, w.last[g.Pubend])
		}
		w.gaps = append(w.gaps, *g)
		w.last[g.Pubend] = max(w.last[g.Pubend], g.To)
		return
	}
	c.delivered++
	seq, _ := ev.Props.Int("seq")
	qty, _ := ev.Props.Int("qty")
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

// missing counts, for each subscription, the acknowledged publishes its
// filter selects, of the pubends its broker routes (its start token names
// them), after its start and outside its gap notices, that have not
// arrived (c.mu held), with a few examples.
//
// It is called every 200 ms while the run waits for deliveries, holding the
// lock the subscribers need, so it works incrementally: each subscription
// looks only at the publishes acknowledged since its last call, and keeps
// those it still waits for. That is exact because what decides whether a
// publish is owed never turns it back into owed: the start token is fixed,
// deliveries and gap notices only accumulate.
func (c *checker) missing() (n int, sample []string) {
	for _, w := range c.subs {
		if w.pending == nil {
			w.pending = map[pubKey]bool{}
		}
		for _, k := range c.ackOrder[w.scanned:] {
			if c.owed(w, k) {
				w.pending[k] = true
			}
		}
		w.scanned = len(c.ackOrder)
		for k := range w.pending {
			if !c.owed(w, k) {
				delete(w.pending, k)
				continue
			}
			n++
			if len(sample) < 5 {
				sample = append(sample, fmt.Sprintf("%s: %s seq %d at tick %d", w.where, k.pubend, k.seq, c.acked[k].tick))
			}
		}
	}
	return n, sample
}

// recordAck notes an acknowledged publish (c.mu held).
func (c *checker) recordAck(k pubKey, p published) {
	if _, again := c.acked[k]; !again {
		c.ackOrder = append(c.ackOrder, k)
	}
	c.acked[k] = p
}

// owed reports whether subscription w should have received acknowledged
// publish k and has not (c.mu held).
func (c *checker) owed(w *watch, k pubKey) bool {
	p := c.acked[k]
	st, routed := w.start[k.pubend]
	if !routed {
		return false // no route from that pubend to this subscription's broker
	}
	if p.tick <= st || !w.f.match(p.topic, p.qty) || inGap(w.gaps, k.pubend, p.tick) {
		return false
	}
	_, got := w.got[k]
	return !got
}

func inGap(gaps []client.Gap, pubend string, t uint64) bool {
	for _, g := range gaps {
		if g.Pubend == pubend && t > g.From && t <= g.To {
			return true
		}
	}
	return false
}

// durableFilters are the filters also kept as durable subscriptions at
// every subscriber broker with a data directory. The first resumes at the
// next subscriber broker when its own is down (reconnect anywhere, Gryphon
// DS §1), the others only at their own.
var durableFilters = []filter{filters[0], filters[2]}

// ackEvery: a durable subscriber acknowledges its checkpoint every so many
// deliveries, so that the release protocol lets the pubends trim.
const ackEvery = 200

// subscribe opens every filter at every subscriber broker, each on its own
// connection, which subscribes again when its broker comes back; and the
// durable ones where the broker keeps durable subscriptions.
func (c *checker) subscribe(ctx context.Context, nw *network) error {
	for i, b := range nw.subs {
		for _, f := range filters {
			if err := c.open(ctx, b.ID, b.Clients, f, false); err != nil {
				return err
			}
		}
		if b.Data == "" {
			continue
		}
		for j, f := range durableFilters {
			addrs := b.Clients
			if next := nw.subs[(i+1)%len(nw.subs)]; j == 0 && next.ID != b.ID && next.Data != "" {
				addrs += "," + next.Clients
			}
			if err := c.open(ctx, b.ID, addrs, f, true); err != nil {
				return err
			}
		}
	}
	return nil
}

// open subscribes with filter f through addrs (the first is the broker
// named where) and checks what arrives.
func (c *checker) open(ctx context.Context, where, addrs string, f filter, durable bool) error {
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	kind := "sub"
	if durable {
		kind = "dur"
	}
	name := "chaos-" + kind + "-" + where + "-" + f.name
	cl, err := client.Dial(ctx, addrs, client.Options{ID: name, RetryDial: true, Resubscribe: true, Logger: quiet})
	if err != nil {
		return fmt.Errorf("chaos: subscriber at %s: %w", where, err)
	}
	var sub *client.Subscription
	if durable {
		sub, err = cl.SubscribeDurable(ctx, client.Durable{Name: name, Pattern: f.pattern, Selector: f.selector})
	} else {
		sub, err = cl.SubscribeSelector(ctx, f.pattern, f.selector)
	}
	if err != nil {
		cl.Close()
		return fmt.Errorf("chaos: subscribe at %s: %w", where, err)
	}
	w := &watch{where: where + "/" + f.name, f: f, start: sub.Token(), last: sub.Token(), got: map[pubKey]uint64{}, client: cl, durable: durable}
	if durable {
		w.where += " (durable)"
	}
	c.mu.Lock()
	c.subs = append(c.subs, w)
	c.mu.Unlock()
	go func() {
		n := 0
		for ev := range sub.Events() {
			c.mu.Lock()
			c.receive(w, ev)
			c.mu.Unlock()
			if n++; durable && n%ackEvery == 0 {
				_ = sub.Ack(ev.Checkpoint) // a lost ack is sent again with a later checkpoint
			}
		}
	}()
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
			// Interrupted: the faults are not healed, so outstanding
			// publishes may never be acknowledged (a replicated cell
			// without its majority). Closing fails them.
			cl.Close()
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
			c.recordAck(pubKey{pubend, seq}, published{tick: r.Ack.Tick, topic: topic, qty: qty})
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
