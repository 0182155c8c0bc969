package client

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"sync"

	"github.com/aerie-mq/aerie/internal/msg"
)

// Subscription delivers the events matching one pattern, in tick order per
// pubend, exactly once from its start token on.
type Subscription struct {
	c       *Client
	name    string
	events  chan Event
	started chan struct{}
	once    sync.Once
	sendMu  sync.Mutex // held while sending on events, so end can close it safely
	mu      sync.Mutex
	token   map[string]uint64
	err     error
	ended   chan struct{}
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
	c.nextSub++
	s := &Subscription{c: c, name: fmt.Sprintf("s%d", c.nextSub), events: make(chan Event, c.opts.SubscriptionBuffer),
		started: make(chan struct{}), ended: make(chan struct{})}
	c.subs[s.name] = s
	conn := c.conn
	c.mu.Unlock()
	if conn == nil || !conn.Send(msg.Subscribe{Sub: msg.SubID(s.name), Pattern: pattern, Selector: selector}) {
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

func (s *Subscription) start(tok msg.Token) {
	s.mu.Lock()
	s.token = map[string]uint64{}
	for p, t := range tok {
		s.token[string(p)] = uint64(t)
	}
	s.mu.Unlock()
	close(s.started)
}

func (s *Subscription) deliver(e *msg.Event) {
	s.sendMu.Lock()
	defer s.sendMu.Unlock()
	select {
	case <-s.ended:
		return
	default:
	}
	select {
	case s.events <- eventOf(e):
	case <-s.ended:
	}
}

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

// TokenString renders the token as "P1:123,P2:456".
func (s *Subscription) TokenString() string {
	tok := s.Token()
	keys := make([]string, 0, len(tok))
	for k := range tok {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	parts := make([]string, len(keys))
	for i, k := range keys {
		parts[i] = fmt.Sprintf("%s:%d", k, tok[k])
	}
	return strings.Join(parts, ",")
}

// Err says why the subscription ended (nil while it runs).
func (s *Subscription) Err() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.err
}

// Close ends the subscription.
func (s *Subscription) Close() {
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
