package ccreal

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"sync"
	"time"

	"github.com/aerie-mq/aerie/client"
)

func dial(ctx context.Context, addr, id string, inflight int) (*client.Client, error) {
	dctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	c, err := client.Dial(dctx, addr, client.Options{ID: id, Logger: quiet, RetryDial: true, MaxInflight: inflight})
	if err != nil {
		return nil, fmt.Errorf("ccreal: dial %s: %w", addr, err)
	}
	return c, nil
}

// publisher offers rate events/s of size bytes from its own goroutine
// until stopped. At most two seconds' worth wait unacknowledged: beyond
// that it blocks, as Gryphon CC's publishers do when the pubend holds them
// to its rate (§4 "PHB Implementation"), and an offer it could not make
// while blocked is dropped, not made up in a burst.
type publisher struct {
	c       *client.Client
	stop    chan struct{}
	done    chan struct{}
	mu      sync.Mutex
	sent    int
	acked   int
	failure error
}

func startPublisher(ctx context.Context, addr string, rate float64, size int) (*publisher, error) {
	c, err := dial(ctx, addr, "ccreal-pub", int(2*rate))
	if err != nil {
		return nil, err
	}
	p := &publisher{c: c, stop: make(chan struct{}), done: make(chan struct{})}
	go p.run(rate, make([]byte, size))
	return p, nil
}

func (p *publisher) run(rate float64, payload []byte) {
	defer close(p.done)
	t := time.NewTicker(10 * time.Millisecond)
	defer t.Stop()
	last, credit := time.Now(), 0.0
	for {
		select {
		case <-p.stop:
			return
		case now := <-t.C:
			credit = min(credit+rate*now.Sub(last).Seconds(), rate/5)
			last = now
		}
		for ; credit >= 1; credit-- {
			if err := p.publishNext(payload); err != nil {
				p.fail(err)
				return
			}
		}
	}
}

func (p *publisher) publishNext(payload []byte) error {
	p.mu.Lock()
	p.sent++
	seq := int64(p.sent)
	p.mu.Unlock()
	return p.c.PublishFunc(client.Message{Topic: "cc.e", Props: map[string]any{"seq": seq}, Payload: payload}, func(r client.Result) {
		if r.Err != nil {
			p.fail(fmt.Errorf("ccreal: publish %d: %w", seq, r.Err))
			return
		}
		p.mu.Lock()
		p.acked++
		p.mu.Unlock()
	})
}

func (p *publisher) fail(err error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.failure == nil {
		p.failure = err
	}
}

// finish stops offering and waits until every publish is acknowledged;
// it returns how many were published.
func (p *publisher) finish(ctx context.Context, within time.Duration) (int, error) {
	close(p.stop)
	deadline := time.Now().Add(within)
	select { // a publish blocked at MaxInflight returns with the next ack
	case <-p.done:
	case <-ctx.Done():
		return 0, ctx.Err()
	case <-time.After(within):
		return 0, fmt.Errorf("ccreal: the publisher still blocked %v after it was stopped", within)
	}
	for {
		p.mu.Lock()
		sent, acked, err := p.sent, p.acked, p.failure
		p.mu.Unlock()
		switch {
		case err != nil:
			return 0, err
		case acked == sent:
			return sent, nil
		case time.Now().After(deadline):
			return 0, fmt.Errorf("ccreal: %d of %d publishes acknowledged after %v", acked, sent, within)
		}
		select {
		case <-ctx.Done():
			return 0, ctx.Err()
		case <-time.After(50 * time.Millisecond): // polling a condition, with a deadline
		}
	}
}

// subscriber receives everything at one SHB and checks that events come
// exactly once and in order: the one publisher's seq 1, 2, 3, …
type subscriber struct {
	name string
	c    *client.Client
	mu   sync.Mutex
	at   []time.Time // when each event arrived
	lat  []time.Duration
	err  error
	more chan struct{}
}

func startSubscriber(ctx context.Context, name, addr string) (*subscriber, error) {
	c, err := dial(ctx, addr, "ccreal-sub-"+name, 0)
	if err != nil {
		return nil, err
	}
	sub, err := c.Subscribe(ctx, ">")
	if err != nil {
		c.Close()
		return nil, fmt.Errorf("ccreal: subscribe at %s: %w", name, err)
	}
	s := &subscriber{name: name, c: c, more: make(chan struct{}, 1)}
	go s.consume(sub)
	return s, nil
}

// consume ends with the subscription (the client closed).
func (s *subscriber) consume(sub *client.Subscription) {
	for ev := range sub.Events() {
		now := time.Now()
		s.mu.Lock()
		seq, _ := ev.Props.Int("seq")
		switch {
		case s.err != nil:
		case ev.Gap != nil:
			s.err = fmt.Errorf("ccreal: %s: gap %+v", s.name, *ev.Gap)
		case seq != int64(len(s.at))+1:
			s.err = fmt.Errorf("ccreal: %s: event %d after %d: not exactly once and in order", s.name, seq, len(s.at))
		default:
			s.at, s.lat = append(s.at, now), append(s.lat, now.Sub(ev.PubTime))
		}
		s.mu.Unlock()
		select {
		case s.more <- struct{}{}:
		default:
		}
	}
}

// wait waits until the subscriber holds n events or fails.
func (s *subscriber) wait(ctx context.Context, n int, deadline <-chan time.Time) error {
	for {
		s.mu.Lock()
		got, err := len(s.at), s.err
		s.mu.Unlock()
		switch {
		case err != nil:
			return err
		case got >= n:
			return nil
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-deadline:
			return fmt.Errorf("ccreal: %s received %d of %d events", s.name, got, n)
		case <-s.more:
		}
	}
}

// received returns the deliveries with times since began.
func (s *subscriber) received(began time.Time) []Recv {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]Recv, len(s.at))
	for i, at := range s.at {
		out[i] = Recv{At: at.Sub(began), Latency: s.lat[i]}
	}
	return out
}

var errNoStatus = errors.New("ccreal: /status did not return one broker")
