package shell

import (
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/aerie-mq/aerie/internal/auth"
	"github.com/aerie-mq/aerie/internal/gd"
	"github.com/aerie-mq/aerie/internal/match"
	"github.com/aerie-mq/aerie/internal/msg"
)

// session is one client connection: the subscriptions it holds, under the
// names the client gave them. In the engine a subscription is named
// broker/connection/name, unique in the network, so two clients (or two
// connections of one) may both call theirs "s1".
type session struct {
	id   ClientID
	subs map[msg.SubID]msg.SubID // engine id → the client's own name
	// perms is what the client's user may do (nil: everything, the network
	// has no users). Checked here, at the broker the client is connected
	// to, on every request: another hop never checks nor trusts it.
	perms *auth.Perms
	// ackRanges: the client reads PubAckRange (protocol version 11 on),
	// so the acks of its consecutive publishes that leave together go in
	// one (acks.go).
	ackRanges bool
	// deliveryRuns: the client reads DeliveryRun (protocol version 13
	// on), so consecutive deliveries to one of its subscriptions that
	// leave together go in one (deliveries.go); drun is its open run's
	// place in the shell's open runs, plus one (0: none).
	deliveryRuns bool
	drun         int
	// reportsTaken: the client reports what its application has taken of
	// its durable subscriptions (SubConsumed, protocol version 16 on), so
	// their catch-ups are paced by it (gd/durable.go, pacing).
	reportsTaken bool
}

// Reads says which coalesced frames a client connection reads, by its
// protocol version: a client of version 11 on reads PubAckRange
// (wire.VersionPubAckRange), of version 13 on DeliveryRun
// (wire.VersionDeliveryRun). The zero value is a client that reads
// neither: a PubAck per publish and a Delivery per event. ReportsTaken
// says, beside, that the client sends SubConsumed (version 16 on,
// wire.VersionSubConsumed): its durable subscriptions catch up paced.
type Reads struct {
	AckRanges    bool
	DeliveryRuns bool
	ReportsTaken bool
}

func (b *Broker) engineSub(c ClientID, name msg.SubID) msg.SubID {
	return msg.SubID(fmt.Sprintf("%s/%d/%s", b.id, c, name))
}

// ClientUp: client connection c is open, with every permission.
func (b *Broker) ClientUp(c ClientID) { b.ClientUpAs(c, nil) }

// ClientUpAs: client connection c is open, authenticated as a user who may
// do what perms allows (nil: everything).
func (b *Broker) ClientUpAs(c ClientID, perms *auth.Perms) { b.ClientUpWith(c, perms, false) }

// ClientUpWith: client connection c is open, as ClientUpAs; ackRanges says
// that it reads PubAckRange (a client of protocol version 11 or later,
// wire.VersionPubAckRange): the acks of its consecutive publishes that
// leave together (one group commit, one burst) go in one frame. Without
// it every publish gets a PubAck of its own. It reads no DeliveryRun
// (ClientUpReading).
func (b *Broker) ClientUpWith(c ClientID, perms *auth.Perms, ackRanges bool) {
	b.ClientUpReading(c, perms, Reads{AckRanges: ackRanges})
}

// ClientUpReading: client connection c is open, as ClientUpAs, and reads
// the coalesced frames r names: with r.DeliveryRuns the consecutive
// deliveries to one of its subscriptions that leave together go in one
// DeliveryRun; without it every event gets a Delivery of its own.
func (b *Broker) ClientUpReading(c ClientID, perms *auth.Perms, r Reads) {
	b.sessions[c] = &session{id: c, subs: map[msg.SubID]msg.SubID{}, perms: perms,
		ackRanges: r.AckRanges, deliveryRuns: r.DeliveryRuns, reportsTaken: r.ReportsTaken}
}

// ClientDown: client connection c is gone; its subscriptions end with it.
func (b *Broker) ClientDown(c ClientID) {
	s := b.sessions[c]
	if s == nil {
		return
	}
	b.leaveGroups(c)
	for _, sub := range slices.Sorted(maps.Keys(s.subs)) {
		if d := b.attached(sub); d != nil {
			b.detachDurable(d, "") // away: it keeps its place (durable.go)
			continue
		}
		b.subOwner.delete(sub)
		b.step(gd.Local{Msg: msg.Unsubscribe{Sub: sub}})
	}
	b.pubOwner.deleteOwnedBy(c)
	delete(b.sessions, c)
}

// ClientRequest hands the engine a request from client connection c,
// after the checks every request passes: its user may publish to the topic
// or subscribe to the pattern (refused with a reason that names it), a
// publish names a pubend (one is picked here if not) and fits the event
// size limit; only publish, subscribe, unsubscribe and a durable
// subscription's acknowledgement or report of what was taken are requests.
func (b *Broker) ClientRequest(c ClientID, req msg.Msg) {
	s := b.sessions[c]
	if s == nil {
		return // a closed connection's leftovers
	}
	switch m := req.(type) {
	case msg.Publish:
		if !s.perms.MayPublish(m.Topic) {
			b.net.ToClient(c, msg.PubReject{Publisher: m.Publisher, Seq: m.Seq, Reason: "not authorized to publish to " + m.Topic})
			return
		}
		b.publish(c, m, req)
	case *msg.PublishRun: // from a client of version 13 on: consecutive publishes
		b.publishRun(c, s, m)
	case msg.Subscribe:
		if why := filterRefusal(m); why != "" {
			b.net.ToClient(c, msg.SubRejected{Sub: m.Sub, Reason: why})
			return
		}
		if !s.perms.MaySubscribe(m.Pattern) {
			b.net.ToClient(c, msg.SubRejected{Sub: m.Sub, Reason: "not authorized to subscribe to " + m.Pattern})
			return
		}
		if why := gd.TotalOrderRefusal(m); why != "" {
			b.net.ToClient(c, msg.SubRejected{Sub: m.Sub, Reason: why})
			return
		}
		if m.Group != "" {
			b.joinGroup(c, s, m)
			return
		}
		if m.Durable {
			b.subscribeDurable(c, s, m)
			return
		}
		full := b.engineSub(c, m.Sub)
		s.subs[full] = m.Sub
		b.subOwner.set(full, c)
		b.step(gd.Local{Msg: msg.Subscribe{Sub: full, Pattern: m.Pattern, Selector: m.Selector, TotalOrder: m.TotalOrder}})
	case msg.SubAck:
		if !b.ackGroup(c, m) {
			b.ackDurable(c, m)
		}
	case msg.SubConsumed:
		b.consumedDurable(c, m)
	case msg.Unsubscribe:
		if b.leaveGroup(c, m.Sub) {
			return
		}
		if name, ok := strings.CutPrefix(string(m.Sub), GroupPrefix); ok {
			b.deleteGroup(c, name)
			return
		}
		full := b.engineSub(c, m.Sub)
		if d := b.attached(full); d != nil {
			b.unsubscribeDurable(d)
			return
		}
		if d := b.durables.subs[string(m.Sub)]; d != nil && d.client == 0 {
			// A durable subscription whose subscriber is away may be
			// deleted from any connection (as JMS unsubscribe(name)).
			b.unsubscribeDurable(d)
			return
		}
		delete(s.subs, full)
		b.subOwner.delete(full)
		b.step(gd.Local{Msg: msg.Unsubscribe{Sub: full}})
	default:
		b.net.CloseClient(c, fmt.Errorf("broker: client sent %T", m), fmt.Sprintf("unexpected %T from a client", m))
	}
}

// publishRun hands the engine the publishes of a run in order, each as a
// Publish frame of its own would be (refused, deduplicated and acked on
// its own), in one pass: each goes to the engine by pointer into the run,
// not boxed again.
func (b *Broker) publishRun(c ClientID, s *session, r *msg.PublishRun) {
	for i := range r.Publishes {
		m := &r.Publishes[i]
		if !s.perms.MayPublish(m.Topic) {
			b.net.ToClient(c, msg.PubReject{Publisher: m.Publisher, Seq: m.Seq, Reason: "not authorized to publish to " + m.Topic})
			continue
		}
		b.publish(c, *m, m)
	}
}

// publish passes req, the publish as decoded, to the engine unless its
// pubend is picked here: re-boxing m would cost an allocation per event.
func (b *Broker) publish(c ClientID, m msg.Publish, req msg.Msg) {
	if err := msg.CheckPublish(m.Topic, m.Props, m.Payload); err != nil {
		// Refused here, as the Go client refuses it before sending: a
		// client of any language learns why, and its connection goes on.
		b.net.ToClient(c, msg.PubReject{Publisher: m.Publisher, Seq: m.Seq, Reason: err.Error()})
		return
	}
	if m.Pubend == "" {
		m.Pubend = b.pickPubend(m.Publisher)
		req = m
	}
	if why := b.diskFull(m.Pubend); why != "" {
		// Nothing acknowledged is lost: this publish was not; the
		// publisher learns why, and may send it again later.
		b.refusedDisk++
		b.net.ToClient(c, msg.PubReject{Publisher: m.Publisher, Seq: m.Seq, Reason: why})
		return
	}
	if cur, ok := b.pubOwner.get(m.Publisher); !ok || c > cur {
		// A copy: m.Publisher views the publish's frame, and a small one
		// shares its block with the publishes after it (wire.Reader
		// ViewFrames), which the key would keep alive.
		b.pubOwner.set(strings.Clone(m.Publisher), c)
	}
	b.localIn = gd.Local{Msg: req}
	b.refused(b.eng.Step(b.clock.Now(), &b.localIn))
	b.localIn = gd.Local{}
}

// toClient routes an engine answer to the connection it is for, under the
// name that client uses.
func (b *Broker) toClient(m msg.Msg) {
	if c, m, ok := b.route(m); ok {
		b.net.ToClient(c, m)
	}
}

// route finds the connection an engine answer is for and renames what it
// names in the client's terms; ok is false when that connection is gone.
func (b *Broker) route(m msg.Msg) (c ClientID, _ msg.Msg, ok bool) {
	switch x := m.(type) {
	case *msg.PubAck: // the engine's form for a new publish (gd pubAckMsg)
		c, ok = b.pubOwner.get(x.Publisher)
	case msg.PubAck:
		c, ok = b.pubOwner.get(x.Publisher)
	case msg.PubReject:
		c, ok = b.pubOwner.get(x.Publisher)
	case *msg.Delivery: // the engine's form: renamed in place, not boxed again
		if c, ok = b.subOwner.get(x.Sub); ok {
			x.Sub = b.sessions[c].subs[x.Sub]
		}
	case msg.Delivery:
		if c, ok = b.subOwner.get(x.Sub); ok {
			x.Sub = b.sessions[c].subs[x.Sub]
			m = x
		}
	case msg.SubStarted:
		b.durableStarted(x.Sub, x.Token)
		if c, ok = b.subOwner.get(x.Sub); ok {
			x.Sub = b.sessions[c].subs[x.Sub]
			m = x
		}
	case msg.SubRejected:
		if c, ok = b.subOwner.get(x.Sub); ok {
			x.Sub = b.sessions[c].subs[x.Sub]
			m = x
		}
	case msg.Gap:
		if c, ok = b.subOwner.get(x.Sub); ok {
			x.Sub = b.sessions[c].subs[x.Sub]
			m = x
		}
	case msg.Progress:
		if c, ok = b.subOwner.get(x.Sub); ok {
			x.Sub = b.sessions[c].subs[x.Sub]
			m = x
		}
	}
	return c, m, ok
}

// filterRefusal is why a subscription's pattern or selector is refused, or
// "": checked before anything else, so that a durable subscription is
// never stored with a filter the engine would refuse, and a malformed
// pattern is named as such rather than as one the user may not use.
func filterRefusal(m msg.Subscribe) string {
	if _, err := match.ParsePattern(m.Pattern); err != nil {
		return err.Error()
	}
	if m.Selector != "" {
		if _, err := match.ParseSelector(m.Selector); err != nil {
			return fmt.Sprintf("selector %q: %v", m.Selector, err)
		}
	}
	return ""
}
