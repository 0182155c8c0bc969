package shell

import (
	"github.com/aerie-mq/aerie/internal/msg"
	"github.com/aerie-mq/aerie/internal/tick"
)

// Range acks (docs/PROTOCOL.md, PubAckRange). The acks of one batch — the
// publishes of one group commit, released together in Persisted, or those
// of one burst in best-effort mode, in Drain — leave together; a client
// that reads PubAckRange gets the acks of consecutive publishes of one
// publisher in one frame instead of one frame each: one encoding, one
// write and one decode for the run, and one pass over the client's
// pending publishes. Each publish is still acked exactly once, with its
// own tick: a range stands for exactly the PubAcks it replaces. A
// duplicate's ack (a retry, answered with the original tick) and every
// PubReject still go one by one, and so does a run of one.
//
// What a connection receives keeps its order: an answer for a client that
// is not a coalesced ack first sends that client's open runs.

// ackRun is the open run of one publisher: consecutive seqs from seq, with
// increasing ticks.
type ackRun struct {
	c         ClientID
	first     msg.Msg // the run's first ack as the engine made it, sent as it is when alone
	pubend    msg.PubendID
	publisher string
	seq       uint64
	ticks     []tick.Tick // reused from run to run
}

// acker is the shell's state for coalescing: the open runs (runs[:open],
// in the order they opened), and the blocks the sent ranges are carved
// from, so that a range costs no allocation of its own.
type acker struct {
	runs  []ackRun
	open  int
	last  int // the run the last ack went to: acks of one publisher come in a row
	block []msg.PubAckRange
	slab  []tick.Tick
}

// toClients routes a batch of engine answers, coalescing acks into ranges
// and deliveries into runs (deliveries.go). A connection has either open
// ack runs or an open delivery run, never both: whatever else goes to it
// sends what is open first, so it receives everything in the engine's
// order.
func (b *Broker) toClients(ms []msg.Msg) {
	for _, m := range ms {
		if len(b.groups.byEngine) > 0 && b.toGroup(m) {
			continue
		}
		c, m, ok := b.route(m)
		if !ok {
			continue
		}
		s := b.sessions[c]
		if a := newAck(m); a != nil && s != nil && s.ackRanges {
			b.flushDeliveries(s)
			b.addAck(c, m, a)
			continue
		}
		if b.acks.open > 0 {
			b.flushAcks(c, true)
		}
		if d, ok := m.(*msg.Delivery); ok && s != nil && s.deliveryRuns && d.Event != nil {
			b.addDelivery(c, s, m, d)
			continue
		}
		b.flushDeliveries(s)
		b.net.ToClient(c, m)
	}
	if b.acks.open > 0 {
		b.flushAcks(0, false)
	}
	if b.deliveries.open > 0 {
		b.flushAllDeliveries()
	}
}

// newAck returns m if it is a new publish's ack (not a duplicate's), else
// nil.
func newAck(m msg.Msg) *msg.PubAck {
	var a *msg.PubAck
	switch x := m.(type) {
	case *msg.PubAck:
		a = x
	case msg.PubAck:
		a = &x
	default:
		return nil
	}
	if a.Duplicate {
		return nil
	}
	return a
}

// addAck takes m, the ack a of a new publish for a client that reads
// ranges, into a run.
func (b *Broker) addAck(c ClientID, m msg.Msg, a *msg.PubAck) {
	k := &b.acks
	i := k.find(a.Publisher)
	if i >= 0 {
		r := &k.runs[i]
		if r.c == c && r.pubend == a.Pubend && a.Seq == r.seq+uint64(len(r.ticks)) && a.Tick > r.ticks[len(r.ticks)-1] {
			r.ticks = append(r.ticks, a.Tick)
			return
		}
		// Not the next of the run: the run goes first, and a new one opens
		// (in its place, so the publisher keeps one open run).
		b.sendRun(r)
		r.c, r.first, r.pubend, r.seq, r.ticks = c, m, a.Pubend, a.Seq, append(r.ticks[:0], a.Tick)
		return
	}
	if k.open == len(k.runs) {
		k.runs = append(k.runs, ackRun{})
	}
	r := &k.runs[k.open]
	r.c, r.first, r.pubend, r.publisher, r.seq, r.ticks = c, m, a.Pubend, a.Publisher, a.Seq, append(r.ticks[:0], a.Tick)
	k.last = k.open
	k.open++
}

// find returns the open run of publisher, or -1.
func (k *acker) find(publisher string) int {
	if k.last < k.open && k.runs[k.last].publisher == publisher {
		return k.last
	}
	for i := range k.open {
		if k.runs[i].publisher == publisher {
			k.last = i
			return i
		}
	}
	return -1
}

// flushAcks sends the open runs, in the order they opened: those of client
// c only when only is set, else all.
func (b *Broker) flushAcks(c ClientID, only bool) {
	k := &b.acks
	kept := 0
	for i := range k.open {
		r := &k.runs[i]
		if only && r.c != c {
			if kept != i { // keep it open, in order; its tick buffer swaps places
				k.runs[kept], k.runs[i] = k.runs[i], k.runs[kept]
			}
			kept++
			continue
		}
		b.sendRun(r)
		r.first, r.publisher = nil, ""
	}
	k.open, k.last = kept, 0
}

// sendRun sends a run: its one ack as the engine made it, or a range.
func (b *Broker) sendRun(r *ackRun) {
	if len(r.ticks) == 1 {
		b.net.ToClient(r.c, r.first)
		return
	}
	k := &b.acks
	n := len(r.ticks)
	if cap(k.slab)-len(k.slab) < n {
		k.slab = make([]tick.Tick, 0, max(1024, n))
	}
	at := len(k.slab)
	k.slab = append(k.slab, r.ticks...)
	if len(k.block) == cap(k.block) {
		k.block = make([]msg.PubAckRange, 0, 64)
	}
	// The connection encodes the range later, on its own goroutine: the
	// blocks are never written again once a range is carved from them.
	k.block = append(k.block, msg.PubAckRange{Pubend: r.pubend, Publisher: r.publisher, Seq: r.seq, Ticks: k.slab[at : at+n : at+n]})
	b.net.ToClient(r.c, &k.block[len(k.block)-1])
}
