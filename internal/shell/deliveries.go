package shell

import (
	"github.com/aerie-mq/aerie/internal/msg"
)

// Delivery runs (docs/PROTOCOL.md, DeliveryRun). The deliveries of one
// batch of engine answers (one Ready) that go to one subscription of a
// connection one after another leave as one DeliveryRun frame, for a
// client that reads them (protocol version 13 on): one encoding, one
// queued message and one decode for the run instead of one each per
// event. A run stands for exactly the Deliveries it replaces, in their
// order.
//
// What a connection receives keeps its order exactly: a connection has at
// most one open run, and anything else for it — a delivery to another of
// its subscriptions, a Gap, a Progress, a SubStarted, an ack — sends the
// run first. So a durable subscription's Gap or Progress is never overtaken
// by a delivery that followed it, nor overtakes one that preceded it.

const (
	// RunEventsMax bounds the events of one DeliveryRun.
	RunEventsMax = 256
	// RunBytesMax bounds the event bytes of one DeliveryRun (a larger
	// event travels alone). The client's events view the frame they came
	// in, so this is also the most one kept event can pin beyond itself.
	// With the subscription's name and the count, the frame is a small
	// allocation (msg.SmallAllocMax) at the client's reader, which
	// allocates each frame.
	RunBytesMax = msg.SmallAllocMax - 512
)

// deliveryRun is the open run of one connection.
type deliveryRun struct {
	c     ClientID
	s     *session
	first msg.Msg // the run's first delivery as routed, sent as it is when alone
	sub   msg.SubID
	evs   []*msg.Event // reused from run to run
	bytes int
}

// deliverer is the shell's state for delivery runs: the open runs
// (runs[:open], in the order they opened; a session knows its own), and
// the blocks the sent runs are carved from, so that a run costs no
// allocation of its own.
type deliverer struct {
	runs  []deliveryRun
	open  int
	block []msg.DeliveryRun
	slab  []*msg.Event
}

// addDelivery takes d, a delivery already renamed for client c (session
// s), into c's run, sending c's open run first when d does not extend it.
func (b *Broker) addDelivery(c ClientID, s *session, m msg.Msg, d *msg.Delivery) {
	k := &b.deliveries
	size := d.Event.Size()
	if s.drun > 0 {
		r := &k.runs[s.drun-1]
		if r.sub == d.Sub && len(r.evs) < RunEventsMax && r.bytes+size <= RunBytesMax {
			r.evs = append(r.evs, d.Event)
			r.bytes += size
			return
		}
		b.sendDeliveries(r)
		r.first, r.sub, r.evs, r.bytes = m, d.Sub, append(r.evs[:0], d.Event), size
		return
	}
	if k.open == len(k.runs) {
		k.runs = append(k.runs, deliveryRun{})
	}
	r := &k.runs[k.open]
	r.c, r.s, r.first, r.sub, r.evs, r.bytes = c, s, m, d.Sub, append(r.evs[:0], d.Event), size
	k.open++
	s.drun = k.open
}

// flushDeliveries sends client c's open run, if it has one (s is its
// session). The run's slot stays in place, empty, until flushAllDeliveries.
func (b *Broker) flushDeliveries(s *session) {
	if s == nil || s.drun == 0 {
		return
	}
	r := &b.deliveries.runs[s.drun-1]
	b.sendDeliveries(r)
	clear(r.evs)
	r.first, r.s, r.evs = nil, nil, r.evs[:0]
	s.drun = 0
}

// flushAllDeliveries sends every open run, in the order they opened.
func (b *Broker) flushAllDeliveries() {
	k := &b.deliveries
	for i := range k.open {
		r := &k.runs[i]
		if r.first == nil { // sent already (flushDeliveries)
			continue
		}
		r.s.drun = 0
		b.sendDeliveries(r)
		clear(r.evs)
		r.first, r.s, r.evs = nil, nil, r.evs[:0]
	}
	k.open = 0
}

// sendDeliveries sends a run: its one delivery as the engine made it, or
// a DeliveryRun carved from the blocks.
func (b *Broker) sendDeliveries(r *deliveryRun) {
	if len(r.evs) == 1 {
		b.net.ToClient(r.c, r.first)
		return
	}
	k := &b.deliveries
	n := len(r.evs)
	if cap(k.slab)-len(k.slab) < n {
		k.slab = make([]*msg.Event, 0, max(1024, n))
	}
	at := len(k.slab)
	k.slab = append(k.slab, r.evs...)
	if len(k.block) == cap(k.block) {
		k.block = make([]msg.DeliveryRun, 0, 64)
	}
	// The connection encodes the run later, on its own goroutine: the
	// blocks are never written again once a run is carved from them.
	k.block = append(k.block, msg.DeliveryRun{Sub: r.sub, Events: k.slab[at : at+n : at+n]})
	b.net.ToClient(r.c, &k.block[len(k.block)-1])
}
