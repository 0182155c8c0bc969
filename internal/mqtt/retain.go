package mqtt

import (
	"slices"
	"strings"
	"sync"

	mochi "github.com/mochi-mqtt/server/v2"
	"github.com/mochi-mqtt/server/v2/packets"

	"github.com/aerie-mq/aerie/internal/msg"
)

// Retained messages (docs/MQTT.md, Retained messages).
//
// A retained PUBLISH is an aerie publish like any other (live subscribers
// get it, without the retain flag unless they asked for retain as
// published), carrying retainProperty, and, once aerie has acknowledged
// it (durable at its pubend), the topic's retained message at this
// broker: an empty payload clears it [MQTT-3.3.1-10]. Every other broker
// with an MQTT listener learns it too, through a subscription of its own
// whose selector (retainProperty = TRUE) lets only retained messages
// travel (Options.RetainedNetwork). A new subscription gets the retained
// messages its filter matches right after its SUBACK, with the retain
// flag set [MQTT-3.3.1-9], ahead of the live messages still queued for
// it. Each broker's store is in its memory.

// retainedMsg is a topic's retained message.
type retainedMsg struct {
	topic   string // MQTT form
	payload []byte
	user    []packets.UserProperty
	qos     byte
}

// retainStore is the broker's retained messages by MQTT topic.
type retainStore struct {
	mu sync.Mutex
	m  map[string]retainedMsg
}

// set keeps r as its topic's retained message, or clears the topic.
func (rs *retainStore) set(r retainedMsg) {
	rs.mu.Lock()
	defer rs.mu.Unlock()
	if len(r.payload) == 0 {
		delete(rs.m, r.topic)
		return
	}
	rs.m[r.topic] = r
}

// learn keeps a retained message the network delivered.
func (rs *retainStore) learn(ev *msg.Event) {
	topic, ok := TopicOf(ev.Topic)
	if !ok {
		return
	}
	rs.set(retainedMsg{topic: topic, payload: slices.Clone(ev.Payload), user: UserProps(ev.Props), qos: eventQoS(ev)})
}

// retainedEvent reports whether ev was published retained.
func retainedEvent(ev *msg.Event) bool {
	v, ok := ev.Props.Get(retainProperty)
	return ok && v.Kind == msg.PropBool && v.Bool()
}

// watchName is the broker's own subscription to retained messages.
const watchName = "mqtt-retained"

// watchRetained subscribes, as a client of the broker of its own, to
// every retained message published in the network: they fill this
// broker's store as they are delivered. It starts with the listener, so
// a retained message published while the broker was down is not known
// here (docs/MQTT.md).
func (s *Server) watchRetained() {
	cl := s.srv.NewClient(nil, "aerie", "aerie-retained", true)
	c := newConn(s, cl)
	c.watch, c.st = true, &clientState{in: map[uint16]*inbound{}}
	c.id = s.opts.Host.Up(c)
	s.opts.Host.Request(c.id, msg.Subscribe{Sub: watchName, Pattern: ">", Selector: retainProperty + " = TRUE"})
}

// matching returns the retained messages filter matches, by topic.
func (rs *retainStore) matching(filter string) []retainedMsg {
	rs.mu.Lock()
	defer rs.mu.Unlock()
	var out []retainedMsg
	for t, r := range rs.m {
		if MatchFilter(filter, t) {
			out = append(out, r)
		}
	}
	slices.SortFunc(out, func(a, b retainedMsg) int { return strings.Compare(a.topic, b.topic) })
	return out
}

// MatchFilter is MQTT's own matching rule (MQTT 4.7): whether topic name
// matches filter, '$' topics only under a first level that names them.
func MatchFilter(filter, topic string) bool {
	if !MatchesDollar(filter, topic) {
		return false
	}
	f, tl := strings.Split(filter, "/"), strings.Split(topic, "/")
	for i, l := range f {
		if l == "#" {
			return true // zero or more levels, the parent included
		}
		if i >= len(tl) || (l != "+" && l != tl[i]) {
			return false
		}
	}
	return len(f) == len(tl)
}

// retainGrant is a filter of a SUBSCRIBE whose retained messages go out
// after its SUBACK.
type retainGrant struct {
	filter string
	name   string // the subscription's first aerie name (its QoS and options)
}

// retainDue: filter was granted on subscription sub in SUBSCRIBE pid;
// fresh: it did not exist before. The v5 retain handling option says
// whether its retained messages are sent (0: always, 1: if fresh, 2:
// never) [MQTT-3.3.1-9] [MQTT-3.3.1-10] (mu held).
func (c *Conn) retainDueLocked(pid uint16, f packets.Subscription, sub *subscription, fresh bool) {
	if f.RetainHandling == 2 || (f.RetainHandling == 1 && !fresh) || len(sub.names) == 0 {
		return
	}
	c.retainDue[pid] = append(c.retainDue[pid], retainGrant{filter: f.Filter, name: string(sub.names[0])})
}

// subackSent: the SUBACK of pid is written; the retained messages of its
// filters go next, ahead of the live deliveries still queued for them.
func (c *Conn) subackSent(pid uint16) {
	c.mu.Lock()
	grants := c.retainDue[pid]
	delete(c.retainDue, pid)
	var items []queued
	for _, g := range grants {
		for _, r := range c.s.retained.matching(g.filter) {
			items = append(items, queued{retained: &r, sub: msgSubID(g.name)})
		}
	}
	if len(items) > 0 {
		c.queue = append(items, c.queue...)
	}
	c.mu.Unlock()
	if len(items) > 0 {
		signal(c.wake)
	}
}

// deliverRetained writes a retained message to the client under
// subscription name, at the lower of its QoS and the subscription's, with
// the retain flag; it counts towards no checkpoint (it is not a delivery
// of the subscription's stream).
func (c *Conn) deliverRetained(r *retainedMsg, name string, window int) bool {
	c.mu.Lock()
	sub := c.byName[msgSubID(name)]
	c.mu.Unlock()
	if sub == nil {
		return true
	}
	qos := min(sub.qos, r.qos)
	pk := packets.Packet{FixedHeader: packets.FixedHeader{Type: packets.Publish, Qos: qos, Retain: true},
		TopicName: r.topic, Payload: r.payload}
	if c.v5 {
		pk.Properties.User = r.user
		if sub.id > 0 {
			pk.Properties.SubscriptionIdentifier = []int{sub.id}
		}
	}
	if qos > 0 && !c.awaitRoom(&pk, sub, msgSubID(name), nil, window) {
		return false
	}
	if err := c.cl.WritePacket(pk); err != nil {
		if err == packets.ErrPacketTooLarge {
			if qos > 0 {
				c.delivered(pk.PacketID)
			}
			return true
		}
		return false
	}
	return true
}

// OnPacketSent: a SUBACK is out; its retained messages follow.
func (h *hook) OnPacketSent(cl *mochi.Client, pk packets.Packet, _ []byte) {
	if pk.FixedHeader.Type != packets.Suback {
		return
	}
	if c := h.s.conn(cl); c != nil {
		c.subackSent(pk.PacketID)
	}
}
