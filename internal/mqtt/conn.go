package mqtt

import (
	"errors"
	"fmt"
	"maps"
	"slices"
	"sync"
	"time"

	mochi "github.com/mochi-mqtt/server/v2"
	"github.com/mochi-mqtt/server/v2/packets"

	"github.com/aerie-mq/aerie/internal/auth"
	"github.com/aerie-mq/aerie/internal/msg"
	"github.com/aerie-mq/aerie/internal/shell"
)

// Conn is one MQTT connection as a client of the broker's shell. The
// broker's loop calls Send, CloseWith and CloseFlush, which never block;
// the connection's read goroutine (mochi's, through the hook) and its
// write goroutine (writeLoop) do the rest.
type Conn struct {
	s         *Server
	cl        *mochi.Client
	v5        bool
	id        shell.ClientID
	perms     *auth.Perms   // its user's permissions (nil: no users)
	publisher string        // this connection's publisher name in aerie
	pubend    msg.PubendID  // where its publishes go
	done      chan struct{} // closed when the connection is gone
	ended     chan struct{} // closed when its end is complete (OnDisconnect)
	st        *clientState  // its client id's session state (state.go)
	will      *will         // published if the connection ends without DISCONNECT (will.go)
	watch     bool          // the broker's own subscription to retained messages (retain.go)
	flushed   chan struct{} // closed when a CloseFlush has written everything
	wake      chan struct{} // the writer has work (cap 1)
	quota     chan struct{} // a delivered message was acknowledged (cap 1)
	// persistent: the client's subscriptions are durable subscriptions of
	// its session (session.go), under prefix.
	persistent bool
	prefix     string

	// ackMu orders the checkpoints told to the broker (msg.SubAck) with the
	// connection's end: none is sent after Down.
	ackMu      sync.Mutex
	acksClosed bool

	mu        sync.Mutex
	stopped   bool
	flush     bool
	queue     []queued     // deliveries and notices for the writer, in the broker's order
	acks      []pendingAck // QoS 1 and 2 publishes in the order read, awaiting aerie
	subs      map[string]*subscription
	byName    map[msg.SubID]*subscription
	waiting   map[msg.SubID]chan string // subscribe answers: "" started, else the reason
	answers   map[answerKey]answer      // SUBACK / UNSUBACK codes for OnPacketEncode
	inflight  map[uint16]flight         // QoS 1 and 2 deliveries not yet acknowledged (qos2.go)
	ckpt      checkpoints               // persistent subscriptions' checkpoints (checkpoint.go)
	retainDue map[uint16][]retainGrant  // SUBSCRIBEs whose retained messages follow their SUBACK
	replay    sessionDeliveries         // what the session's previous connection delivered (qos2.go)
	nextPID   uint16

	aliases outAliases // the write goroutine's alone (alias.go)
}

// queued is one thing for the writer: an event delivered on subscription
// sub, or (ev nil) a notice that sub, durable, has received everything
// up to mark (msg.Progress, msg.Gap), which moves its checkpoint in turn.
type queued struct {
	ev       *msg.Event
	sub      msg.SubID
	mark     msg.Token
	retained *retainedMsg // a retained message for a new subscription (retain.go)
}

func msgSubID(s string) msg.SubID { return msg.SubID(s) }

type pendingAck struct {
	seq      uint64
	pid      uint16
	typ      byte         // PUBACK (QoS 1) or PUBREC (QoS 2)
	retain   *retainedMsg // a retained PUBLISH: kept once aerie acknowledges it
	done     bool
	code     byte
	reason   string
	closeV3  bool // a 3.1.1 client cannot be told: close the connection
	v3reason string
}

// subscription is one MQTT filter: one aerie subscription per pattern
// (durable in a persistent session).
type subscription struct {
	filter   string
	names    []msg.SubID
	patterns []string // the aerie patterns, names' order
	durable  bool
	qos      byte
	noLocal  bool
	rap      bool // MQTT 5 retain-as-published
	id       int  // MQTT 5 subscription identifier, 0 for none
	selector string
	// share: the share name of a shared subscription ($share/NAME/…),
	// whose events go to one member of a consumer group each
	// (docs/MQTT.md "Shared subscriptions"); never durable.
	share string
}

type answerKey struct {
	typ byte
	pid uint16
}

type answer struct {
	codes  []byte
	reason string
}

func newConn(s *Server, cl *mochi.Client) *Conn {
	return &Conn{
		s: s, cl: cl, v5: cl.Properties.ProtocolVersion >= 5, pubend: s.pubend(cl.ID),
		done: make(chan struct{}), ended: make(chan struct{}), flushed: make(chan struct{}),
		wake: make(chan struct{}, 1), quota: make(chan struct{}, 1),
		subs: map[string]*subscription{}, byName: map[msg.SubID]*subscription{},
		waiting: map[msg.SubID]chan string{}, answers: map[answerKey]answer{}, inflight: map[uint16]flight{},
		ckpt: newCheckpoints(), retainDue: map[uint16][]retainGrant{},
	}
}

func (c *Conn) String() string { return fmt.Sprintf("mqtt client %q (%s)", c.cl.ID, c.cl.Net.Remote) }

// Perms is the permissions of the user the client authenticated as (nil:
// the network has no users).
func (c *Conn) Perms() *auth.Perms { return c.perms }

// ClientID is the client id the MQTT client connected with.
func (c *Conn) ClientID() string { return c.cl.ID }

func signal(ch chan struct{}) {
	select {
	case ch <- struct{}{}:
	default:
	}
}

// Send takes an answer of the broker (shell.Net.ToClient): it never
// blocks. A subscriber that falls more than Options.Queue messages behind
// is disconnected, with the reason.
func (c *Conn) Send(m msg.Msg) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.stopped {
		return false
	}
	switch p := m.(type) { // the engine's pointer forms (gd deliveryMsg, pubAckMsg)
	case *msg.Delivery:
		m = *p
	case *msg.PubAck:
		m = *p
	}
	if c.watch { // the broker's own subscription to retained messages
		c.s.watchSent(m)
		return true
	}
	switch x := m.(type) {
	case msg.PubAck:
		c.answerPublish(x.Seq, 0, "")
	case msg.PubReject:
		c.answerPublish(x.Seq, packets.ErrImplementationSpecificError.Code, x.Reason)
	case msg.SubStarted:
		c.answerSubscribe(x.Sub, "")
	case msg.SubRejected:
		c.answerSubscribe(x.Sub, x.Reason)
	case msg.Delivery:
		if len(c.queue) >= c.s.opts.Queue {
			c.stopped = true
			go c.close(refuse(packets.ErrQuotaExceeded,
				fmt.Sprintf("subscriber too slow: more than %d messages queued", c.s.opts.Queue), 0))
			return false
		}
		c.queue = append(c.queue, queued{ev: x.Event, sub: x.Sub})
	case msg.Progress:
		c.queue = append(c.queue, queued{sub: x.Sub, mark: x.Token})
	case msg.Gap:
		// MQTT has no way to say "messages were discarded here": the
		// broker's log says it, and the checkpoint moves past them.
		c.s.log.Warn("MQTT subscription missed messages the network had discarded",
			"client", c.cl.ID, "sub", string(x.Sub), "pubend", string(x.Pubend), "from", x.From, "to", x.To)
		c.queue = append(c.queue, queued{sub: x.Sub, mark: msg.Token{x.Pubend: x.To}})
	default:
		return true
	}
	signal(c.wake)
	return true
}

// CloseWith ends the connection because of err, telling an MQTT 5 client
// reason.
func (c *Conn) CloseWith(err error, reason string) {
	go c.close(refuse(packets.ErrImplementationSpecificError, reason, 0))
}

// CloseFlush writes what is queued, then ends the connection (the broker
// is shutting down).
func (c *Conn) CloseFlush(reason string) {
	c.mu.Lock()
	c.flush = true
	c.mu.Unlock()
	signal(c.wake)
}

// close ends the connection with a DISCONNECT (MQTT 5) or by closing it
// (3.1.1, which has no server DISCONNECT).
func (c *Conn) close(r refusal) {
	if c.v5 {
		// DisconnectClient writes, then stops; a write stuck on a dead
		// peer is cut by the stop below.
		t := time.AfterFunc(2*time.Second, func() { c.cl.Stop(r) })
		defer t.Stop()
		_ = c.s.srv.DisconnectClient(c.cl, r.code)
	}
	c.cl.Stop(r)
}

// end is close from the read goroutine, which then returns the error so
// that the library stops reading.
func (c *Conn) end(r refusal) error {
	c.s.log.Info("ending MQTT connection", "client", c.cl.ID, "addr", c.cl.Net.Remote, "reason", r.code.Reason)
	c.close(r)
	return r
}

func (c *Conn) stop() {
	c.mu.Lock()
	c.stopped = true
	for name, ch := range c.waiting {
		close(ch)
		delete(c.waiting, name)
	}
	c.mu.Unlock()
	close(c.done)
}

// leave hands the session state back as the connection ends: what it
// delivered beyond the checkpoints stays for a persistent session's next
// connection; drop: the session ends with it.
func (c *Conn) leave(drop bool) {
	c.mu.Lock()
	sd := c.saveDeliveriesLocked()
	c.mu.Unlock()
	c.st.mu.Lock()
	if c.persistent {
		c.st.deliveries = sd
	}
	if c.st.owner == c {
		c.st.owner = nil
	}
	c.st.mu.Unlock()
	if drop {
		c.s.dropState(c.cl.ID, c.st)
	}
}

// publish maps one PUBLISH and hands it to the broker (the read
// goroutine).
func (c *Conn) publish(pk packets.Packet) error {
	qos := pk.FixedHeader.Qos
	if c.pubend == "" {
		return c.refusePublish(pk, refuse(packets.ErrImplementationSpecificError,
			fmt.Sprintf("broker %s hosts no pubend and lies in no pubend's tree: publish at a broker that does", c.s.opts.Broker), 0))
	}
	topic, err := Topic(pk.TopicName)
	if err != nil {
		return c.refusePublish(pk, refuse(packets.ErrTopicNameInvalid, err.Error(), 0))
	}
	if c.v5 && qos > 0 && !c.perms.MayPublish(topic) {
		// MQTT 5 has the code for it; otherwise the broker refuses, as
		// it refuses an aerie client.
		return c.refusePublish(pk, refuse(packets.ErrNotAuthorized, "not authorized to publish to "+topic, 0))
	}
	if r, fatal := checkPublishProps(&pk.Properties, pk.Payload); r != nil {
		if fatal {
			return *r
		}
		return c.refusePublish(pk, *r)
	}
	props, err := publishProps(&pk.Properties, qos, pk.FixedHeader.Retain)
	if err != nil {
		return c.refusePublish(pk, refuse(packets.ErrImplementationSpecificError, err.Error(), 0))
	}
	c.mu.Lock()
	full := qos > 0 && len(c.acks) >= receiveMaximum
	c.mu.Unlock()
	if full {
		return refuse(packets.ErrReceiveMaximum, fmt.Sprintf("more than %d QoS 1 and 2 publishes unacknowledged", receiveMaximum), 0)
	}
	p := msg.Publish{Pubend: c.pubend, Publisher: c.publisher, Topic: topic, Props: props, Payload: pk.Payload,
		NoAck: qos == 0} // QoS 0 waits for no PUBACK
	var keep *retainedMsg
	if pk.FixedHeader.Retain {
		keep = &retainedMsg{topic: pk.TopicName, payload: pk.Payload, props: props, qos: qos, published: time.Now().UnixMilli()}
		if qos == 0 && c.perms.MayPublish(topic) {
			c.s.retained.set(*keep) // nothing waits for aerie's answer
		}
	}
	if qos == 2 {
		return c.publish2(pk, p, keep)
	}
	seq, err := c.nextSeq()
	if err != nil {
		return c.errNotWritten(err)
	}
	p.Seq = seq
	if qos > 0 {
		c.mu.Lock()
		c.acks = append(c.acks, pendingAck{seq: p.Seq, pid: pk.PacketID, typ: packets.Puback, retain: keep})
		c.mu.Unlock()
	}
	c.s.opts.Host.Request(c.id, p)
	return nil
}

// refusePublish answers a publish aerie does not take: a PUBACK with the
// reason code (MQTT 5, QoS 1), in its place among the other acks; a
// DISCONNECT for an MQTT 5 QoS 0 publish; the end of a 3.1.1 connection,
// which has no other way to say no. It returns the refusal when the
// connection must end.
func (c *Conn) refusePublish(pk packets.Packet, r refusal) error {
	if !c.v5 || pk.FixedHeader.Qos == 0 {
		return r
	}
	typ := byte(packets.Puback)
	if pk.FixedHeader.Qos == 2 {
		typ = packets.Pubrec // the exchange ends there (MQTT 5 §4.13.2)
	}
	seq := c.st.nextSeq() // never sent to aerie
	c.mu.Lock()
	c.acks = append(c.acks, pendingAck{seq: seq, pid: pk.PacketID, typ: typ, done: true, code: r.code.Code, reason: r.code.Reason})
	c.mu.Unlock()
	signal(c.wake)
	c.s.log.Info("refused MQTT publish", "client", c.cl.ID, "topic", pk.TopicName, "reason", r.code.Reason)
	return nil
}

// answerPublish records aerie's answer to publish seq (mu held).
func (c *Conn) answerPublish(seq uint64, code byte, reason string) {
	found := false
	for i := range c.acks {
		a := &c.acks[i]
		if a.seq != seq || a.done {
			continue
		}
		// A QoS 2 publish resent before aerie answered is in the queue
		// twice, under one sequence number: both get the answer.
		found = true
		a.done, a.code, a.reason = true, code, reason
		if code != 0 && !c.v5 {
			a.closeV3 = true
		}
		if code == 0 && a.retain != nil {
			c.s.retained.set(*a.retain)
			a.retain = nil
		}
		if a.typ == packets.Pubrec {
			c.answered2(a.pid, seq, code)
		}
	}
	if !found && code != 0 {
		c.s.log.Info("aerie refused an MQTT QoS 0 publish", "client", c.cl.ID, "reason", reason)
	}
}

func (c *Conn) answerSubscribe(name msg.SubID, reason string) {
	if ch, ok := c.waiting[name]; ok {
		ch <- reason
		close(ch)
		delete(c.waiting, name)
	} else if reason != "" {
		// A restored session's subscription refused, or one taken over by
		// the client's newer connection: it delivers nothing more here.
		c.s.log.Warn("aerie refused an MQTT subscription", "client", c.cl.ID, "sub", string(name), "reason", reason)
		if sub := c.byName[name]; sub != nil {
			c.dropLocked(sub)
		}
	}
}

// subscribe puts the filters of one SUBSCRIBE in force (the read
// goroutine): it returns once aerie has answered for each, or the
// connection is gone, or Options.SubscribeWait has passed.
func (c *Conn) subscribe(pk packets.Packet) {
	codes := make([]byte, len(pk.Filters))
	var reasons []string
	selector := ""
	for _, u := range pk.Properties.User {
		if u.Key == SelectorProperty {
			selector = u.Val
		}
	}
	type pending struct {
		i   int
		sub *subscription
		chs []chan string
	}
	var waits []pending
	for i, f := range pk.Filters {
		qos := min(f.Qos, 2)
		share, plain, _, err := ShareFilter(f.Filter)
		var pats []string
		if err == nil {
			pats, err = Filter(plain)
		}
		if err == nil && share != "" && f.NoLocal {
			err = fmt.Errorf("%w: no local on a shared subscription is a protocol error [MQTT-3.8.3-4]", ErrUnmappable)
		}
		if err != nil {
			codes[i] = packets.ErrTopicFilterInvalid.Code
			if errors.Is(err, ErrShared) {
				codes[i] = packets.ErrSharedSubscriptionsNotSupported.Code
			}
			reasons = append(reasons, err.Error())
			continue
		}
		if pat, ok := c.subscribable(pats); !ok {
			codes[i] = packets.ErrNotAuthorized.Code // 3.1.1: 0x80, below
			err = fmt.Errorf("not authorized to subscribe to %s (filter %q)", pat, f.Filter)
			reasons = append(reasons, err.Error())
			continue
		}
		c.mu.Lock()
		old := c.subs[f.Filter]
		if old != nil && old.selector == selector && (!old.durable || old.qos == qos) {
			// MQTT replaces a subscription to the same filter: the aerie
			// subscriptions stay (nothing is lost), the options change.
			old.qos, old.noLocal, old.id, old.rap = qos, f.NoLocal, f.Identifier, f.RetainAsPublished
			c.retainDueLocked(pk.PacketID, f, old, false)
			c.mu.Unlock()
			codes[i] = qos
			continue
		}
		// from: a durable subscription granted a new QoS moves to a new
		// name (the QoS is in it), resuming where the old one's checkpoint
		// is; the old one ends once the new one holds the pubends back.
		var from []msg.Token
		var end []msg.SubID
		if old != nil {
			if old.durable && old.selector == selector {
				for _, n := range old.names {
					from = append(from, c.ckpt.ackedOf(n))
				}
			}
			end = c.dropLocked(old)
			if from == nil {
				c.mu.Unlock()
				c.unsubscribeAll(end)
				end = nil
				c.mu.Lock()
			}
		}
		sub := &subscription{filter: f.Filter, qos: qos, noLocal: f.NoLocal, rap: f.RetainAsPublished, id: f.Identifier, selector: selector,
			patterns: pats, durable: c.persistent && share == "", share: share}
		p := pending{i: i, sub: sub}
		for j := range pats {
			name := msg.SubID(fmt.Sprintf("%s#%d", f.Filter, j))
			if sub.durable {
				name = durableSubName(c.cl.ID, qos, j, f.Filter)
			}
			sub.names = append(sub.names, name)
			ch := make(chan string, 1)
			c.waiting[name] = ch
			p.chs = append(p.chs, ch)
		}
		c.subs[f.Filter] = sub
		for _, name := range sub.names {
			c.byName[name] = sub
		}
		c.retainDueLocked(pk.PacketID, f, sub, old == nil)
		c.mu.Unlock()
		for j, pat := range pats {
			m := msg.Subscribe{Sub: sub.names[j], Pattern: pat, Selector: selector, Durable: sub.durable}
			if sub.share != "" {
				m.Group = ShareGroup(sub.share, pats, j)
			}
			if j < len(from) && len(from[j]) > 0 {
				m.From = from[j]
			}
			c.s.opts.Host.Request(c.id, m)
		}
		c.unsubscribeAll(end)
		waits = append(waits, p)
		codes[i] = qos
	}
	timeout := time.NewTimer(c.s.opts.SubscribeWait)
	defer timeout.Stop()
	for _, p := range waits {
		for _, ch := range p.chs {
			select {
			case reason, ok := <-ch:
				if ok && reason != "" {
					codes[p.i] = packets.ErrImplementationSpecificError.Code
					reasons = append(reasons, fmt.Sprintf("%s: %s", p.sub.filter, reason))
					c.mu.Lock()
					end := c.dropLocked(p.sub)
					c.mu.Unlock()
					c.unsubscribeAll(end)
				}
			case <-timeout.C:
				c.s.log.Warn("MQTT subscription not yet in force; granted, it completes in the background",
					"client", c.cl.ID, "filter", p.sub.filter, "after", c.s.opts.SubscribeWait)
			case <-c.done:
			}
		}
	}
	if !c.v5 {
		for i, code := range codes {
			if code >= 0x80 {
				codes[i] = 0x80 // 3.1.1: Failure
			}
		}
	}
	for _, r := range reasons {
		c.s.log.Info("refused MQTT subscription", "client", c.cl.ID, "reason", r)
	}
	c.mu.Lock()
	c.answers[answerKey{packets.Suback, pk.PacketID}] = answer{codes: codes, reason: joinReasons(reasons)}
	c.mu.Unlock()
}

// subscribable checks the user's permissions for every pattern of a
// filter: ok, or the first pattern refused.
func (c *Conn) subscribable(pats []string) (string, bool) {
	for _, p := range pats {
		if !c.perms.MaySubscribe(p) {
			return p, false
		}
	}
	return "", true
}

func joinReasons(rs []string) string {
	if len(rs) == 0 {
		return ""
	}
	s := rs[0]
	for _, r := range rs[1:] {
		s += "; " + r
	}
	return s
}

// dropLocked forgets sub (mu held) and returns the aerie subscriptions to
// end: the caller asks the broker after unlocking, since the broker's loop
// may be waiting for mu (Send) while its inbox is full.
func (c *Conn) dropLocked(sub *subscription) []msg.SubID {
	if c.subs[sub.filter] == sub {
		delete(c.subs, sub.filter)
	}
	var end []msg.SubID
	for _, name := range sub.names {
		if c.byName[name] == sub {
			delete(c.byName, name)
			c.ckpt.forget(name)
			if ch, ok := c.waiting[name]; ok {
				close(ch) // its SUBSCRIBE stops waiting for it
				delete(c.waiting, name)
			}
			end = append(end, name)
		}
	}
	return end
}

func (c *Conn) unsubscribeAll(names []msg.SubID) {
	for _, name := range names {
		c.s.opts.Host.Request(c.id, msg.Unsubscribe{Sub: name})
	}
}

func (c *Conn) unsubscribe(pk packets.Packet) {
	codes := make([]byte, len(pk.Filters))
	var end []msg.SubID
	c.mu.Lock()
	for i, f := range pk.Filters {
		if sub := c.subs[f.Filter]; sub != nil {
			end = append(end, c.dropLocked(sub)...)
			codes[i] = packets.CodeSuccess.Code
		} else {
			codes[i] = packets.CodeNoSubscriptionExisted.Code
		}
	}
	c.answers[answerKey{packets.Unsuback, pk.PacketID}] = answer{codes: codes}
	c.mu.Unlock()
	c.unsubscribeAll(end)
}

func (c *Conn) takeAnswer(typ byte, pid uint16) (answer, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	k := answerKey{typ, pid}
	a, ok := c.answers[k]
	delete(c.answers, k)
	return a, ok
}

// delivered: the client acknowledged delivery pid (the read goroutine).
// A persistent subscription's checkpoint may move: the broker is told at
// once, so that a client that reconnects is not sent it again.
func (c *Conn) delivered(pid uint16) {
	c.mu.Lock()
	f, ok := c.inflight[pid]
	if ok && f.placeholder {
		c.mu.Unlock()
		return // completes with PUBCOMP (completed)
	}
	delete(c.inflight, pid)
	if ok && f.ref.sub != "" {
		c.ckpt.done(f.ref)
	}
	c.mu.Unlock()
	if ok && f.group.Sub != "" {
		c.s.opts.Host.Request(c.id, f.group) // the member's acknowledgement
	}
	if ok {
		signal(c.quota)
		if f.ref.sub != "" {
			c.flushCheckpoints()
		}
	}
}

// flushCheckpoints tells the broker the checkpoints that moved
// (msg.SubAck): it keeps them for the session (Gryphon DS §3).
func (c *Conn) flushCheckpoints() {
	if !c.persistent {
		return // no durable subscriptions: nothing to tell
	}
	c.ackMu.Lock()
	defer c.ackMu.Unlock()
	if c.acksClosed {
		return
	}
	c.mu.Lock()
	due := c.ckpt.take()
	c.mu.Unlock()
	for _, sub := range slices.Sorted(maps.Keys(due)) {
		c.s.opts.Host.Request(c.id, msg.SubAck{Sub: sub, Token: due[sub]})
	}
}

// closeCheckpoints tells the broker the last checkpoints, before the
// connection's Down: later ones would reach a session already away.
func (c *Conn) closeCheckpoints() {
	c.flushCheckpoints()
	c.ackMu.Lock()
	c.acksClosed = true
	c.ackMu.Unlock()
}

// window is how many QoS 1 deliveries may be unacknowledged: the client's
// Receive Maximum (MQTT 5), capped.
func (c *Conn) window() int {
	w := maxOutstanding
	if rm := int(c.cl.Properties.Props.ReceiveMaximum); c.v5 && rm > 0 {
		w = min(w, rm)
	}
	return w
}

// writeLoop writes the connection's acks, in the order their publishes
// were read, and its deliveries, in the order aerie delivered them.
func (c *Conn) writeLoop() {
	window := c.window()
	for {
		select {
		case <-c.wake:
		case <-c.done:
			return
		}
		for {
			if !c.writeAcks() {
				return
			}
			c.mu.Lock()
			items := c.queue
			c.queue = nil
			flush := c.flush
			c.mu.Unlock()
			if len(items) == 0 {
				if flush {
					close(c.flushed)
					c.close(refuse(packets.ErrServerShuttingDown, "broker shutting down", 0))
					return
				}
				break
			}
			for _, it := range items {
				switch {
				case it.retained != nil:
					if !c.deliverRetained(it.retained, string(it.sub), window) {
						return
					}
				case it.ev == nil:
					c.notice(it.sub, it.mark)
				case !c.deliver(it.ev, it.sub, window):
					return
				}
			}
			c.flushCheckpoints()
		}
	}
}

// writeAcks writes the PUBACKs now due: those at the head of the queue
// that aerie has answered (false: the connection is gone).
func (c *Conn) writeAcks() bool {
	c.mu.Lock()
	n := 0
	for n < len(c.acks) && c.acks[n].done {
		n++
	}
	due := slices.Clone(c.acks[:n])
	c.acks = c.acks[n:]
	c.mu.Unlock()
	for _, a := range due {
		if a.closeV3 {
			c.s.log.Info("ending MQTT 3.1.1 connection after aerie refused its publish", "client", c.cl.ID, "reason", a.reason)
			c.close(refuse(packets.ErrImplementationSpecificError, a.reason, 0))
			return false
		}
		ack := packets.Packet{FixedHeader: packets.FixedHeader{Type: a.typ}, PacketID: a.pid, ReasonCode: a.code}
		if a.code >= 0x80 {
			ack.Properties.ReasonString = a.reason
		}
		if err := c.cl.WritePacket(ack); err != nil {
			return false
		}
	}
	return true
}

// notice: durable subscription name has received everything up to tok
// (the writer, in the broker's order): its checkpoint may move.
func (c *Conn) notice(name msg.SubID, tok msg.Token) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if sub := c.byName[name]; sub == nil || !sub.durable {
		return
	}
	for _, p := range slices.Sorted(maps.Keys(tok)) {
		c.ckpt.add(name, p, tok[p], true)
	}
}

// deliver writes one event to the client under subscription name, at
// the lower of its QoS and the subscription's, waiting (while still
// writing acks) for room in the window of unacknowledged deliveries. On a
// durable subscription every event counts towards its checkpoint: done at
// once when there is nothing to wait for, at its PUBACK (QoS 1) or PUBCOMP
// (QoS 2) otherwise. An event the session's previous connection had
// delivered is not delivered again, or goes with its old packet id.
func (c *Conn) deliver(ev *msg.Event, name msg.SubID, window int) bool {
	c.mu.Lock()
	sub := c.byName[name]
	var done, pending bool
	var old sent
	if sub != nil && sub.durable {
		done, old, pending = c.replayedLocked(name, ev)
	}
	c.mu.Unlock()
	if sub == nil {
		return true // unsubscribed meanwhile
	}
	topic, ok := TopicOf(ev.Topic)
	if done || !ok || (sub.noLocal && ev.Publisher == c.publisher) || !MatchesDollar(sub.filter, topic) {
		// Not for this client: delivered by the session's previous
		// connection, no MQTT form (docs/MQTT.md), its own, or a $ topic
		// under a wildcard first level [MQTT-4.7.2-1].
		c.passed(sub, name, ev)
		return true
	}
	interval, published := eventExpiry(ev.Props), ev.Tick.Millis()
	if interval > 0 && !pending && c.expired(interval, published) {
		// Its Message Expiry Interval has passed: not delivered
		// [MQTT-3.3.2-5], and done for the checkpoint.
		c.passed(sub, name, ev)
		return true
	}
	qos := min(sub.qos, eventQoS(ev))
	pk := packets.Packet{FixedHeader: packets.FixedHeader{Type: packets.Publish, Qos: qos, Retain: sub.rap && retainedEvent(ev)},
		TopicName: topic, Payload: ev.Payload}
	if c.v5 {
		pk.Properties = mqttProps(ev.Props, ev.Payload)
		if sub.id > 0 {
			pk.Properties.SubscriptionIdentifier = []int{sub.id}
		}
	}
	if pending {
		if c.retake(&pk, sub, name, ev, old) {
			return true // the client has it (PUBREC): PUBREL went again
		}
		// Its delivery had begun: it goes again, expired or not, with
		// what is left of its interval, at least 1 s.
		if c.v5 && interval > 0 {
			left, _ := sendExpiry(interval, published, time.Now().UnixMilli())
			pk.Properties.MessageExpiryInterval = max(left, 1)
		}
	} else if qos > 0 && !c.awaitRoom(&pk, sub, name, ev, window) {
		return false
	} else if !c.setExpiry(&pk, interval, published) {
		// It expired while waiting for room in the window.
		if qos > 0 {
			c.delivered(pk.PacketID)
		} else {
			c.passed(sub, name, ev)
		}
		return true
	} else if qos == 2 && sub.durable {
		// Durable before the PUBLISH: after a crash it goes again with
		// this packet id (sessionfile.go).
		if err := c.recordOut(deliveryKey{name, ev.Pubend, ev.Tick}, pk.PacketID); err != nil {
			go c.close(c.errNotWritten(err))
			return false
		}
	}
	if err := c.writePublish(pk); err != nil {
		if err == packets.ErrPacketTooLarge {
			// Larger than the client takes: skipped, as MQTT 5 says.
			if qos > 0 {
				c.delivered(pk.PacketID)
			} else {
				c.passed(sub, name, ev)
			}
			return true
		}
		return false
	}
	if qos == 0 {
		c.passed(sub, name, ev)
	}
	return true
}

// writePublish writes a delivery's PUBLISH (the write goroutine only),
// with a topic alias where the client takes them.
func (c *Conn) writePublish(pk packets.Packet) error {
	topic := pk.TopicName
	id := c.aliases.apply(&pk)
	err := c.cl.WritePacket(pk)
	if err == nil {
		c.aliases.commit(topic, id)
	}
	return err
}

// setExpiry puts into pk the Message Expiry Interval left of a message
// published at publishedMs with interval, as its PUBLISH goes out
// [MQTT-3.3.2-6]; false: it has passed, and the message is not delivered
// [MQTT-3.3.2-5].
func (c *Conn) setExpiry(pk *packets.Packet, interval uint32, publishedMs int64) bool {
	if interval == 0 {
		return true // no clock read for the common case
	}
	left, ok := sendExpiry(interval, publishedMs, time.Now().UnixMilli())
	if ok && c.v5 {
		pk.Properties.MessageExpiryInterval = left
	}
	return ok
}

// expired reports whether a message published at publishedMs with
// interval has expired now [MQTT-3.3.2-5].
func (c *Conn) expired(interval uint32, publishedMs int64) bool {
	_, ok := sendExpiry(interval, publishedMs, time.Now().UnixMilli())
	return !ok
}

// passed: ev needs no acknowledgement from the client.
func (c *Conn) passed(sub *subscription, name msg.SubID, ev *msg.Event) {
	if sub.share != "" {
		// Done for the group too: written at QoS 0, or not for MQTT.
		c.s.opts.Host.Request(c.id, msg.SubAck{Sub: name, Token: msg.Token{ev.Pubend: ev.Tick}})
		return
	}
	if !sub.durable {
		return
	}
	c.mu.Lock()
	if c.byName[name] == sub {
		c.ckpt.add(name, ev.Pubend, ev.Tick, true)
	}
	c.mu.Unlock()
}

// awaitRoom waits for room in the window, writing acks meanwhile, and
// gives pk a packet id (false: the connection is gone).
func (c *Conn) awaitRoom(pk *packets.Packet, sub *subscription, name msg.SubID, ev *msg.Event, window int) bool {
	for {
		c.mu.Lock()
		room := len(c.inflight) < window
		if room {
			for c.nextPID++; c.nextPID == 0 || c.hasInflight(c.nextPID); c.nextPID++ {
			}
			pk.PacketID = c.nextPID
			f := flight{qos: pk.FixedHeader.Qos}
			if ev != nil && sub.durable && c.byName[name] == sub {
				f.ref = c.ckpt.add(name, ev.Pubend, ev.Tick, false)
			}
			if ev != nil && sub.share != "" {
				// Acknowledged to the group at its PUBACK (QoS 1) or
				// PUBCOMP (QoS 2); if the connection ends first, the
				// group gives it to another member.
				f.group = msg.SubAck{Sub: name, Token: msg.Token{ev.Pubend: ev.Tick}}
			}
			c.inflight[c.nextPID] = f
		}
		c.mu.Unlock()
		if room {
			return true
		}
		select {
		case <-c.quota:
		case <-c.wake:
			if !c.writeAcks() {
				return false
			} // the deliveries queued meanwhile wait for writeLoop
		case <-c.done:
			return false
		}
	}
}

// retake gives an event the previous connection had sent at QoS 1 or 2
// its packet id back: resent with DUP if the client had not received it
// (false: write pk), its mark put in place otherwise (true: nothing to
// write, the PUBREL went at the session's start).
func (c *Conn) retake(pk *packets.Packet, sub *subscription, name msg.SubID, ev *msg.Event, old sent) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	f := flight{qos: old.qos, rec: old.rec}
	if c.byName[name] == sub {
		f.ref = c.ckpt.add(name, ev.Pubend, ev.Tick, false)
	}
	c.inflight[old.pid] = f
	pk.PacketID, pk.FixedHeader.Qos, pk.FixedHeader.Dup = old.pid, old.qos, true
	return old.rec
}

func (c *Conn) hasInflight(pid uint16) bool {
	_, ok := c.inflight[pid]
	return ok
}
