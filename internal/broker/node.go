// Package broker is the runtime shell around the pure GD engine: one
// goroutine (Run) owns the engine and drives it with real time, the event
// log on disk and TCP connections. Connection readers and the fsync run in
// goroutines owned by the Node; they talk to the loop through channels, so
// the protocol itself never needs a lock (docs/ARCHITECTURE.md "The core contract").
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
	"log/slog"
	"net"
	"path/filepath"
	"slices"
	"sort"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashicorp/memberlist"

	"github.com/aerie-mq/aerie/internal/auth"
	"github.com/aerie-mq/aerie/internal/eventlog"
	"github.com/aerie-mq/aerie/internal/gctune"
	"github.com/aerie-mq/aerie/internal/gd"
	"github.com/aerie-mq/aerie/internal/lattrace"
	"github.com/aerie-mq/aerie/internal/member"
	"github.com/aerie-mq/aerie/internal/member/mlist"
	"github.com/aerie-mq/aerie/internal/mqtt"
	"github.com/aerie-mq/aerie/internal/msg"
	"github.com/aerie-mq/aerie/internal/pki"
	"github.com/aerie-mq/aerie/internal/raftphb/forward"
	"github.com/aerie-mq/aerie/internal/shell"
	"github.com/aerie-mq/aerie/internal/storage"
	"github.com/aerie-mq/aerie/internal/tick"
	"github.com/aerie-mq/aerie/internal/transport"
	"github.com/aerie-mq/aerie/internal/vfs"
	"github.com/aerie-mq/aerie/internal/wire"
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
	// MQTT is the address of the MQTT 3.1.1 and 5 listener ("" for none;
	// see mqtt.go and docs/MQTT.md).
	MQTT string
	// Upstreams maps each neighbour this broker dials to its address:
	// every member of its upstream cells, and the members of its own cell
	// whose ids sort after its own. The others dial it.
	Upstreams map[msg.NodeID]string
	// DataDir holds the broker's log: the events of the pubends hosted
	// here and the state of the durable subscriptions held here ("": none,
	// and no durable subscriptions).
	DataDir string
	// FS is the filesystem (default vfs.OS()).
	FS vfs.FS
	// Logger (default slog.Default()).
	Logger *slog.Logger
	// Transport tunes connections.
	Transport transport.Options
	// Bandwidth caps the bytes per second sent to each downstream broker
	// (a link's bandwidth in the network config; absent: no cap).
	Bandwidth map[msg.NodeID]int64
	// SegmentBytes is the event log's segment size (default 8 MiB). Whole
	// segments are the unit of trimming, and a restarted PHB replays every
	// segment it kept: with 64 MiB segments a soak's PHB never filled its
	// first one in 40 minutes, so each restart replayed every event ever
	// published (475 000, 35 s on a loaded machine).
	SegmentBytes int64
	// TrimInterval: how often released log segments are dropped (default 5s).
	TrimInterval time.Duration
	// DiskReserve: a PHB refuses new publishes while the filesystem of its
	// data directory has less room than this (default four segments,
	// shell.Config.DiskReserve); negative checks nothing.
	DiskReserve int64
	// MemoryBudget is the memory this broker's process may use (the
	// config's memory_budget; 0: no budget): the loop samples the live
	// heap every MemoryEvery (default 1s) and the broker sheds its caches
	// while it is near the budget (shell.Memory). The process's memory
	// limit is the caller's (gctune.Limit): several brokers may share a
	// process.
	MemoryBudget int64
	MemoryEvery  time.Duration
	// liveHeap, when set (tests), is sampled instead of the process's
	// live heap (gctune.LiveHeap).
	liveHeap func() int64
	// GroupHomes lists the brokers that may be a consumer group's home,
	// the same at every broker of the network (shell.Config.GroupHomes;
	// from the network config: the brokers with a client address and a
	// data directory, outside replicated PHB cells). Empty: this broker
	// serves every group its members ask it for.
	GroupHomes []shell.GroupHome
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
	// TLS, when set, turns on mutual TLS on every broker link (a peer's
	// certificate must be signed by the CA and name the broker id of its
	// Hello) and TLS on the client port (security.go).
	TLS *pki.Broker
	// Users, when set, makes every client authenticate; their permissions
	// are checked by the shell's client sessions.
	Users *auth.Users
	// Raft, when set, makes the broker a member of a replicated PHB cell
	// (raft.go): its pubends are one Raft group with the cell's members.
	Raft *RaftOptions

	// protocolVersion, when set, is the version this broker announces in
	// its Hellos instead of wire.Version, and it refuses a peer that
	// announces a later one, as brokers of version 12 and earlier did:
	// tests run a broker as an older one, to see that a network of mixed
	// versions works.
	protocolVersion uint16
}

// Node is one running broker: the runtime shell (internal/shell) with the
// OS clock, TCP connections (transport) and the event log on disk
// (storage.Store, run by the persister goroutine).
type Node struct {
	opts Options
	// runsSplit counts the KnowledgeRuns sent as their pieces to brokers
	// of protocol version 11 (Send).
	runsSplit atomic.Uint64
	// publishRuns counts the PublishRun frames taken from clients.
	publishRuns atomic.Uint64
	log         *slog.Logger
	eng         *gd.Engine
	sh          *shell.Broker
	store       *storage.Store // nil when no pubend is hosted here
	inc         uint64
	hosted      []msg.PubendID
	downs       map[msg.NodeID]bool
	inbox       chan event
	// burstNow is the time while the loop handles a burst of messages
	// read together (0 otherwise): Now reads the clock once per burst.
	burstNow tick.Time
	// traceHop is this broker's hop on the bench's traced path
	// (lattrace), -1 when tracing is off or the broker is not on it.
	traceHop int
	// done carries the persister's completions back to the loop; at most
	// one append, one trim and one fetch per hosted pubend are out, so its
	// buffer never fills.
	done   chan completion
	jobs   chan job // to the persister
	status chan chan Status
	ml     *mlist.Node // nil without membership; set once in Run (under mu)

	// Loop-owned state.
	peers   map[msg.NodeID]*transport.Conn
	clients map[shell.ClientID]clientConn
	nextCID shell.ClientID
	peerInc map[msg.NodeID]uint64 // each linked peer's incarnation
	raft    *raftState            // nil unless a member of a replicated PHB cell
	relay   *forward.Relay        // publishes to pubends hosted elsewhere (relay.go)
	monkey  *monkeyState          // nil without a monkey
	chaos   map[string]int        // the monkey's actions so far, by kind
	view    member.View           // the last installed membership view
	change  member.Change         // how it differs from the one before
	hasView bool

	bw *bandwidths // downstream links' caps (bandwidth.go)

	mu        sync.Mutex // guards the addresses below, read by tests and dev
	brokerLn  net.Listener
	clientLn  net.Listener
	mqttSrv   *mqtt.Server // nil without an MQTT listener
	listening chan struct{}
	wg        sync.WaitGroup

	// Counted by the connection goroutines (security.go).
	disk              *diskStats // group commits of the event log
	authFailures      atomic.Uint64
	handshakeFailures atomic.Uint64
	fails             *failLog
}

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
	if opts.MemoryEvery <= 0 {
		opts.MemoryEvery = time.Second
	}
	if opts.liveHeap == nil {
		opts.liveHeap = gctune.LiveHeap
	}
	if opts.DiskReserve == 0 {
		opts.DiskReserve = 4 * opts.SegmentBytes
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
	// Events forwarded as the bytes they arrived in, with no copy per hop
	// (transport.Options).
	opts.Transport.ViewFrames = true
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
		downs: map[msg.NodeID]bool{}, inbox: make(chan event, 4096),
		status: make(chan chan Status), peers: map[msg.NodeID]*transport.Conn{}, clients: map[shell.ClientID]clientConn{},
		peerInc:   map[msg.NodeID]uint64{},
		listening: make(chan struct{}), chaos: map[string]int{}, bw: newBandwidths(opts.Bandwidth),
		traceHop: lattrace.Hop(opts.ID),
	}
	n.fails = newFailLog(n.log, 10*time.Second)
	n.disk = newDiskStats()
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
	n.relay = n.newRelay(members)
	if len(n.hosted) > 0 && opts.DataDir == "" {
		return nil, fmt.Errorf("broker %s hosts pubends %v but has no data directory", opts.ID, n.hosted)
	}
	// One append, one trim and at most one fetch per hosted pubend are
	// ever out, so neither the loop nor the persister blocks handing over.
	n.jobs = make(chan job, 3+len(n.hosted)) // an append or a reopen, a trim, a fetch per pubend, one spare
	n.done = make(chan completion, 2+len(n.hosted))
	cfg := shell.Config{ID: opts.ID, Engine: eng, Clock: n, Net: n, Hosted: n.hosted, Logger: n.log, GroupHomes: opts.GroupHomes}
	if opts.DataDir != "" {
		// A PHB logs its pubends' events there, an SHB its durable
		// subscriptions; a broker without data can hold neither.
		cfg.Durability = persisterSeam{n}
		cfg.DiskReserve = max(opts.DiskReserve, 0)
	}
	n.sh = shell.New(cfg)
	if opts.Raft != nil {
		if err := n.initRaft(); err != nil {
			return nil, err
		}
	}
	return n, nil
}

// initRaft makes the node a standby member of its replicated PHB cell
// until Run opens the Raft member and it is elected.
func (n *Node) initRaft() error {
	r := *n.opts.Raft
	if r.TickInterval <= 0 {
		r.TickInterval = 100 * time.Millisecond
	}
	if r.ElectionTicks <= 0 {
		r.ElectionTicks = 10
	}
	if err := checkSlots(r); err != nil {
		return fmt.Errorf("broker %s: %w", n.opts.ID, err)
	}
	switch r.Clients {
	case "":
		r.Clients = DefaultRaftClients
	case RaftClientsForward, RaftClientsRedirect:
	default:
		return fmt.Errorf("broker %s: raft clients %q: want %q or %q", n.opts.ID, r.Clients, RaftClientsForward, RaftClientsRedirect)
	}
	if r.ForwardTimeout <= 0 {
		r.ForwardTimeout = 5 * time.Duration(r.ElectionTicks) * r.TickInterval
	}
	// A member of protocol version 13 runs the same timeout: its refusals
	// here outlive its link by twice it (forward.Leader.Tick).
	linger := int(2*r.ForwardTimeout/r.TickInterval) + 1
	n.raft = &raftState{opts: r, synced: make(chan error, 1), fwdPerms: map[shell.ClientID]*auth.Perms{},
		lead: forward.NewLeader(linger)}
	n.raft.fwd = forward.NewForwarder(fwdNet{n}, r.ForwardTimeout)
	if n.raft.raftID(n.opts.ID) == 0 {
		return fmt.Errorf("broker %s is not among the members %v of its replicated PHB cell", n.opts.ID, r.Members)
	}
	sh, eng, err := n.newRaftShell(false)
	if err != nil {
		return err
	}
	n.sh, n.eng = sh, eng
	return nil
}

// ID is the broker's id.
func (n *Node) ID() msg.NodeID { return n.opts.ID }

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
		if n.store != nil {
			n.store.Close()
		}
		if n.raft != nil {
			n.raft.rn.Close()
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
	if err := n.listenMQTT(connCtx); err != nil {
		n.closeAll("broker failed to start")
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
	defer close(n.jobs) // ends the persister after the loop
	n.wg.Add(1)
	go n.persister()
	return n.loop(ctx)
}

func (n *Node) openLog() error {
	if n.opts.DataDir == "" {
		return nil
	}
	if n.raft != nil {
		return n.openRaft()
	}
	dir := filepath.Join(n.opts.DataDir, "pubends")
	if err := n.opts.FS.MkdirAll(dir); err != nil {
		return fmt.Errorf("broker %s: %w", n.opts.ID, err)
	}
	st, ld, rec, err := storage.Open(n.opts.FS, dir, filepath.Join(n.opts.DataDir, "pubends.snapshot"),
		eventlog.Options{SegmentBytes: n.opts.SegmentBytes, DropSynced: true})
	if err != nil {
		return fmt.Errorf("broker %s: %w", n.opts.ID, err)
	}
	if rec.TornTail {
		n.log.Warn("event log had a torn tail after a crash; truncated it", "segment", rec.Segment, "offset", rec.Offset, "bytes", rec.TruncatedBytes)
	}
	if err := n.sh.Restore(ld); err != nil {
		st.Close()
		return fmt.Errorf("broker %s: recover event log %s: %w", n.opts.ID, dir, err)
	}
	n.store = st
	events := 0
	for _, p := range ld.Events {
		events += p.Len()
	}
	n.log.Info("event log recovered", "dir", dir, "records", ld.Next-ld.First, "events", events,
		"segments_from_summaries", ld.Summarised, "segments_read", ld.Read)
	return nil
}

// Now is the broker's clock (shell.Clock).
func (n *Node) Now() tick.Time {
	if n.burstNow != 0 {
		return n.burstNow
	}
	return tick.Time(time.Now().UnixNano())
}

// Send hands m to the link to neighbour to (shell.Net); a message a full
// queue or a broken link drops is recovered by the protocol.
func (n *Node) Send(to msg.NodeID, m msg.Msg) {
	c := n.peers[to]
	if c == nil {
		return
	}
	if n.traceHop >= 0 {
		lattrace.MarkMsg(lattrace.Slot(n.traceHop, lattrace.Queued), m, time.Now().UnixNano())
	}
	if c.Peer.Version < wire.VersionVouched {
		// A broker of version 18 cannot read an unvouched top: an upstream
		// gets the clean prefix as the ack, which holds its release as
		// before; a downstream gets the vouched final prefix, and a Resync
		// for the rest where it was gone.
		switch v := m.(type) {
		case msg.Ack:
			m = v.CleanOnly()
		case *msg.Knowledge:
			if v.Unvouched > 0 {
				k := v.VouchedOnly()
				m = &k
			}
		case *msg.KnowledgeRun:
			if v.Unvouched > 0 {
				v.Split(func(k msg.Knowledge) {
					k = k.VouchedOnly()
					c.Send(&k)
				})
				return
			}
		}
	}
	if r, ok := m.(*msg.KnowledgeRun); ok && c.Peer.Version < wire.VersionKnowledgeRun {
		// A broker of protocol version 11 reads the run as its pieces.
		r.Split(func(k msg.Knowledge) { c.Send(&k) })
		n.runsSplit.Add(1)
		return
	}
	c.Send(m)
}

// ToClient hands m to client connection c (shell.Net); a full queue
// disconnects the client with a reason.
func (n *Node) ToClient(c shell.ClientID, m msg.Msg) {
	if conn := n.clients[c]; conn != nil {
		if n.traceHop >= 0 {
			lattrace.MarkMsg(lattrace.Slot(n.traceHop, lattrace.Queued), m, time.Now().UnixNano())
		}
		conn.Send(m)
	}
}

// CloseClient ends client connection c (shell.Net).
func (n *Node) CloseClient(c shell.ClientID, err error, reason string) {
	if conn := n.clients[c]; conn != nil {
		conn.CloseWith(err, reason)
	}
}

func (n *Node) closeAll(reason string) {
	for _, c := range n.peers {
		c.CloseFlush(reason)
	}
	for _, c := range n.clients {
		c.CloseFlush(reason)
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
