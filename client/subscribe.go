package client

import (
	"context"
	"fmt"
	"maps"
	"sort"
	"sync"

	"github.com/aerie-mq/aerie/internal/msg"
	"github.com/aerie-mq/aerie/internal/tick"
	"github.com/aerie-mq/aerie/internal/wire"
)

// Subscription delivers the events matching one pattern, in tick order per
// pubend, exactly once from its start token on.
type Subscription struct {
	c                 *Client
	name              string
	pattern, selector string
	events            chan Event
	started           chan struct{}
	once              sync.Once
	sendMu            sync.Mutex // held while sending on events, so end can close it safely
	mu                sync.Mutex
	token             map[string]uint64
	// delivered is, per pubend, the highest tick delivered or covered by
	// the token: after a resubscription, events at or below it are dropped
	// (the new broker may start earlier), so none is delivered twice.
	delivered highWater
	moving    bool // the connection was lost; subscribing again
	err       error
	ended     chan struct{}
	// durable: a durable subscription (durable.go); checkpoint is its
	// checkpoint token as of the last event or notice handed to Events.
	durable    bool
	from       msg.Token
	checkpoint msg.Token
	// total: uniform total order across pubends (SubscribeTotalOrder).
	total bool
	// group: the consumer group this subscription is a member of
	// (SubscribeGroup, group.go).
	group string
	// run is deliverRun's scratch (the connection's reader goroutine only).
	run []Event
	// untold and untoldBytes count the events handed to Events since the
	// last report of what was taken (taken, under mu).
	untold, untoldBytes int
}

// Subscribe asks for every event whose topic matches pattern (words
// separated by dots; "*" matches one word, ">" the rest) and returns once
// the subscription is in force.
func (c *Client) Subscribe(ctx context.Context, pattern string) (*Subscription, error) {
	return c.SubscribeSelector(ctx, pattern, "")
}

// SubscribeSelector is Subscribe narrowed by a JMS SQL-92 selector over the
// events' properties (docs/SELECTORS.md), e.g. "region = 'EU' AND qty > 3".
// A bad selector is refused with its column and cause (ErrRejected).
func (c *Client) SubscribeSelector(ctx context.Context, pattern, selector string) (*Subscription, error) {
	if err := checkFilter(pattern, selector); err != nil {
		return nil, err
	}
	return c.subscribe(ctx, func() (*Subscription, error) {
		c.nextSub++
		return c.newSubscription(fmt.Sprintf("s%d", c.nextSub), pattern, selector), nil
	})
}

// SubscribeTotalOrder is SubscribeSelector (selector may be empty) in
// uniform total order across pubends: the events of every pubend come
// merged in (tick, pubend) order, so every subscriber that asks for it, at
// any broker, receives the events it shares with another in the same
// order. An event waits at its broker until every pubend has passed its
// tick (the broker asks an idle pubend for its silence: about a round trip
// to the furthest PHB), and the subscription stops while a pubend's PHB is
// unreachable (it ends with the reason once its broker holds too much
// back).
// Not for durable subscriptions.
func (c *Client) SubscribeTotalOrder(ctx context.Context, pattern, selector string) (*Subscription, error) {
	if err := checkFilter(pattern, selector); err != nil {
		return nil, err
	}
	return c.subscribe(ctx, func() (*Subscription, error) {
		c.nextSub++
		s := c.newSubscription(fmt.Sprintf("s%d", c.nextSub), pattern, selector)
		s.total = true
		return s, nil
	})
}

// newSubscription makes a subscription's client side.
func (c *Client) newSubscription(name, pattern, selector string) *Subscription {
	return &Subscription{c: c, name: name, pattern: pattern, selector: selector,
		events: make(chan Event, c.opts.SubscriptionBuffer), started: make(chan struct{}), ended: make(chan struct{}),
		delivered: highWater{}}
}

// subscribe waits for a connection, registers the subscription that build
// returns (called with c.mu held), asks for it and waits until it is in
// force, refused, or ctx ends.
func (c *Client) subscribe(ctx context.Context, build func() (*Subscription, error)) (*Subscription, error) {
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		return nil, ErrClosed
	}
	up := c.connUp
	c.mu.Unlock()
	select { // wait for a connection
	case <-up:
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	c.mu.Lock()
	s, err := build()
	if err != nil {
		c.mu.Unlock()
		return nil, err
	}
	c.subs[s.name] = s
	conn := c.conn
	c.mu.Unlock()
	if s.group != "" && conn != nil && conn.Peer.Version < wire.VersionGroups {
		c.mu.Lock()
		delete(c.subs, s.name)
		c.mu.Unlock()
		return nil, fmt.Errorf("%w: groups need a broker of protocol version %d or later; this one speaks %d",
			ErrRejected, wire.VersionGroups, conn.Peer.Version)
	}
	if conn == nil || !conn.Send(s.request()) {
		c.mu.Lock()
		delete(c.subs, s.name)
		c.mu.Unlock()
		return nil, fmt.Errorf("%w: connection lost while subscribing", ErrDisconnected)
	}
	select {
	case <-s.started:
		return s, nil
	case <-s.ended:
		return nil, s.Err()
	case <-ctx.Done():
		s.Close()
		return nil, ctx.Err()
	}
}

func (s *Subscription) request() msg.Subscribe {
	if s.group != "" {
		return s.groupRequest()
	}
	if s.durable {
		return s.durableRequest()
	}
	return msg.Subscribe{Sub: msg.SubID(s.name), Pattern: s.pattern, Selector: s.selector, TotalOrder: s.total}
}

// moved marks a subscription whose connection was lost: it is asked for
// again on the next one (Options.Resubscribe).
func (s *Subscription) moved() {
	s.mu.Lock()
	s.moving = true
	s.mu.Unlock()
}

func (s *Subscription) isMoving() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.moving
}

// start puts the subscription in force from tok. After a resubscription it
// first delivers a Gap notice for every pubend whose new start lies beyond
// what was delivered: the events in between may have been missed.
func (s *Subscription) start(tok msg.Token) {
	if s.group != "" {
		s.startGroup(tok)
		return
	}
	if s.durable {
		s.startDurable(tok)
		return
	}
	s.mu.Lock()
	first := s.token == nil
	s.moving = false
	var gaps []Gap
	s.token = map[string]uint64{}
	for p, t := range tok {
		s.token[string(p)] = uint64(t)
		had, ok := s.delivered.get(string(p))
		switch {
		case first || !ok:
			// A pubend new to this subscription starts at its token.
		case uint64(t) > had:
			gaps = append(gaps, Gap{Pubend: string(p), From: had, To: uint64(t)})
		default:
			continue // the new start is behind: keep dropping up to had
		}
		s.delivered.set(string(p), uint64(t))
	}
	s.mu.Unlock()
	sort.Slice(gaps, func(i, j int) bool { return gaps[i].Pubend < gaps[j].Pubend })
	for i := range gaps {
		s.send(Event{Pubend: gaps[i].Pubend, Gap: &gaps[i]})
	}
	if first {
		close(s.started)
	}
}

func (s *Subscription) deliver(e *msg.Event) {
	if s.group != "" {
		s.send(groupEvent(e)) // an event given again comes below the others
		return
	}
	s.mu.Lock()
	hw := s.delivered.at(string(e.Pubend)) // one map lookup per event
	if uint64(e.Tick) <= *hw {
		s.mu.Unlock()
		return // delivered before a resubscription
	}
	*hw = uint64(e.Tick)
	ev := eventOf(e)
	if s.durable {
		s.checkpoint[e.Pubend] = e.Tick
		ev.Checkpoint = s.checkpoint.String()
	}
	s.mu.Unlock()
	s.send(ev)
	if s.durable {
		s.taken(1, e.Size())
	}
}

// deliverRun delivers the events of a DeliveryRun, in order, exactly as
// deliver would each: one pass under the lock for the run, then one hand
// over of its events.
func (s *Subscription) deliverRun(evs []*msg.Event) {
	if s.group != "" {
		out := s.run[:0]
		for _, e := range evs {
			out = append(out, groupEvent(e))
		}
		s.sendAll(out)
		clear(out)
		s.run = out[:0]
		return
	}
	out := s.run[:0]
	var hw *uint64
	var at msg.PubendID
	s.mu.Lock()
	for _, e := range evs {
		if hw == nil || e.Pubend != at { // one map lookup per pubend of the run
			hw, at = s.delivered.at(string(e.Pubend)), e.Pubend
		}
		if uint64(e.Tick) <= *hw {
			continue // delivered before a resubscription
		}
		*hw = uint64(e.Tick)
		ev := eventOf(e)
		if s.durable {
			s.checkpoint[e.Pubend] = e.Tick
			ev.Checkpoint = s.checkpoint.String()
		}
		out = append(out, ev)
	}
	s.mu.Unlock()
	s.sendAll(out)
	clear(out) // the events are the application's now
	s.run = out[:0]
	if s.durable {
		size := 0
		for _, e := range evs {
			size += e.Size()
		}
		s.taken(len(evs), size)
	}
}

// taken counts n delivered events of size bytes (duplicates dropped
// included: the broker counted them) as handed to Events, and reports to
// a broker of protocol version 16 on what the application has taken of a
// durable subscription (msg.SubConsumed) once msg.ConsumedEvery events or
// msg.ConsumedBytes bytes are unreported: the broker paces the
// subscription's catch-up by it, so a slow reader is never sent more than
// its window and never disconnected for a full queue (Gryphon DS §4).
// What sits in Events counts as taken: the buffer is bounded, and the
// connection stops reading while it is full.
func (s *Subscription) taken(n, size int) {
	if !s.durable {
		return
	}
	s.mu.Lock()
	s.untold += n
	s.untoldBytes += size
	if s.untold < msg.ConsumedEvery && s.untoldBytes < msg.ConsumedBytes {
		s.mu.Unlock()
		return
	}
	s.untold, s.untoldBytes = 0, 0
	tok := maps.Clone(s.checkpoint)
	s.mu.Unlock()
	s.c.mu.Lock()
	conn := s.c.conn
	s.c.mu.Unlock()
	if conn != nil && conn.Peer.Version >= wire.VersionSubConsumed {
		conn.Send(msg.SubConsumed{Sub: msg.SubID(s.name), Token: tok})
	}
}

// sendAll hands evs to Events in order, as send does each, under one hold
// of sendMu; it stops when the subscription ends.
func (s *Subscription) sendAll(evs []Event) {
	if len(evs) == 0 {
		return
	}
	s.sendMu.Lock()
	defer s.sendMu.Unlock()
	select {
	case <-s.ended:
		return
	default:
	}
	for i := range evs {
		select { // room in the buffer, the common case
		case s.events <- evs[i]:
			continue
		default:
		}
		select {
		case s.events <- evs[i]:
		case <-s.ended:
			return
		}
	}
}

// send hands ev to Events (sendAll of one; the slice stays on the stack).
func (s *Subscription) send(ev Event) { s.sendAll([]Event{ev}) }

// end records why the subscription ended and closes Events. Closing ended
// first releases a delivery blocked on a full Events channel; only then is
// Events closed, under sendMu, so no send can race with the close.
func (s *Subscription) end(err error) {
	s.once.Do(func() {
		s.mu.Lock()
		s.err = err
		s.mu.Unlock()
		close(s.ended)
		s.sendMu.Lock()
		close(s.events)
		s.sendMu.Unlock()
	})
}

// Events yields the delivered events; it is closed when the subscription
// ends (see Err).
func (s *Subscription) Events() <-chan Event { return s.events }

// Token is the start token: per pubend, the tick after which delivery is
// complete.
func (s *Subscription) Token() map[string]uint64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make(map[string]uint64, len(s.token))
	for k, v := range s.token {
		out[k] = v
	}
	return out
}

// TokenString renders the token as "P1:123,P2:456" (msg.Token's form,
// which msg.ParseToken reads back).
func (s *Subscription) TokenString() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	tok := make(msg.Token, len(s.token))
	for p, t := range s.token {
		tok[msg.PubendID(p)] = tick.Tick(t)
	}
	return tok.String()
}

// Err says why the subscription ended (nil while it runs).
func (s *Subscription) Err() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.err
}

// Close ends the subscription. A durable subscription is not ended at its
// broker: it is kept, away, until its subscriber comes back or deletes it
// (Delete); its broker stops delivering to it when the client closes.
func (s *Subscription) Close() {
	if s.durable {
		s.c.mu.Lock()
		delete(s.c.subs, s.name)
		s.c.mu.Unlock()
		s.end(ErrClosed)
		return
	}
	c := s.c
	c.mu.Lock()
	delete(c.subs, s.name)
	conn := c.conn
	c.mu.Unlock()
	if conn != nil {
		conn.Send(msg.Unsubscribe{Sub: msg.SubID(s.name)})
	}
	s.end(ErrClosed)
}

// highWater is, per pubend, the highest tick a subscription delivered or
// was told it need not (Subscription.delivered). Values are pointers so
// that a delivery reads and moves its pubend's mark with one map lookup.
type highWater map[string]*uint64

// at returns p's mark, made (at 0) if absent.
func (h highWater) at(p string) *uint64 {
	v := h[p]
	if v == nil {
		v = new(uint64)
		h[p] = v
	}
	return v
}

func (h highWater) get(p string) (uint64, bool) {
	if v := h[p]; v != nil {
		return *v, true
	}
	return 0, false
}

func (h highWater) set(p string, t uint64) { *h.at(p) = t }

// raise moves p's mark up to t (never down).
func (h highWater) raise(p string, t uint64) {
	if v := h.at(p); t > *v {
		*v = t
	}
}
