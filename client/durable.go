package client

import (
	"context"
	"fmt"
	"maps"
	"strings"

	"github.com/aerie-mq/aerie/internal/msg"
)

// Durable describes a durable subscription (Gryphon DS, DSN 2003): it
// outlives its connection. Its broker keeps it while its subscriber is
// away, and the subscriber resumes it — at that broker or any other — from
// its checkpoint token, getting every matching event after the token
// exactly once, in order per pubend, or a Gap notice where the network had
// to discard events (an administrator's max_retain).
type Durable struct {
	// Name names the subscription across connections and brokers (no
	// spaces or slashes).
	Name              string
	Pattern, Selector string
	// From is the checkpoint to resume from (Event.Checkpoint, as saved),
	// "" for a new subscription or to resume from what the broker last
	// had acknowledged.
	From string
}

// SubscribeDurable attaches durable subscription d and returns once it is
// in force. Its catch-up goes at the application's pace: the client tells
// a broker of protocol version 16 on what it has handed to Events
// (msg.SubConsumed), and the broker sends the catch-up no more than its
// window ahead, so a slow reader with a large backlog is not disconnected. A name attached on another connection is taken over: that
// subscription ends there with the reason. A bad token is refused before
// anything is sent.
func (c *Client) SubscribeDurable(ctx context.Context, d Durable) (*Subscription, error) {
	from, err := msg.ParseToken(d.From)
	if d.From == "" {
		from, err = nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("%w: checkpoint %q: %v", ErrRejected, d.From, err)
	}
	if d.Name == "" || strings.ContainsAny(d.Name, " \t\n/") {
		return nil, fmt.Errorf("%w: durable subscription name %q: not empty, no spaces or slashes", ErrRejected, d.Name)
	}
	if err := checkFilter(d.Pattern, d.Selector); err != nil {
		return nil, err
	}
	return c.subscribe(ctx, func() (*Subscription, error) {
		if _, dup := c.subs[d.Name]; dup {
			return nil, fmt.Errorf("%w: this client already has a subscription named %s", ErrRejected, d.Name)
		}
		s := c.newSubscription(d.Name, d.Pattern, d.Selector)
		s.durable, s.from, s.checkpoint = true, from, maps.Clone(from)
		if s.checkpoint == nil {
			s.checkpoint = msg.Token{}
		}
		return s, nil
	})
}

// durableRequest asks for the subscription from its checkpoint: after a
// lost connection, from what was handed to Events, so that nothing is
// missed and nothing delivered twice.
func (s *Subscription) durableRequest() msg.Subscribe {
	s.mu.Lock()
	defer s.mu.Unlock()
	var from msg.Token
	if len(s.checkpoint) > 0 {
		from = maps.Clone(s.checkpoint)
	}
	return msg.Subscribe{Sub: msg.SubID(s.name), Pattern: s.pattern, Selector: s.selector, Durable: true, From: from}
}

// startDurable: in force from tok (the checkpoint given, completed with
// the broker's start for pubends it did not name).
func (s *Subscription) startDurable(tok msg.Token) {
	s.mu.Lock()
	first := s.token == nil
	s.moving = false
	s.token = map[string]uint64{}
	for p, t := range tok {
		s.token[string(p)] = uint64(t)
		if t > s.checkpoint[p] {
			s.checkpoint[p] = t
		}
		s.delivered.raise(string(p), uint64(t))
	}
	s.mu.Unlock()
	if first {
		close(s.started)
	}
}

// gap hands on the broker's notice that ticks (From, To] are gone.
func (s *Subscription) gap(m msg.Gap) {
	if s.group != "" {
		s.send(Event{Pubend: string(m.Pubend), Gap: &Gap{Pubend: string(m.Pubend), From: uint64(m.From), To: uint64(m.To)}})
		return
	}
	s.mu.Lock()
	if m.To > s.checkpoint[m.Pubend] {
		s.checkpoint[m.Pubend] = m.To
	}
	s.delivered.raise(string(m.Pubend), uint64(m.To))
	ev := Event{Pubend: string(m.Pubend), Gap: &Gap{Pubend: string(m.Pubend), From: uint64(m.From), To: uint64(m.To)},
		Checkpoint: s.checkpoint.String()}
	s.mu.Unlock()
	s.send(ev)
}

// progress: nothing more matched up to tok; the checkpoint moves.
func (s *Subscription) progress(tok msg.Token) {
	s.mu.Lock()
	moved := false
	for p, t := range tok {
		if t > s.checkpoint[p] {
			s.checkpoint[p], moved = t, true
		}
		s.delivered.raise(string(p), uint64(t))
	}
	ev := Event{Progress: true, Checkpoint: s.checkpoint.String()}
	s.mu.Unlock()
	if moved {
		s.send(ev)
	}
}

// Checkpoint is the checkpoint token of a durable subscription as of the
// last event or notice handed to Events (not necessarily consumed yet).
func (s *Subscription) Checkpoint() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.checkpoint.String()
}

// Ack tells the broker that everything up to checkpoint (an Event's
// Checkpoint) is consumed, so the network may discard it (Gryphon DS §3:
// the release protocol). Acknowledge only what is saved: a subscriber
// that resumes from an older checkpoint may find what it acknowledged
// gone (a Gap).
//
// On a group's subscription (SubscribeGroup) an event's Checkpoint names
// that event alone, and Ack acknowledges that one event: the group gives
// it to no other member, and its checkpoint moves over it once every
// event before it is acknowledged too.
func (s *Subscription) Ack(checkpoint string) error {
	if !s.durable && s.group == "" {
		return fmt.Errorf("%w: only durable and group subscriptions acknowledge", ErrRejected)
	}
	tok, err := msg.ParseToken(checkpoint)
	if err != nil {
		return fmt.Errorf("%w: checkpoint %q: %v", ErrRejected, checkpoint, err)
	}
	if s.group != "" {
		return s.ackGroup(tok)
	}
	s.c.mu.Lock()
	conn := s.c.conn
	s.c.mu.Unlock()
	if conn == nil || !conn.Send(msg.SubAck{Sub: msg.SubID(s.name), Token: tok}) {
		return fmt.Errorf("%w: acknowledgement not sent", ErrDisconnected)
	}
	return nil
}

// Delete ends a durable subscription for good at its broker, releasing
// what it held.
func (s *Subscription) Delete() error {
	if !s.durable {
		s.Close()
		return nil
	}
	s.c.mu.Lock()
	delete(s.c.subs, s.name)
	conn := s.c.conn
	s.c.mu.Unlock()
	s.end(ErrClosed)
	if conn == nil || !conn.Send(msg.Unsubscribe{Sub: msg.SubID(s.name)}) {
		return fmt.Errorf("%w: deletion not sent", ErrDisconnected)
	}
	return nil
}

// DeleteDurable deletes durable subscription name at this client's broker
// while its subscriber is away (or attached on this client), releasing
// what it held, and returns once the broker has taken the deletion in. A
// name the broker does not know is left as it is; one attached on another
// connection is not deleted.
func (c *Client) DeleteDurable(ctx context.Context, name string) error {
	if name == "" || strings.ContainsAny(name, " \t\n/") {
		return refused{fmt.Errorf("durable subscription name %q: not empty, no spaces or slashes", name)}
	}
	if s := c.sub(name); s != nil && s.durable {
		if err := s.Delete(); err != nil {
			return err
		}
	} else if err := c.send(ctx, msg.Unsubscribe{Sub: msg.SubID(name)}); err != nil {
		return err
	}
	// A deletion has no answer. A subscription asked for after it on the
	// same connection is answered after it was taken in: one that matches
	// nothing, closed at once.
	b, err := c.SubscribeSelector(ctx, "aerie.barrier", "FALSE")
	if err != nil {
		return fmt.Errorf("durable subscription %s: deletion not confirmed: %w", name, err)
	}
	b.Close()
	return nil
}

// send sends m once a connection is up, or fails when ctx ends first.
func (c *Client) send(ctx context.Context, m msg.Msg) error {
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		return ErrClosed
	}
	up := c.connUp
	c.mu.Unlock()
	select {
	case <-up:
	case <-ctx.Done():
		return ctx.Err()
	}
	c.mu.Lock()
	conn := c.conn
	c.mu.Unlock()
	if conn == nil || !conn.Send(m) {
		return fmt.Errorf("%w: connection lost while sending", ErrDisconnected)
	}
	return nil
}
