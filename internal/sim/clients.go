package sim

import (
	"fmt"
	"maps"
	"slices"
	"time"

	"github.com/aerie-mq/aerie/internal/msg"
	"github.com/aerie-mq/aerie/internal/shell"
	"github.com/aerie-mq/aerie/internal/tick"
)

var (
	topics   = []string{"a.x", "a.y", "b.x", "b.y.z", "c"}
	patterns = []string{">", "a.*", "a.>", "b.>", "*.x", "a.x", "c", "b.y.*"}
	// Selectors over the "seq" property every simulated event carries.
	selectors = []string{"seq > 20", "seq BETWEEN 5 AND 60", "seq < 10 OR seq > 100", "NOT (seq >= 30)",
		"seq * 2 > 50", "missing IS NULL", "seq IN ('1', '2')", "seq <> 7 AND (seq / 2) * 2 = seq"}
)

// publisher publishes to one pubend at a rate that changes between steady,
// burst and idle, and retries unacked publishes with the same sequence
// number (idempotency, issue 2 item 5).
type publisher struct {
	id          string
	node        msg.NodeID
	pubend      msg.PubendID
	nextSeq     uint64
	outstanding map[uint64]time.Duration // seq -> last sent (simulated time)
	rate        float64                  // publishes per second while steady
	fixedTopic  string
	conn        clientConn
	// pad makes each payload this many bytes longer; steady publishers
	// never idle or burst (the congestion scenarios).
	pad    int
	steady bool
	// gen, when set, draws publish seq's topic and properties (scale.go).
	gen func(seq uint64) (string, msg.Props)
	// noAck: every third publish asks for no ack (plan.noAck).
	noAck bool
	// inOrder: a publisher of a plain PHB that behaves as the Go client
	// does (plan.inOrder): it resends nothing on a live connection, and on
	// a new one (its broker restarted) resends everything unacknowledged,
	// in order, before anything new; the oracle checks its publish order
	// (I13). Otherwise it retries what is unacknowledged after a second,
	// publishing on meanwhile: a client the dedup window must cope with,
	// whose events may be logged out of its order.
	inOrder bool
	// ordered: a publisher of a replicated cell in a run that forwards
	// (forward.go), connected to one of members at a time (fc, members[at]).
	ordered bool
	members []msg.NodeID
	at      int
	fc      fwdConn
}

// maxInflight bounds a simulated publisher's unacknowledged publishes, as
// the Go client's MaxInflight does: a pubend that slows its acks (Gryphon
// CC) slows the publisher.
const maxInflight = 1000

// clientConn is a simulated client's connection to its broker: one per
// broker incarnation, opened when the client first needs it.
type clientConn struct {
	id   shell.ClientID
	node msg.NodeID
	gen  int // the broker's shell it belongs to (its incarnation, or Raft leadership)
	ok   bool
	// paced: the client reports what its application has taken of its
	// durable subscriptions (msg.SubConsumed, protocol version 16 on), so
	// their catch-ups are paced (durable.go).
	paced bool
}

// open returns the connection to n, opening one if the broker restarted
// since (or there was none, or it was to another broker).
func (c *clientConn) open(w *world, n *node) shell.ClientID {
	if !c.ok || c.node != n.id || c.gen != n.gen {
		n.nextCID++
		*c = clientConn{id: n.nextCID, node: n.id, gen: n.gen, ok: true}
		// Every other connection reads PubAckRange (a client of version 11
		// on), and every other pair DeliveryRun (version 13 on), so both
		// forms of acks and of deliveries run under every scenario.
		// Every other quadruple reports what it has taken (version 16 on).
		reads := shell.Reads{AckRanges: c.id%2 == 1, DeliveryRuns: c.id/2%2 == 1, ReportsTaken: c.id/4%2 == 1}
		c.paced = reads.ReportsTaken
		w.input(n, func(b *shell.Broker) { b.ClientUpReading(c.id, nil, reads) })
		if r := w.relayOf(n); r != nil {
			r.ClientUp(c.id, nil, reads.AckRanges)
		}
	}
	return c.id
}

// request sends m to n over the client connection c, through the codec
// and the broker's request checks, as a real client's request would go.
func (c *clientConn) request(w *world, n *node, m msg.Msg) {
	if !n.up {
		return
	}
	id := c.open(w, n)
	m = w.viaWire(m)
	if w.relayRequest(n, id, m) {
		return // to a pubend hosted elsewhere (relay.go)
	}
	w.input(n, func(b *shell.Broker) { b.ClientRequest(id, m) })
}

// requestAll sends the publishes ps to n over c in order: as PublishRuns
// of at most 256 on every other pair of pairs of connections (a client of
// version 13 on, whose writer found them queued together), else one by
// one, so both forms of publishes run under every scenario.
func (c *clientConn) requestAll(w *world, n *node, ps []msg.Publish) {
	if !n.up || len(ps) == 0 {
		return
	}
	if id := c.open(w, n); id/4%2 == 0 {
		for _, p := range ps {
			c.request(w, n, p)
		}
		return
	}
	for len(ps) > 0 {
		k := min(len(ps), 256)
		c.request(w, n, msg.PublishRun{Publishes: ps[:k]})
		ps = ps[k:]
	}
}

// close ends the connection (the client hangs up).
func (c *clientConn) close(w *world, n *node) {
	if c.ok && c.node == n.id && c.gen == n.gen {
		w.relayClientDown(n, c.id)
	}
	c.ok = false
}

func (p *publisher) run(w *world) {
	if w.healed {
		return
	}
	delay := time.Duration(float64(time.Second) / p.rate)
	switch r := w.rng.IntN(100); {
	case p.steady:
	case r < 2 && p.fixedTopic == "": // idle 1–5 s
		delay = time.Duration(1000+w.rng.IntN(4000)) * time.Millisecond
	case r < 10 && p.fixedTopic == "": // burst
		delay = time.Duration(w.rng.IntN(5)) * time.Millisecond
	}
	if len(p.outstanding) < maxInflight {
		p.publish(w)
	}
	w.after(max(delay, time.Microsecond), func() { p.run(w) })
}

func (p *publisher) request(seq uint64) msg.Publish {
	topic := p.fixedTopic
	if topic == "" {
		topic = topics[int(seq*2654435761)%len(topics)]
	}
	props := msg.MustProps(map[string]any{"seq": int64(seq)})
	if p.gen != nil {
		topic, props = p.gen(seq)
	}
	return msg.Publish{
		Pubend: p.pubend, Publisher: p.id, Seq: seq, Topic: topic,
		Props:   props,
		Payload: append([]byte(fmt.Sprintf("%s#%d", p.id, seq)), make([]byte, p.pad)...),
		NoAck:   p.noAck && seq%3 == 0,
	}
}

// publish sends the next publish. One that asks for no ack is sent once
// and forgotten, as client.PublishNoAck does: it may be lost, and the
// oracle asks only that what was logged be delivered.
func (p *publisher) publish(w *world) {
	var n *node
	switch { // a new connection resends the unacknowledged first
	case p.inOrder:
		n = p.plainConn(w)
	case p.ordered:
		n = p.orderedConn(w)
	}
	p.nextSeq++
	req := p.request(p.nextSeq)
	if !req.NoAck {
		p.outstanding[p.nextSeq] = time.Duration(w.now)
	}
	if p.ordered {
		if n != nil {
			p.sendOrdered(w, n, req)
		}
		return
	}
	if !p.inOrder {
		n = w.pubTarget(p)
	}
	if n != nil {
		w.orc.AskedNoAck(req)
		p.conn.request(w, n, req)
	}
}

// pubTarget is the broker a publisher talks to: its PHB, or the serving
// leader of its replicated cell (a client redirected there; nil while the
// cell has none, and the publish waits for its retry).
func (w *world) pubTarget(p *publisher) *node {
	n := w.nodes[p.node]
	if n.raft == nil {
		return n
	}
	return w.serving(n.cell)
}

// plainConn returns an in-order publisher's broker, its connection open:
// when the broker restarted since the last one (or there was none), a new
// connection is opened and every unacknowledged publish resent on it, in
// order, before anything new. Nil while the broker is down.
func (p *publisher) plainConn(w *world) *node {
	n := w.nodes[p.node]
	if !n.up {
		return nil
	}
	if p.conn.ok && p.conn.node == n.id && p.conn.gen == n.gen {
		return n
	}
	p.conn.open(w, n)
	seqs := slices.Sorted(maps.Keys(p.outstanding))
	w.watchf("%s connects to %s, resending %d", p.id, n.id, len(seqs))
	ps := make([]msg.Publish, 0, len(seqs))
	for _, s := range seqs {
		p.outstanding[s] = time.Duration(w.now)
		ps = append(ps, p.request(s))
	}
	p.conn.requestAll(w, n, ps)
	return n
}

// retry resends every publish unacked for a second (the broker may have
// crashed, losing the request or the ack).
func (p *publisher) retry(w *world) {
	if p.inOrder {
		p.plainConn(w) // as the Go client: only a new connection resends
		w.after(500*time.Millisecond, func() { p.retry(w) })
		return
	}
	if p.ordered {
		// As the Go client: nothing is resent on a live connection; a
		// closed one is replaced, and everything unacknowledged resent.
		p.orderedConn(w)
		w.after(500*time.Millisecond, func() { p.retry(w) })
		return
	}
	seqs := make([]uint64, 0, len(p.outstanding))
	for s, at := range p.outstanding {
		if time.Duration(w.now)-at >= time.Second {
			seqs = append(seqs, s)
		}
	}
	slices.Sort(seqs)
	n := w.pubTarget(p)
	var ps []msg.Publish
	for _, s := range seqs {
		p.outstanding[s] = time.Duration(w.now)
		ps = append(ps, p.request(s))
	}
	if n != nil {
		p.conn.requestAll(w, n, ps)
	}
	w.after(500*time.Millisecond, func() { p.retry(w) })
}

func (p *publisher) acked(w *world, a msg.PubAck) {
	w.orc.PubAcked(a)
	delete(p.outstanding, a.Seq)
}

// subscriber holds one subscription at one SHB; when its broker crashes the
// session ends and it subscribes again after the restart (a new session with
// a new start token).
type subscriber struct {
	name     string
	node     msg.NodeID
	pattern  string
	selector string // "" for none
	total    bool   // uniform total order across pubends
	n        int
	cur      msg.SubID
	active   bool
	started  bool
	asked    tick.Time // when the current session subscribed (scale runs: propagation time)
	conn     clientConn
	// connp, when set, is a connection shared with the other subscribers
	// of its broker (scale runs: one client, many subscriptions).
	connp *clientConn
}

// client is the subscriber's connection to its broker.
func (s *subscriber) client() *clientConn {
	if s.connp != nil {
		return s.connp
	}
	return &s.conn
}

func (s *subscriber) start(w *world) {
	n := w.nodes[s.node]
	if !n.up || s.active {
		return
	}
	s.n++
	s.cur = msg.SubID(fmt.Sprintf("%s/%s.%d", s.node, s.name, s.n))
	s.active, s.started = true, false
	n.sessions = append(n.sessions, s)
	w.watchf("subscribe %s %s %s", s.cur, s.pattern, s.selector)
	if w.scale != nil {
		w.scale.byCur[s.cur] = s
		s.asked = w.now
	}
	s.client().request(w, n, msg.Subscribe{Sub: s.cur, Pattern: s.pattern, Selector: s.selector, TotalOrder: s.total})
}

func (s *subscriber) lost(w *world) {
	if s.active && s.started {
		w.orc.Ended(s.cur)
	}
	s.active = false
}

func (s *subscriber) rejoin(w *world) {
	w.after(time.Duration(w.rng.IntN(1000))*time.Millisecond, func() { s.start(w) })
}

// churn unsubscribes and later subscribes again.
func (s *subscriber) churn(w *world) {
	n := w.nodes[s.node]
	if w.healed {
		return
	}
	if s.active && n.up {
		// Every other time the client hangs up instead of unsubscribing:
		// the broker must end the subscriptions of a closed connection.
		if s.n%2 == 0 {
			s.client().close(w, n)
		} else {
			s.client().request(w, n, msg.Unsubscribe{Sub: s.cur})
		}
		s.lost(w)
		n.sessions = slices.DeleteFunc(n.sessions, func(x *subscriber) bool { return x == s })
		w.after(time.Duration(200+w.rng.IntN(3000))*time.Millisecond, func() { s.start(w) })
	}
	w.after(time.Duration(3000+w.rng.IntN(20000))*time.Millisecond, func() { s.churn(w) })
}

func (w *world) toClient(n *node, m msg.Msg) {
	if len(w.groups) > 0 && w.groupMsg(n, m) {
		return
	}
	if w.durableMsg(n, m) {
		return
	}
	switch m := m.(type) {
	case msg.Gap:
		// A subscriber whose SHB was gone for longer than max_retain
		// (gd/resync.go): only released ticks, from where it stands.
		w.watchf("gap %v", m)
		w.noteFinals()
		w.orc.Gap(m.Sub, m)
		w.gaps++
	case msg.Delivery:
		if m.Event.Pubend == w.opts.WatchPubend {
			w.watchf("deliver %s %s@%d", m.Sub, m.Event.Pubend, m.Event.Tick)
		}
		w.orc.Delivered(m.Sub, m.Event)
		if w.trace != nil {
			w.trace.delivered(n, w.localNow(n), m.Event)
		}
	case msg.SubStarted:
		w.watchf("started %v", m)
		if w.scale != nil {
			if s := w.scale.byCur[m.Sub]; s != nil && s.active && s.node == n.id {
				if !s.started {
					w.scale.subLat = append(w.scale.subLat, w.now.Sub(s.asked))
				}
				s.started = true
				w.orc.Started(m.Sub, n.id, s.pattern, s.selector, m.Token)
			}
			return
		}
		for _, s := range n.sessions {
			if s.cur == m.Sub && s.total {
				s.started = true
				w.orc.StartedTotal(m.Sub, n.id, s.pattern, s.selector, m.Token)
			} else if s.cur == m.Sub {
				s.started = true
				w.orc.Started(m.Sub, n.id, s.pattern, s.selector, m.Token)
			}
		}
	case msg.SubRejected:
		// A total-order subscription past its hold bound (gd total.go):
		// ended by its broker, as its client would see it.
		w.watchf("rejected %v", m)
		for _, s := range n.sessions {
			if s.cur == m.Sub {
				s.lost(w)
			}
		}
	case msg.PubReject:
		// A pubend whose disk is full (FaultDiskFull) refuses the publish:
		// the client gives it up, as an application told the error would,
		// so nothing is owed for it (it was not logged); one whose first
		// send is still in the pubend's batch may be acked yet.
		w.watchf("refused %v", m)
		w.pubRefused++
		for _, p := range w.pubs {
			if p.id == m.Publisher {
				delete(p.outstanding, m.Seq)
			}
		}
	case msg.PubAck:
		for _, p := range w.pubs {
			if p.id == m.Publisher {
				p.acked(w, m)
			}
		}
	case msg.PubAckRange:
		// The PubAcks the range stands for, one by one, as a client sees
		// them.
		for _, p := range w.pubs {
			if p.id == m.Publisher {
				for i := range m.Len() {
					p.acked(w, m.Ack(i))
				}
			}
		}
	default:
		panic(fmt.Sprintf("sim: %s: unexpected client message %v", n.id, m))
	}
}
