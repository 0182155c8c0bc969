// Package broker is the runtime shell around the pure GD engine: one
// goroutine (Run) owns the engine and drives it with real time, the event
// log on disk and TCP connections. Connection readers and the fsync run in
// goroutines owned by the Node; they talk to the loop through channels, so
// the protocol itself never needs a lock (DESIGN.md §3).
//
// Crash-only: a kill -9 at any instant is safe, because a publish is acked
// only after the fsync of its record and everything else is soft state that
// neighbours rebuild by nacking. SIGTERM (ctx cancelled) stops accepting,
// finishes the fsync in flight and closes.
package broker

import (
	"context"
	"errors"
	"fmt"
	"hash/fnv"
	"log/slog"
	"net"
	"path/filepath"
	"slices"
	"sort"
	"sync"
	"time"

	"github.com/hashicorp/memberlist"

	"github.com/aerie-mq/aerie/internal/eventlog"
	"github.com/aerie-mq/aerie/internal/gd"
	"github.com/aerie-mq/aerie/internal/member"
	"github.com/aerie-mq/aerie/internal/member/mlist"
	"github.com/aerie-mq/aerie/internal/msg"
	"github.com/aerie-mq/aerie/internal/retention"
	"github.com/aerie-mq/aerie/internal/tick"
	"github.com/aerie-mq/aerie/internal/transport"
	"github.com/aerie-mq/aerie/internal/vfs"
)

// Options configure one broker.
type Options struct {
	ID     msg.NodeID
	Routes []gd.Route // Up and Down name cells
	// Cells lists the brokers of every cell whose id is not that of its
	// only broker (nil: every broker is its own cell). See gd/cells.go.
	Cells gd.Cells
	GD    gd.Config
	// Listen is the broker-to-broker address; Clients the client address
	// (either may be empty).
	Listen, Clients string
	// Upstreams maps each neighbour this broker dials to its address:
	// every member of its upstream cells, and the members of its own cell
	// whose ids sort after its own. The others dial it.
	Upstreams map[msg.NodeID]string
	// DataDir holds the event log of the pubends hosted here.
	DataDir string
	// FS is the filesystem (default vfs.OS()).
	FS vfs.FS
	// Logger (default slog.Default()).
	Logger *slog.Logger
	// Transport tunes connections.
	Transport transport.Options
	// SegmentBytes is the event log's segment size (default 8 MiB). Whole
	// segments are the unit of trimming, and a restarted PHB replays every
	// segment it kept: with 64 MiB segments a soak's PHB never filled its
	// first one in 40 minutes, so each restart replayed every event ever
	// published (475 000, 35 s on a loaded machine).
	SegmentBytes int64
	// TrimInterval: how often released log segments are dropped (default 5s).
	TrimInterval time.Duration
	// BestEffort runs the broker without guaranteed delivery: nothing is
	// logged, acked or repaired (gd.Config.BestEffort). Only for measuring
	// what GD costs (aerie bench --workload overhead); every broker of a
	// network must agree on it.
	BestEffort bool
	// SubscriberQueue bounds the frames queued to one client connection; a
	// subscriber that falls further behind is disconnected with a reason it
	// can see (seed 003 §1.1). Default 100000.
	SubscriberQueue int
	// Gossip is the membership address (host:port; memberlist uses UDP and
	// TCP on that port, port 0 picks one: GossipAddr). "" runs no
	// membership: liveness then comes from the connections' heartbeats
	// alone. See membership.go.
	Gossip string
	// Seeds are the gossip addresses the membership joins through (the
	// config's seeds); this broker's own address may be among them.
	Seeds []string
	// GossipTiming overrides mlist.LoopbackTiming() (nil: that), e.g. for
	// tests on a loaded host.
	GossipTiming *memberlist.Config
	// Monkey runs the chaos monkey in this broker (nil: none).
	Monkey *Monkey
}

// Node is one running broker.
type Node struct {
	opts Options
	log  *slog.Logger
	eng  *gd.Engine
	// recvIn and localIn are the inputs handed to eng.Step by pointer for
	// every peer message and publish, so that none is boxed per message.
	recvIn  gd.Recv
	localIn gd.Local
	elog    *eventlog.Log
	inc     uint64
	hosted  []msg.PubendID
	downs   map[msg.NodeID]bool
	inbox   chan event
	syncRes chan syncResult
	// fetchRes returns events read back from the log (gd.Fetch); at most
	// one fetch per hosted pubend is out, so its buffer never fills.
	fetchRes chan gd.Fetched
	retain   retention.Tracker
	status   chan chan Status
	ml       *mlist.Node // nil without membership; set once in Run (under mu)

	// Loop-owned state.
	peers    map[msg.NodeID]*transport.Conn
	clients  map[uint64]*client
	pubOwner map[string]uint64
	subOwner map[msg.SubID]uint64
	inflight *gd.Ready
	fetching int // fetches handed to the persister and not yet returned
	nextCID  uint64
	monkey   *monkeyState   // nil without a monkey
	chaos    map[string]int // the monkey's actions so far, by kind
	view     member.View    // the last installed membership view
	change   member.Change  // how it differs from the one before
	hasView  bool
	// Copies of the log's bounds for Status: the log itself belongs to the
	// persister while a batch is in flight.
	logFirst, logNext uint64

	mu        sync.Mutex // guards the addresses below, read by tests and dev
	brokerLn  net.Listener
	clientLn  net.Listener
	listening chan struct{}
	wg        sync.WaitGroup
}

// job is work for the persister, which owns the log: a batch to append and
// fsync, or events to read back.
type job struct {
	batch [][]byte
	fetch *fetchJob
}

type fetchJob struct {
	f    gd.Fetch
	from []uint64 // log index to start each range's read at
}

// syncResult reports a persisted batch: the log index of its first record.
type syncResult struct {
	first uint64
	err   error
}

type client struct {
	id   uint64
	conn *transport.Conn
	subs map[msg.SubID]string // full id → the client's own name
}

// event is something a connection goroutine hands to the loop.
type event struct {
	kind int
	peer msg.NodeID
	inc  uint64
	cid  uint64
	conn *transport.Conn
	m    msg.Msg
	view *member.Change // evView
}

const (
	evPeerUp = iota
	evPeerMsg
	evPeerDown
	evClientUp
	evClientMsg
	evClientDown
	evView
)

// New prepares a broker; Run starts it.
func New(opts Options) (*Node, error) {
	if opts.ID == "" {
		return nil, errors.New("broker: empty id")
	}
	if opts.FS == nil {
		opts.FS = vfs.OS()
	}
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	if opts.SegmentBytes <= 0 {
		opts.SegmentBytes = 8 << 20
	}
	if opts.TrimInterval <= 0 {
		opts.TrimInterval = 5 * time.Second
	}
	if opts.SubscriberQueue <= 0 {
		opts.SubscriberQueue = 100000
	}
	if opts.GD == (gd.Config{}) {
		opts.GD = gd.DefaultConfig()
	}
	if opts.BestEffort {
		opts.GD.BestEffort = true
	}
	eng, err := gd.NewWithCells(opts.ID, opts.GD, opts.Routes, opts.Cells)
	if err != nil {
		return nil, fmt.Errorf("broker %s: %w", opts.ID, err)
	}
	// A restart is a new incarnation, with a larger boot nonce.
	inc, err := bootNonce(opts.FS, opts.DataDir, time.Now())
	if err != nil {
		return nil, fmt.Errorf("broker %s: %w", opts.ID, err)
	}
	n := &Node{
		opts: opts, log: opts.Logger.With("broker", string(opts.ID)), eng: eng,
		inc:   inc,
		downs: map[msg.NodeID]bool{}, inbox: make(chan event, 4096), syncRes: make(chan syncResult, 1),
		status: make(chan chan Status), peers: map[msg.NodeID]*transport.Conn{}, clients: map[uint64]*client{},
		pubOwner: map[string]uint64{}, subOwner: map[msg.SubID]uint64{}, listening: make(chan struct{}), chaos: map[string]int{},
	}
	members := func(c msg.NodeID) []msg.NodeID {
		if ms, ok := opts.Cells[c]; ok {
			return ms
		}
		return []msg.NodeID{c}
	}
	for _, r := range opts.Routes {
		if r.Up == "" {
			n.hosted = append(n.hosted, r.Pubend)
		}
		for _, d := range r.Down {
			for _, m := range members(d) {
				n.downs[m] = true // may dial us
			}
		}
	}
	for _, ms := range opts.Cells {
		if slices.Contains(ms, opts.ID) {
			for _, m := range ms {
				if m < opts.ID {
					n.downs[m] = true // a cell peer that dials us
				}
			}
		}
	}
	sort.Slice(n.hosted, func(i, j int) bool { return n.hosted[i] < n.hosted[j] })
	n.fetchRes = make(chan gd.Fetched, len(n.hosted)+1)
	if len(n.hosted) > 0 && opts.DataDir == "" {
		return nil, fmt.Errorf("broker %s hosts pubends %v but has no data directory", opts.ID, n.hosted)
	}
	return n, nil
}

// Listening is closed once the node accepts connections.
func (n *Node) Listening() <-chan struct{} { return n.listening }

// ClientAddr returns the address clients connect to ("" when none).
func (n *Node) ClientAddr() string {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.clientLn == nil {
		return ""
	}
	return n.clientLn.Addr().String()
}

// BrokerAddr returns the broker-to-broker address ("" when none).
func (n *Node) BrokerAddr() string {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.brokerLn == nil {
		return ""
	}
	return n.brokerLn.Addr().String()
}

// Run opens the log, restores the pubends, listens, dials upstreams and
// drives the engine until ctx ends or a fatal error (a failed fsync).
func (n *Node) Run(ctx context.Context) error {
	if err := n.openLog(); err != nil {
		return err
	}
	defer func() {
		if n.elog != nil {
			n.elog.Close()
		}
	}()
	// Connections live under their own context, cancelled only after the
	// loop has released the last acks and flushed every queue into a
	// Goodbye (graceful shutdown).
	connCtx, cancel := context.WithCancel(context.Background())
	defer func() {
		cancel()
		n.wg.Wait()
	}()
	if err := n.listen(connCtx); err != nil {
		return err
	}
	if n.opts.Gossip != "" {
		// Membership stops after the loop (deferred after connCtx, so it
		// runs first): a graceful leave, while connections still flush.
		mctx, stop := context.WithCancel(context.Background())
		ml, err := n.startMembership(mctx)
		if err != nil {
			stop()
			return err
		}
		done := make(chan struct{})
		go n.runMembership(mctx, ml, done)
		defer func() {
			stop()
			<-done
		}()
	}
	close(n.listening)
	for up, addr := range n.opts.Upstreams {
		n.wg.Add(1)
		go n.dialLoop(connCtx, up, addr)
	}
	// One batch and at most one fetch per hosted pubend are ever queued, so
	// the loop never blocks handing work over.
	persist := make(chan job, 1+len(n.hosted))
	defer close(persist) // ends the persister after the loop
	n.wg.Add(1)
	go n.persister(persist)
	return n.loop(ctx, persist)
}

func (n *Node) openLog() error {
	if len(n.hosted) == 0 {
		return nil
	}
	dir := filepath.Join(n.opts.DataDir, "pubends")
	if err := n.opts.FS.MkdirAll(dir); err != nil {
		return fmt.Errorf("broker %s: %w", n.opts.ID, err)
	}
	l, rec, err := eventlog.Open(n.opts.FS, dir, eventlog.Options{SegmentBytes: n.opts.SegmentBytes})
	if err != nil {
		return fmt.Errorf("broker %s: open event log: %w", n.opts.ID, err)
	}
	if rec.TornTail {
		n.log.Warn("event log had a torn tail after a crash; truncated it", "segment", rec.Segment, "offset", rec.Offset, "bytes", rec.TruncatedBytes)
	}
	recs, err := retention.Load(n.opts.FS, n.snapPath(), l, &n.retain)
	if err == nil {
		err = n.eng.Restore(recs)
	}
	if err != nil {
		l.Close()
		return fmt.Errorf("broker %s: recover event log %s: %w", n.opts.ID, dir, err)
	}
	n.elog = l
	n.logFirst, n.logNext = l.FirstIndex(), l.NextIndex()
	n.log.Info("event log recovered", "dir", dir, "records", len(recs))
	return nil
}

// persister appends and fsyncs one batch at a time (group commit: the loop
// hands over everything that queued during the previous fsync).
func (n *Node) persister(in <-chan job) {
	defer n.wg.Done()
	for j := range in {
		if j.fetch != nil {
			evs, err := retention.Fetch(n.elog, j.fetch.f.Pubend, j.fetch.f.Ranges, j.fetch.from)
			n.fetchRes <- gd.Fetched{Pubend: j.fetch.f.Pubend, Events: evs, Err: err}
			continue
		}
		res := syncResult{first: n.elog.NextIndex()}
		for _, b := range j.batch {
			if _, res.err = n.elog.Append(b); res.err != nil {
				break
			}
		}
		if res.err == nil {
			res.err = n.elog.Sync()
		}
		n.syncRes <- res
	}
}

func (n *Node) snapPath() string { return filepath.Join(n.opts.DataDir, "pubends.snapshot") }

// trim drops log segments whose events every downstream has acked, after
// writing a snapshot of what they summarise (internal/retention). It runs
// in the loop while no batch is in flight, so the log is idle.
func (n *Node) trim() {
	if n.elog == nil || n.inflight != nil || n.fetching > 0 {
		return // the persister is using the log
	}
	dropped, err := retention.Trim(n.opts.FS, n.snapPath(), n.elog, &n.retain, n.eng)
	if err != nil {
		n.log.Error("could not trim the event log (it keeps growing until this is fixed)", "err", err)
		return
	}
	n.logFirst = n.elog.FirstIndex()
	if dropped > 0 {
		n.log.Info("trimmed event log", "records_dropped", dropped, "first_index", n.elog.FirstIndex())
	}
}

func now() tick.Time { return tick.Time(time.Now().UnixNano()) }

// inboxBatch bounds how many queued messages the loop handles between two
// drains of the engine.
const inboxBatch = 128

func (n *Node) loop(ctx context.Context, persist chan<- job) error {
	t := time.NewTicker(n.opts.GD.TickInterval)
	defer t.Stop()
	trim := time.NewTicker(n.opts.TrimInterval)
	defer trim.Stop()
	n.monkey = newMonkey(n.opts.Monkey)
	defer n.monkey.stop()
	if n.monkey != nil {
		for _, f := range n.monkey.faults() {
			n.chaos[f] = 0 // counted from zero, so alerts see the series at once
		}
	}
	for {
		select {
		case <-trim.C:
			n.trim()
		case <-n.monkey.fired():
			n.monkeyAct()
		case <-ctx.Done():
			if n.inflight != nil {
				// Finish the fsync in flight so its publishers get their acks.
				if res := <-n.syncRes; res.err == nil {
					n.released(res.first)
				}
			}
			n.closeAll("broker shutting down")
			return nil
		case <-t.C:
			n.step(gd.Tick{})
		case ev := <-n.inbox:
			n.handle(ev)
			// Take what else is queued before draining: one Ready for many
			// messages, and one select per batch instead of per message.
			// Bounded, so timers and fsync completions wait at most this.
			for range inboxBatch - 1 {
				select {
				case ev := <-n.inbox:
					n.handle(ev)
					continue
				default:
				}
				break
			}
		case res := <-n.syncRes:
			if res.err != nil {
				n.closeAll("broker storage failed")
				return fmt.Errorf("broker %s: event log append or fsync failed, stopping (crash-only): %w", n.opts.ID, res.err)
			}
			n.released(res.first)
		case f := <-n.fetchRes:
			n.fetching--
			if f.Err != nil {
				n.log.Error("could not read events back from the event log; downstream will nack again", "pubend", string(f.Pubend), "err", f.Err)
			}
			n.step(f)
		case reply := <-n.status:
			reply <- n.snapshot()
		}
		n.drain(persist)
	}
}

// released: the in-flight batch is durable — acks go out, the engine learns.
func (n *Node) released(first uint64) {
	rd := *n.inflight
	n.inflight = nil
	for i, r := range rd.Persist {
		n.retain.Appended(first+uint64(i), r)
	}
	n.logNext = first + uint64(len(rd.Persist))
	for _, m := range rd.ToClientsAfterPersist {
		n.toClient(m)
	}
	n.eng.Advance(rd)
}

func (n *Node) step(in gd.Input) {
	if err := n.eng.Step(now(), in); err != nil {
		n.log.Warn("engine refused input", "err", err)
	}
}

func (n *Node) drain(persist chan<- job) {
	for n.eng.HasReady() {
		rd := n.eng.Ready()
		for _, env := range rd.Send {
			if c := n.peers[env.To]; c != nil {
				c.Send(env.Msg) // a lost message is recovered by the protocol
			}
		}
		for _, m := range rd.ToClients {
			n.toClient(m)
		}
		if len(rd.Persist) > 0 {
			batch := make([][]byte, 0, len(rd.Persist))
			for _, r := range rd.Persist {
				hint := 64 // sized up front: growing from nil was a few percent of the CPU
				if ev := r.Event; ev != nil {
					hint += ev.Size()
				}
				b, err := msg.EncodeRecord(make([]byte, 0, hint), r)
				if err != nil {
					panic(fmt.Sprintf("broker: encode %v: %v", r, err)) // publish validation guarantees encodable props
				}
				batch = append(batch, b)
			}
			r := rd
			n.inflight = &r
			persist <- job{batch: batch}
		}
		for _, f := range rd.Fetch {
			from := make([]uint64, len(f.Ranges))
			for i, r := range f.Ranges {
				from[i] = n.retain.FetchStart(f.Pubend, r.Lo)
			}
			n.fetching++
			persist <- job{fetch: &fetchJob{f: f, from: from}}
		}
	}
}

func (n *Node) handle(ev event) {
	switch ev.kind {
	case evPeerUp:
		if old := n.peers[ev.peer]; old != nil && old != ev.conn {
			old.Close()
		}
		n.peers[ev.peer] = ev.conn
		n.log.Info("link up", "peer", string(ev.peer), "addr", ev.conn.RemoteAddr())
		n.step(gd.LinkUp{Peer: ev.peer, Incarnation: ev.inc})
	case evPeerMsg:
		if n.peers[ev.peer] != ev.conn {
			return // a replaced connection's leftovers
		}
		n.recvIn = gd.Recv{From: ev.peer, Msg: ev.m}
		err := n.eng.Step(now(), &n.recvIn)
		n.recvIn = gd.Recv{}
		if err != nil {
			// Not a broker-to-broker message: a protocol error on this link.
			n.log.Warn("closing link after protocol error", "peer", string(ev.peer), "err", err)
			ev.conn.CloseWith(err, "protocol error: "+err.Error())
		}
	case evPeerDown:
		if n.peers[ev.peer] == ev.conn {
			delete(n.peers, ev.peer)
			n.log.Info("link down", "peer", string(ev.peer), "err", ev.conn.Err())
			n.step(gd.LinkDown{Peer: ev.peer})
		}
	case evView:
		n.installView(*ev.view)
	case evClientUp:
		n.clients[ev.cid] = &client{id: ev.cid, conn: ev.conn, subs: map[msg.SubID]string{}}
	case evClientMsg:
		n.clientRequest(ev.cid, ev.m)
	case evClientDown:
		if c := n.clients[ev.cid]; c != nil {
			for sub := range c.subs {
				delete(n.subOwner, sub)
				n.step(gd.Local{Msg: msg.Unsubscribe{Sub: sub}})
			}
			for p, owner := range n.pubOwner {
				if owner == ev.cid {
					delete(n.pubOwner, p)
				}
			}
			delete(n.clients, ev.cid)
		}
	}
}

// clientRequest maps a client's request into the engine. Subscription names
// are made network-unique by prefixing broker and connection.
func (n *Node) clientRequest(cid uint64, req msg.Msg) {
	c := n.clients[cid]
	if c == nil {
		return
	}
	switch m := req.(type) {
	case msg.Publish:
		if m.Pubend == "" {
			m.Pubend = n.pickPubend(m.Publisher)
			req = m
		}
		if size := msg.EventSize(m.Topic, m.Props, m.Payload); size > msg.MaxEventBytes {
			c.conn.Send(msg.PubReject{Publisher: m.Publisher, Seq: m.Seq,
				Reason: fmt.Sprintf("event of %d bytes exceeds the %d-byte limit", size, msg.MaxEventBytes)})
			return
		}
		// Connection ids only grow: a late publish from a client's old
		// connection must not steal its acks from the new one.
		if cur, ok := n.pubOwner[m.Publisher]; !ok || cid > cur {
			n.pubOwner[m.Publisher] = cid
		}
		n.localIn = gd.Local{Msg: req} // the publish as decoded, unless its pubend was picked here
		n.step(&n.localIn)
		n.localIn = gd.Local{}
	case msg.Subscribe:
		full := msg.SubID(fmt.Sprintf("%s/%d/%s", n.opts.ID, cid, m.Sub))
		c.subs[full] = string(m.Sub)
		n.subOwner[full] = cid
		n.step(gd.Local{Msg: msg.Subscribe{Sub: full, Pattern: m.Pattern, Selector: m.Selector}})
	case msg.Unsubscribe:
		full := msg.SubID(fmt.Sprintf("%s/%d/%s", n.opts.ID, cid, m.Sub))
		delete(c.subs, full)
		delete(n.subOwner, full)
		n.step(gd.Local{Msg: msg.Unsubscribe{Sub: full}})
	default:
		c.conn.CloseWith(fmt.Errorf("broker: client sent %T", m), fmt.Sprintf("unexpected %T from a client", m))
	}
}

// pickPubend spreads publishers over the hosted pubends by a hash of their
// id, so one publisher's events all go to one pubend (and stay in order).
func (n *Node) pickPubend(publisher string) msg.PubendID {
	if len(n.hosted) == 0 {
		return ""
	}
	h := fnv.New32a()
	h.Write([]byte(publisher))
	return n.hosted[int(h.Sum32()%uint32(len(n.hosted)))]
}

func (n *Node) toClient(m msg.Msg) {
	var cid uint64
	var ok bool
	switch x := m.(type) {
	case msg.PubAck:
		cid, ok = n.pubOwner[x.Publisher]
	case msg.PubReject:
		cid, ok = n.pubOwner[x.Publisher]
	case msg.Delivery:
		cid, ok = n.subOwner[x.Sub]
		if ok {
			x.Sub = msg.SubID(n.clients[cid].subs[x.Sub])
			m = x
		}
	case msg.SubStarted:
		cid, ok = n.subOwner[x.Sub]
		if ok {
			x.Sub = msg.SubID(n.clients[cid].subs[x.Sub])
			m = x
		}
	case msg.SubRejected:
		cid, ok = n.subOwner[x.Sub]
		if ok {
			x.Sub = msg.SubID(n.clients[cid].subs[x.Sub])
			m = x
		}
	}
	if c := n.clients[cid]; ok && c != nil {
		c.conn.Send(m) // a full queue disconnects the client with a reason
	}
}

func (n *Node) closeAll(reason string) {
	for _, c := range n.peers {
		c.CloseFlush(reason)
	}
	for _, c := range n.clients {
		c.conn.CloseFlush(reason)
	}
	n.mu.Lock()
	if n.brokerLn != nil {
		n.brokerLn.Close()
	}
	if n.clientLn != nil {
		n.clientLn.Close()
	}
	n.mu.Unlock()
}
