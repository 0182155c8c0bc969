package shell

import (
	"fmt"

	"github.com/aerie-mq/aerie/internal/gd"
	"github.com/aerie-mq/aerie/internal/msg"
)

// session is one client connection: the subscriptions it holds, under the
// names the client gave them. In the engine a subscription is named
// broker/connection/name, unique in the network, so two clients (or two
// connections of one) may both call theirs "s1".
type session struct {
	id   ClientID
	subs map[msg.SubID]msg.SubID // engine id → the client's own name
}

func (b *Broker) engineSub(c ClientID, name msg.SubID) msg.SubID {
	return msg.SubID(fmt.Sprintf("%s/%d/%s", b.id, c, name))
}

// ClientUp: client connection c is open.
func (b *Broker) ClientUp(c ClientID) {
	b.sessions[c] = &session{id: c, subs: map[msg.SubID]msg.SubID{}}
}

// ClientDown: client connection c is gone; its subscriptions end with it.
func (b *Broker) ClientDown(c ClientID) {
	s := b.sessions[c]
	if s == nil {
		return
	}
	for sub := range s.subs {
		delete(b.subOwner, sub)
		b.step(gd.Local{Msg: msg.Unsubscribe{Sub: sub}})
	}
	for p, owner := range b.pubOwner {
		if owner == c {
			delete(b.pubOwner, p)
		}
	}
	delete(b.sessions, c)
}

// ClientRequest hands the engine a request from client connection c,
// after the checks every request passes: a publish names a pubend (one is
// picked here if not) and fits the event size limit; only publish,
// subscribe and unsubscribe are requests.
func (b *Broker) ClientRequest(c ClientID, req msg.Msg) {
	s := b.sessions[c]
	if s == nil {
		return // a closed connection's leftovers
	}
	switch m := req.(type) {
	case msg.Publish:
		b.publish(c, m, req)
	case msg.Subscribe:
		full := b.engineSub(c, m.Sub)
		s.subs[full] = m.Sub
		b.subOwner[full] = c
		b.step(gd.Local{Msg: msg.Subscribe{Sub: full, Pattern: m.Pattern, Selector: m.Selector, Durable: m.Durable, From: m.From}})
	case msg.Unsubscribe:
		full := b.engineSub(c, m.Sub)
		delete(s.subs, full)
		delete(b.subOwner, full)
		b.step(gd.Local{Msg: msg.Unsubscribe{Sub: full}})
	default:
		b.net.CloseClient(c, fmt.Errorf("broker: client sent %T", m), fmt.Sprintf("unexpected %T from a client", m))
	}
}

// publish passes req, the publish as decoded, to the engine unless its
// pubend is picked here: re-boxing m would cost an allocation per event.
func (b *Broker) publish(c ClientID, m msg.Publish, req msg.Msg) {
	if m.Pubend == "" {
		m.Pubend = b.pickPubend(m.Publisher)
		req = m
	}
	if size := msg.EventSize(m.Topic, m.Props, m.Payload); size > msg.MaxEventBytes {
		b.net.ToClient(c, msg.PubReject{Publisher: m.Publisher, Seq: m.Seq,
			Reason: fmt.Sprintf("event of %d bytes exceeds the %d-byte limit", size, msg.MaxEventBytes)})
		return
	}
	if cur, ok := b.pubOwner[m.Publisher]; !ok || c > cur {
		b.pubOwner[m.Publisher] = c
	}
	b.localIn = gd.Local{Msg: req}
	b.refused(b.eng.Step(b.clock.Now(), &b.localIn))
	b.localIn = gd.Local{}
}

// toClient routes an engine answer to the connection it is for, under the
// name that client uses.
func (b *Broker) toClient(m msg.Msg) {
	var c ClientID
	var ok bool
	switch x := m.(type) {
	case msg.PubAck:
		c, ok = b.pubOwner[x.Publisher]
	case msg.PubReject:
		c, ok = b.pubOwner[x.Publisher]
	case msg.Delivery:
		if c, ok = b.subOwner[x.Sub]; ok {
			x.Sub = b.sessions[c].subs[x.Sub]
			m = x
		}
	case msg.SubStarted:
		if c, ok = b.subOwner[x.Sub]; ok {
			x.Sub = b.sessions[c].subs[x.Sub]
			m = x
		}
	case msg.SubRejected:
		if c, ok = b.subOwner[x.Sub]; ok {
			x.Sub = b.sessions[c].subs[x.Sub]
			m = x
		}
	case msg.Gap:
		if c, ok = b.subOwner[x.Sub]; ok {
			x.Sub = b.sessions[c].subs[x.Sub]
			m = x
		}
	case msg.Progress:
		if c, ok = b.subOwner[x.Sub]; ok {
			x.Sub = b.sessions[c].subs[x.Sub]
			m = x
		}
	}
	if ok {
		b.net.ToClient(c, m)
	}
}
