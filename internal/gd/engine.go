// Package gd is one broker's guaranteed-delivery engine over all the pubends
// whose trees pass through it (seed 000 §3, tree version): pubends it hosts
// (PHB role), istreams and ostreams joined by filter edges (IB role), and
// local subscribers fed at the doubt horizon (SHB role). One broker may hold
// any mix of roles.
//
// The engine is a pure state machine in the style of etcd's raft package:
// Step feeds it one input with the current time, Ready returns what it wants
// done (records to persist, messages to send, events to hand to clients), and
// Advance tells it that a Ready's records are durable. It starts no
// goroutines, reads no clock and touches no socket or file; the broker
// runtime and the simulator drive the same code.
package gd

import (
	"fmt"
	"slices"
	"time"

	"github.com/aerie-mq/aerie/internal/match"
	"github.com/aerie-mq/aerie/internal/msg"
	"github.com/aerie-mq/aerie/internal/stream"
	"github.com/aerie-mq/aerie/internal/tick"
)

// Route places this broker in one pubend's tree: Up is the neighbouring
// cell knowledge comes from ("" when the pubend is hosted here) and Down the
// cells it flows to. Without cells (New), a cell is the broker of that id.
type Route struct {
	Pubend msg.PubendID
	Up     msg.NodeID
	Down   []msg.NodeID
	// Retain, when RetainSet, is the max_retain of the broker that hosts
	// the pubend, where this broker's own Config.MaxRetain may differ: a
	// downstream silent for longer no longer holds the pubend here
	// (gone.go).
	Retain    time.Duration
	RetainSet bool
}

// Input is one thing that happened to the engine.
type Input interface{ isInput() }

// Recv is a message from neighbour From. Step also takes a *Recv (and a
// *Local) and keeps neither: a runtime that reuses one input struct for
// every message boxes nothing per message.
type Recv struct {
	From msg.NodeID
	Msg  msg.Msg
}

// Local is a request from a client of this broker (Publish, Subscribe,
// Unsubscribe).
type Local struct{ Msg msg.Msg }

// Tick is the periodic timer input; call it every Config.TickInterval.
type Tick struct{}

// LinkUp says a connection to neighbour Peer was (re)established. Incarnation
// identifies the peer's process lifetime (its boot nonce, exchanged in the
// connection handshake): a change means the peer restarted and lost its
// soft state.
type LinkUp struct {
	Peer        msg.NodeID
	Incarnation uint64
}

func (Recv) isInput()   {}
func (Local) isInput()  {}
func (Tick) isInput()   {}
func (LinkUp) isInput() {}

// Ready is what the engine asks the runtime to do (docs/ARCHITECTURE.md "The core contract").
type Ready struct {
	// Persist: records to append and fsync. Advance must follow once they
	// are durable; until then no further Ready carries records.
	Persist []msg.Record
	// Send: messages to neighbours, in order.
	Send []msg.Envelope
	// ToClients: deliveries and answers to local clients, in order.
	ToClients []msg.Msg
	// ToClientsAfterPersist: publish acks, to release only after the fsync
	// of this Ready's Persist.
	ToClientsAfterPersist []msg.Msg
	// Fetch: logged events to read back from the event log, answered with
	// a Fetched input (see cache.go). Independent of Persist and Advance.
	Fetch []Fetch
}

// IsEmpty reports whether the Ready asks for nothing.
func (rd *Ready) IsEmpty() bool {
	return len(rd.Persist) == 0 && len(rd.Send) == 0 && len(rd.ToClients) == 0 && len(rd.ToClientsAfterPersist) == 0 && len(rd.Fetch) == 0
}

// Engine is one broker's GD state.
type Engine struct {
	id  msg.NodeID
	cfg Config
	now tick.Time
	mut Mutation

	streams  []*pstream // sorted by pubend id: deterministic output order
	byPubend map[msg.PubendID]*pstream
	// lastPS is the stream pstreamOf found last: per event the engine asks
	// for one pubend again and again (a run of publishes, a knowledge
	// run), and a compare of its name is cheaper than a hash.
	lastPS *pstream
	ups    []msg.NodeID // members of every upstream cell, sorted
	// subsGen counts subscriptions coming into force (resync.go).
	subsGen uint64

	// Cells (cells.go): cell of each broker listed in a multi-broker cell,
	// members of those cells, this broker's cell and its other members, and
	// which neighbours' links are up.
	cellOf  map[msg.NodeID]msg.NodeID
	members map[msg.NodeID][]msg.NodeID
	myCell  msg.NodeID
	peers   []msg.NodeID
	live    map[msg.NodeID]bool
	downs   map[msg.NodeID]*downstream
	ls      linkStatusState // what this broker reaches, and its neighbours (linkstatus.go)

	up    upSummary                  // the union reported upstream (summary.go)
	edges map[msg.NodeID]*match.Edge // per downstream cell: its clauses, versioned
	// subs: local subscriptions in arrival order; an unsubscribed one
	// leaves a nil hole (subHoles of them), compacted once they are half
	// the list, so that ending 100 000 subscriptions is not quadratic.
	subs     []*subscription
	subHoles int
	// totals are the subscriptions in uniform total order (total.go).
	totals  []*subscription
	subByID map[msg.SubID]*subscription
	// index finds the local subscriptions an event matches without
	// testing them all (issue 4's matching engine); slots are its ids.
	index    *match.Index
	bySlot   map[uint64]*subscription
	nextSlot uint64
	matched  []uint64 // scratch for deliver

	delta       tick.RangeSet // scratch: ticks one step made known, reused
	pieceDelta  tick.RangeSet // scratch: ticks one piece of a KnowledgeRun made known
	runs        runScratch    // coalescing a Ready's Knowledge into runs (coalesce.go)
	out         Ready
	queuedAfter []msg.Msg
	queuedRecs  []msg.Record
	// Batches handed out for persisting and made durable, counted (at
	// most Config.PersistWindow apart), and the sends that wait for one
	// of them (sendAfterPersist).
	batchesOut, batchesDone uint64
	heldSends               []heldSend
	// spare holds the slices of the batch last made durable (Persist,
	// ToClientsAfterPersist), reused for the next batch; sendHint and
	// clientHint size a Ready's Send and ToClients by the last ones. Growing
	// them afresh per Ready cost allocations per event.
	spare                Ready
	sendHint, clientHint int
	kblock               []msg.Knowledge // see knowledgeMsg
	dblock               []msg.Delivery  // see deliveryMsg
	ablock               []msg.PubAck    // see pubAckMsg
	keptTail             []cached        // scratch of evictAboveDelivery
	stats                Stats
	shedding             bool          // the caches' budgets are 0 (shed.go)
	dur                  durableEngine // durable subscriptions (durable.go, replay.go)
}

// upAsk is the oldest request for a pubend that this broker sent up to one
// member of the upstream cell and has not seen answered (cells.go askUp).
type upAsk struct {
	to   msg.NodeID
	at   tick.Time
	open bool
}

// pstream is everything this broker holds for one pubend.
type pstream struct {
	id msg.PubendID
	up msg.NodeID // upstream cell ("" when hosted here)
	// retain is the pubend host's max_retain (Route.Retain, gone.go).
	retain time.Duration
	// rs is the resync out at a subend whose upstream's L passed its
	// delivery point (resync.go); nil when none.
	rs *resync
	// lastFrom is the upstream member that last sent knowledge of this
	// pubend or answered a request for it: nacks and requests go to it
	// (seed 000 §3.1; cells.go askUp).
	lastFrom msg.NodeID
	ask      upAsk // the request to lastFrom not yet answered
	// totalAsked: the tick up to which a held total-order event made this
	// subend curious (total.go askTotal); asked once, repeated by NRT.
	totalAsked tick.Tick
	pub        *stream.Pubend // non-nil when hosted here
	in         stream.Istream
	outs       []*stream.Ostream
	sub        stream.Subend
	subs       map[*subscription]bool // local subscriptions (started or pending)

	delivered tick.Tick // local delivery decided up to here (the DH delivered)
	published uint64    // pubend: events announced since start (dashboards' rates)
	dhMovedAt tick.Time
	cache     payloadCache  // pubend: payloads in memory (cache.go)
	retained  retainedBytes // pubend: bytes of the events not released (retainbytes.go)
	// versionSeq numbers the filter versions a pubend logs (cells.go).
	versionSeq uint64
	snapMemo   map[versionKey]*msg.FilterVersion // Snapshot's records (snapshot.go)
	ackSent    tick.Tick
	ackSentAt  tick.Time
	// vouchedIn is the highest final prefix upstream sent: vouched for
	// this broker's whole subtree (vouch.go).
	vouchedIn tick.Tick
	// unvouchedSent is the unvouched top of the last ack sent: an ack goes
	// up again when its clean part grew (vouch.go cleanerAck).
	unvouchedSent tick.Tick
	subAsk        subAsk    // local subscriptions asking this pubend for their start (subscribe.go)
	aeNext        tick.Time // pubend: next AckExpected allowed
	aeBackoff     tick.Time // pubend: current AckExpected repeat interval
	rel           release   // release protocol (release.go)
	cc            ccStream  // congestion control (congestion.go)
}

type subscription struct {
	pos     int    // in Engine.subs
	slot    uint64 // id in Engine.index
	id      msg.SubID
	pat     match.Pattern
	sel     *match.Selector // nil: no selector
	start   map[msg.PubendID]tick.Tick
	pending map[msg.PubendID]tick.Time // SubReq last sent
	started bool
	dur     *durableState // durable, or with a start token (durable.go); else nil
	total   *totalOrder   // uniform total order across pubends (total.go); else nil
}

// New returns the engine of broker id with its place in every pubend's
// tree, in a network where every broker is a cell of its own.
func New(id msg.NodeID, cfg Config, routes []Route) (*Engine, error) {
	return NewWithCells(id, cfg, routes, nil)
}

// init builds the streams of every route; Route.Up and Route.Down name
// cells (cells.go).
func (e *Engine) init(cfg Config, routes []Route) error {
	if err := cfg.Validate(); err != nil {
		return err
	}
	id := e.id
	e.cfg = cfg
	e.byPubend = map[msg.PubendID]*pstream{}
	e.downs = map[msg.NodeID]*downstream{}
	e.subByID = map[msg.SubID]*subscription{}
	e.index = match.NewIndex()
	e.bySlot = map[uint64]*subscription{}
	for _, r := range routes {
		if _, dup := e.byPubend[r.Pubend]; dup {
			return fmt.Errorf("gd: broker %s: pubend %s routed twice", id, r.Pubend)
		}
		if r.Up == e.myCell {
			return fmt.Errorf("gd: broker %s: pubend %s: upstream is its own cell %s", id, r.Pubend, r.Up)
		}
		ps := &pstream{id: r.Pubend, up: r.Up, retain: cfg.MaxRetain}
		if r.RetainSet {
			ps.retain = r.Retain
		}
		if r.Up == "" {
			ps.pub = stream.NewPubend(r.Pubend, cfg.DedupWindow)
			ps.cache.overhead = pubendCacheOverhead
		} else {
			for _, m := range e.membersOf(r.Up) {
				if !slices.Contains(e.ups, m) {
					e.ups = append(e.ups, m)
				}
			}
		}
		down := slices.Clone(r.Down)
		slices.Sort(down)
		for _, d := range down {
			if d == e.myCell || d == r.Up {
				return fmt.Errorf("gd: broker %s: pubend %s: bad downstream %s", id, r.Pubend, d)
			}
			ps.outs = append(ps.outs, &stream.Ostream{Down: d, Fresh: r.Up != ""})
			for _, m := range e.membersOf(d) {
				if e.downs[m] == nil {
					e.downs[m] = &downstream{}
				}
			}
		}
		e.initCC(ps)
		if ps.pub == nil {
			ps.in.Unobserved = func(t tick.Tick, ev *msg.Event) bool { return !e.wanted(ps, t, ev) }
		}
		e.streams = append(e.streams, ps)
		e.byPubend[r.Pubend] = ps
	}
	slices.SortFunc(e.streams, func(a, b *pstream) int { return cmpStr(string(a.id), string(b.id)) })
	slices.Sort(e.ups)
	e.initLinkStatus()
	return nil
}

// pstreamOf returns the stream of pubend id, nil if this broker has none.
// Streams are made once, in New, so a found one never goes stale.
func (e *Engine) pstreamOf(id msg.PubendID) *pstream {
	if ps := e.lastPS; ps != nil && ps.id == id {
		return ps
	}
	ps := e.byPubend[id]
	if ps != nil {
		e.lastPS = ps
	}
	return ps
}

func cmpStr(a, b string) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// ID returns the broker's id.
func (e *Engine) ID() msg.NodeID { return e.id }

// Step feeds one input observed at local time now.
func (e *Engine) Step(now tick.Time, in Input) error {
	if now > e.now {
		e.now = now
	}
	switch in := in.(type) {
	case Recv:
		return e.recv(in.From, in.Msg)
	case *Recv: // a caller's reused input: nothing boxed per message
		return e.recv(in.From, in.Msg)
	case Local:
		return e.localRequest(in.Msg)
	case *Local:
		return e.localRequest(in.Msg)
	case Tick:
		e.tick()
		e.tickRelease()
		e.tickDurable()
		if len(e.totals) > 0 {
			e.releaseTotal() // delivery points also move by release and acks
			e.askTotal()     // nacked at the next tick's scan
		}
	case LinkUp:
		e.linkUp(in.Peer, in.Incarnation)
		e.linkStatusOnUp(in.Peer)
	case LinkDown:
		e.live[in.Peer] = false
		e.linkStatusOnDown(in.Peer)
		e.nacksLost(in.Peer)
	case Fetched:
		e.onFetched(in)
	case ReleaseFloor:
		return e.setReleaseFloor(in)
	case Shed:
		e.shed(in.On)
	default:
		return fmt.Errorf("gd: unknown input %T", in)
	}
	return nil
}

func (e *Engine) recv(from msg.NodeID, m msg.Msg) error {
	if e.cfg.BestEffort {
		switch m := m.(type) {
		case msg.Knowledge:
			e.onKnowledgeBestEffort(from, m)
			return nil
		case *msg.Knowledge:
			e.onKnowledgeBestEffort(from, *m)
			return nil
		case *msg.KnowledgeRun:
			e.onKnowledgeRunBestEffort(from, m)
			return nil
		case msg.KnowledgeRun:
			e.onKnowledgeRunBestEffort(from, &m)
			return nil
		case msg.Nack, msg.Ack, msg.AckExpected, msg.Resync:
			return nil // none are sent in this mode
		}
	}
	switch m := m.(type) {
	case msg.Relay:
		return e.onRelay(from, m)
	case msg.Knowledge:
		e.onKnowledge(from, m)
	case *msg.Knowledge: // as wire.Decode returns it
		e.onKnowledge(from, *m)
	case *msg.KnowledgeRun:
		e.onKnowledgeRun(from, m)
	case msg.KnowledgeRun:
		e.onKnowledgeRun(from, &m)
	case msg.Nack:
		e.onNack(from, m)
	case msg.Ack:
		e.onAck(from, m)
	case msg.AckExpected:
		e.onAckExpected(from, m)
	case msg.Resync:
		e.onResync(from, m)
	case msg.Summary:
		e.onSummary(from, m)
	case msg.SummaryDelta:
		e.onSummaryDelta(from, m)
	case msg.SubReq:
		e.onSubReq(from, m)
	case msg.SubReply:
		e.onSubReply(from, m)
	case msg.LinkStatus:
		e.onLinkStatus(from, m)
	case msg.Refetch:
		e.onRefetch(from, m)
	case msg.Payloads:
		e.onPayloads(from, m)
	case msg.Replay:
		e.onReplay(from, m)
	case msg.ReplayData:
		e.onReplayData(from, m)
	case msg.DCQ:
		if e.ccOn() {
			e.onDCQ(from, m)
		}
	case msg.UCA:
		if e.ccOn() {
			e.onUCA(from, m)
		}
	default:
		return fmt.Errorf("gd: broker %s: unexpected message %T from %s", e.id, m, from)
	}
	return nil
}

// HasReady reports whether Ready would return something.
func (e *Engine) HasReady() bool {
	return len(e.out.Send) > 0 || len(e.out.ToClients) > 0 || len(e.out.Fetch) > 0 || e.batchReady()
}

// batchReady reports whether the queued records may go out as a batch:
// some are queued and the persist window has room.
func (e *Engine) batchReady() bool {
	return len(e.queuedRecs) > 0 && e.batchesOut-e.batchesDone < uint64(max(e.cfg.PersistWindow, 1))
}

// PersistWindow returns how many batches may be out for persisting at
// once (Config.PersistWindow, at least 1).
func (e *Engine) PersistWindow() int { return max(e.cfg.PersistWindow, 1) }

// Ready returns the pending work and clears it. Records (and the acks that
// wait for them) are handed out in batches, at most Config.PersistWindow of
// them not yet made durable (one by default): while the window is full,
// new records queue up and go out together in the next batch — group
// commit (docs/ARCHITECTURE.md "The core contract").
//
// A Ready's Persist and ToClientsAfterPersist are valid until its Advance
// returns: the engine then reuses their memory. Send and ToClients are the
// caller's (harnesses step engines from inside their loops over Send).
func (e *Engine) Ready() Ready {
	rd := e.out
	e.out = Ready{}
	if n := len(rd.Send); n > 0 {
		e.sendHint = n
		rd.Send = e.coalesce(rd.Send)
	}
	if n := len(rd.ToClients); n > 0 {
		e.clientHint = n
	}
	if e.batchReady() {
		rd.Persist, rd.ToClientsAfterPersist = e.queuedRecs, e.queuedAfter
		e.queuedRecs, e.queuedAfter = reuse(e.spare.Persist), reuse(e.spare.ToClientsAfterPersist)
		e.spare.Persist, e.spare.ToClientsAfterPersist = nil, nil
		e.batchesOut++
	}
	return rd
}

// reuse empties a slice for reuse, dropping what it referenced.
func reuse[T any](s []T) []T {
	clear(s)
	return s[:0]
}

// Advance tells the engine that rd (from Ready) was carried out: its records
// are durable. Only then do logged events flow downstream. Batches are
// made durable in the order Ready handed them out.
func (e *Engine) Advance(rd Ready) {
	if len(rd.Persist) == 0 {
		return
	}
	if e.batchesDone == e.batchesOut {
		panic(fmt.Sprintf("gd: broker %s: Advance of a batch that was not handed out", e.id))
	}
	e.batchesDone++
	defer func() { e.spare.Persist, e.spare.ToClientsAfterPersist = rd.Persist, rd.ToClientsAfterPersist }()
	e.releaseHeld()
	recs := rd.Persist
	for i := 0; i < len(recs); {
		r := recs[i]
		ps := e.pstreamOf(r.Pubend)
		if ps == nil || ps.pub == nil || r.Event == nil {
			if ps != nil && ps.pub != nil {
				ps.pub.HWM = max(ps.pub.HWM, r.HWM)
			}
			i++
			continue
		}
		j := i + 1
		for j < len(recs) && recs[j].Event != nil && recs[j].Pubend == r.Pubend {
			j++
		}
		e.announceDurable(ps, recs[i:j])
		i = j
	}
	for _, ps := range e.streams {
		if ps.pub != nil && ps.cache.bytes > e.cacheBudget(ps) {
			e.evict(ps)
		}
	}
}

func (e *Engine) send(to msg.NodeID, m msg.Msg) {
	if e.out.Send == nil {
		e.out.Send = make([]msg.Envelope, 0, max(e.sendHint, 4))
	}
	e.out.Send = append(e.out.Send, msg.Envelope{From: e.id, To: to, Msg: m})
}

// heldSend is a message that leaves once batch `after` is durable.
type heldSend struct {
	after uint64
	env   msg.Envelope
}

// sendAfterPersist sends m once every record made so far is durable: the
// ones queued (they go out in the next batch) and the batch being
// persisted. A promise about what the log holds must not outrun the log:
// a pubend that answers a subscription before the filter version that
// admits it is durable could restart, or a replicated cell elect a leader,
// without that version, and render ticks above the promised start under
// a filter that lacks the subscription (docs/CONCEPTS.md "The knowledge graph", P2; Gryphon GD,
// ICDCS 2000 §3: persist before acknowledging).
func (e *Engine) sendAfterPersist(to msg.NodeID, m msg.Msg) {
	after := e.batchesOut
	if len(e.queuedRecs) > 0 {
		after++ // the batch that will carry them
	}
	if after <= e.batchesDone {
		e.send(to, m)
		return
	}
	e.heldSends = append(e.heldSends, heldSend{after: after, env: msg.Envelope{From: e.id, To: to, Msg: m}})
}

// releaseHeld sends the held messages whose batch is now durable, in the
// order they were made.
func (e *Engine) releaseHeld() {
	n := 0
	for _, h := range e.heldSends {
		if h.after > e.batchesDone {
			break // later ones wait for later batches
		}
		e.send(h.env.To, h.env.Msg)
		n++
	}
	e.heldSends = append(e.heldSends[:0], e.heldSends[n:]...)
}

func (e *Engine) toClient(m msg.Msg) {
	if e.out.ToClients == nil {
		e.out.ToClients = make([]msg.Msg, 0, max(e.clientHint, 4))
	}
	e.out.ToClients = append(e.out.ToClients, m)
}

// isSubend reports whether ps originates nacks here: it feeds local
// subscribers, or it is a leaf of the pubend's tree.
func (ps *pstream) isSubend() bool {
	return ps.pub == nil && (len(ps.subs) > 0 || len(ps.outs) == 0)
}

// outFrom returns the ostream towards the cell of downstream broker n.
func (e *Engine) outFrom(ps *pstream, n msg.NodeID) *stream.Ostream {
	return ps.out(e.cellOfNode(n))
}

func (ps *pstream) out(to msg.NodeID) *stream.Ostream {
	for _, o := range ps.outs {
		if o.Down == to {
			return o
		}
	}
	return nil
}
