package client

import (
	"context"
	"fmt"
	"strings"

	"github.com/aerie-mq/aerie/internal/msg"
	"github.com/aerie-mq/aerie/internal/tick"
)

// Group describes a membership of a consumer group (competing consumers,
// docs/CONCEPTS.md "Consumer groups"): the members of group Name share its
// events, each matching event going to one member, wherever they are
// connected. Every member names the group's filter: a member that asks for
// another pattern or selector is refused, naming both.
type Group struct {
	// Name names the group across connections and brokers (no spaces or
	// slashes).
	Name              string
	Pattern, Selector string
}

// SubscribeGroup joins group g and returns once the membership is in
// force. Each event the subscription delivers is this member's alone
// until it acknowledges it (Subscription.Ack with the event's Checkpoint):
// if this member leaves (Close, a lost connection) first, the group gives
// the event to another member. A member holds at most 1 000 events
// unacknowledged; it gets more as it acknowledges. Events come in tick
// order per pubend, except those given again after another member left,
// which come when they are given. With Options.Resubscribe a lost
// connection joins again on the next one (a broker that is not the
// group's home refuses it: the subscription ends with a GroupHomeError).
// Needs a broker of protocol version 20 on. A broker that is not the
// group's home refuses the membership with a *GroupHomeError naming the
// home's client address.
func (c *Client) SubscribeGroup(ctx context.Context, g Group) (*Subscription, error) {
	if err := groupName(g.Name); err != nil {
		return nil, fmt.Errorf("%w: %v", ErrRejected, err)
	}
	if err := checkFilter(g.Pattern, g.Selector); err != nil {
		return nil, err
	}
	return c.subscribe(ctx, func() (*Subscription, error) {
		c.nextSub++
		s := c.newSubscription(fmt.Sprintf("g%d", c.nextSub), g.Pattern, g.Selector)
		s.group = g.Name
		return s, nil
	})
}

// GroupHomeError is SubscribeGroup's refusal by a broker that is not the
// group's home: every group is served by one broker of the network, its
// home (docs/CONCEPTS.md "Consumer groups"), and members join there. It
// wraps ErrRejected. Dial Addr and join again (cmd aerie sub --group
// does).
type GroupHomeError struct {
	Group string
	Home  string // the home's broker id
	Addr  string // the home's client address
}

func (e *GroupHomeError) Error() string {
	return fmt.Sprintf("%v: %s", ErrRejected, msg.GroupElsewhere(e.Group, msg.NodeID(e.Home), e.Addr, ""))
}

func (e *GroupHomeError) Unwrap() error { return ErrRejected }

// groupRefusal is the error of a group's subscription refused with reason.
func groupRefusal(reason string) error {
	if g, home, addr, ok := msg.ParseGroupElsewhere(reason); ok {
		return &GroupHomeError{Group: g, Home: string(home), Addr: addr}
	}
	return fmt.Errorf("%w: %s", ErrRejected, reason)
}

func groupName(name string) error {
	if name == "" || strings.ContainsAny(name, " \t\n/") {
		return fmt.Errorf("group name %q: not empty, no spaces or slashes", name)
	}
	return nil
}

// groupRequest asks to join the subscription's group.
func (s *Subscription) groupRequest() msg.Subscribe {
	return msg.Subscribe{Sub: msg.SubID(s.name), Pattern: s.pattern, Selector: s.selector, Group: s.group}
}

// startGroup: the membership is in force (tok is the group's checkpoint).
func (s *Subscription) startGroup(tok msg.Token) {
	s.mu.Lock()
	first := s.token == nil
	s.moving = false
	s.token = map[string]uint64{}
	for p, t := range tok {
		s.token[string(p)] = uint64(t)
	}
	s.mu.Unlock()
	if first {
		close(s.started)
	}
}

// groupEvent is what a group member hands to Events for e: its Checkpoint
// names e alone, for Ack.
func groupEvent(e *msg.Event) Event {
	ev := eventOf(e)
	ev.Checkpoint = msg.Token{e.Pubend: e.Tick}.String()
	return ev
}

// ackGroup acknowledges the event tok names (one per pubend).
func (s *Subscription) ackGroup(tok msg.Token) error {
	for _, t := range tok {
		if t == tick.Tick(0) {
			return fmt.Errorf("%w: a group member acknowledges an event by its Checkpoint", ErrRejected)
		}
	}
	s.c.mu.Lock()
	conn := s.c.conn
	s.c.mu.Unlock()
	if conn == nil || !conn.Send(msg.SubAck{Sub: msg.SubID(s.name), Token: tok}) {
		return fmt.Errorf("%w: acknowledgement not sent", ErrDisconnected)
	}
	return nil
}
