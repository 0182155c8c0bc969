package gd_test

// Golden interaction tests in the style of etcd-raft's interaction tests: a
// small network of brokers — each a gd.Engine inside the runtime shell the
// broker and the simulator run (internal/shell), with a client connection
// for the commands' publishes and subscriptions — a simulated clock and
// per-link FIFO queues that deliver only when a command says so. Each file under testdata/ is a
// story; `go test ./internal/gd -run TestInteraction -rewrite` regenerates
// the expected outputs.
//
// Printing. The clock starts at 2026-01-01T00:00:00Z (the "epoch"). Times
// print as offsets from it ("+250ms"). Every tick (any integer of 15 digits
// or more in an output) prints relative to the epoch's first tick: tick
// (ms<<10 | seq) prints as "t<ms-epochMs>" when seq is 0 and
// "t<ms-epochMs>.<seq>" otherwise (t250.1 is the second tick of the
// millisecond at +250ms); tick.Max prints as "∞".
//
// Shells are drained after every input: what the engine asks is printed at
// once (sends as "from->to Msg", client messages as "node: client Msg",
// records as "node: persist Rec"); sends are queued on their link, records
// are fsynced at once (Persisted) unless `fsync <node> hold` is in force. A
// publish ack prints only when its fsync completes.
//
// Commands:
//
//	network [tick= gct= nrt= nrtmax= forget= dct= aet= silence= ack= chunk= hwm= relaycache= pubendcache= maxretain= gonemin= deltamin= totalhold= window= windowbytes= cc=on dcq=]
//	    input lines "a -> b -> c" (a is b's upstream, b is c's) and
//	    "pubends p1=P1 ...": builds the engines (config overrides are durations; window is CatchupWindowEvents, windowbytes CatchupWindowBytes.
//	    forget defaults to nrt; relaycache is RelayCacheBytes, pubendcache PubendCacheBytes, deltamin SummaryDeltaMin, totalhold TotalOrderHoldBytes). A line "cell c = b1 b2" makes c a redundant
//	    cell: chains name c, and its members are the engines (gd.NewWithCells).
//	    A line "standby m ..." makes those members of a PHB cell standbys
//	    (no routes), as the members of a replicated cell that do not serve.
//	linkup a b              LinkUp on both ends, with each node's incarnation
//	                        (1 at first, bumped by restart).
//	linkdown a b            LinkDown on both ends (a connection lost).
//	publish node P topic=T [pub=ID] [seq=N] [size=BYTES]   (seq defaults to the publisher's next; size: a payload)
//	subscribe node sub=ID pattern=PAT [selector=SEL] [durable] [total] [from=P1:TICK,...]
//	    / unsubscribe node sub=ID (a durable subscription with a start
//	    token, ticks written as printed; unsubscribing ends it for good)
//	disconnect node [paced] the client connection closes (a durable
//	                        subscription stays, away); a new one opens
//	                        (paced: one that reports what it has taken)
//	taken node sub=ID token=P1:TICK,...   the client reports what it has
//	                        taken (msg.SubConsumed; ticks as printed)
//	advance D [ticks] [deliver] [quiet]
//	    move the clock by D; with ticks, Tick every engine (in id order) at each
//	    TickInterval boundary crossed; with deliver, stabilize after each of
//	    those rounds; quiet prints only client-facing lines.
//	tick [nodes...]         one Tick input to the named (default: all) engines.
//	deliver [a->b] [n=N]    deliver what is queued now (on one link, or its
//	                        first N), printing each message ("a->b Msg ⇒") and,
//	                        indented, what the receiver emitted; those new
//	                        sends wait for the next deliver.
//	stabilize               deliver until every queue is empty.
//	drop a->b [n=N]         discard queued messages (loss).
//	cut a->b / heal a->b    while cut, a link loses everything sent on it.
//	restart node            fresh engine (a PHB restores its log); in-flight
//	                        messages to and from it are lost.
//	failover a b            replicated PHB cell: a (serving) becomes a standby
//	                        and b serves from a copy of a's log (what Raft
//	                        replicated); both restart as with restart.
//	fsync node hold|auto    hold: persist batches wait for `fsync node`.
//	fsync node              complete the held fsync.
//	queue                   list in-flight messages.
//	describe [nodes...]     Engine.Describe().
//	stats [nodes...]        the joins of D and S counted (Stats.Contradictions,
//	                        Stats.UnobservedD) and the payloads evicted.
//	cache [nodes...]        per pubend, the payload bytes the cache holds
//	                        (StreamState.Cached), its budget, the delivery
//	                        point and the highest tick known.
//	floor node P t=TICK     ReleaseFloor: the durable subscribers at node
//	                        released P up to TICK (written as printed,
//	                        t<ms>[.seq], or 0); "floor node P clear" removes it.

import (
	"fmt"
	"math"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/cockroachdb/datadriven"

	"github.com/aerie-mq/aerie/internal/gd"
	"github.com/aerie-mq/aerie/internal/msg"
	"github.com/aerie-mq/aerie/internal/retention"
	"github.com/aerie-mq/aerie/internal/shell"
	"github.com/aerie-mq/aerie/internal/tick"
)

const epochMs = 1767225600 * 1000 // 2026-01-01T00:00:00Z

var epochTime = tick.Time(epochMs * int64(time.Millisecond))

func TestInteraction(t *testing.T) {
	datadriven.Walk(t, "testdata", func(t *testing.T, path string) {
		if !strings.HasSuffix(path, ".txt") {
			t.Skip("not a .txt file")
		}
		h := &harness{}
		datadriven.RunTest(t, path, func(t *testing.T, td *datadriven.TestData) string {
			h.t, h.td = t, td
			h.out.Reset()
			h.run(td)
			if s := relTicks(h.out.String()); s != "" {
				return s
			}
			return "ok\n"
		})
	})
}

type link struct{ from, to msg.NodeID }

func (l link) String() string { return string(l.from) + "->" + string(l.to) }

// node is one broker: its shell, and the shell's clock, network and disk
// (shell.Clock, shell.Net, shell.Durability) in the harness.
type node struct {
	h        *harness
	id       msg.NodeID
	eng      *gd.Engine
	sh       *shell.Broker
	routes   []gd.Route
	standby  bool         // a member of a replicated PHB cell that does not serve: no routes
	inc      uint64       // incarnation, bumped by restart
	log      []msg.Record // durable records, for Restore after a restart
	hold     bool         // fsyncs wait for an explicit `fsync node`
	inflight []msg.Record // persist batch handed out and not yet durable
	indent   int          // of the lines printed for the current input
	client   shell.ClientID
}

// firstClient is the connection the commands' publishes and subscriptions
// use, until `disconnect` replaces it with the next.
const firstClient shell.ClientID = 1

func (n *node) Now() tick.Time { return n.h.now }

func (n *node) Send(to msg.NodeID, m msg.Msg) {
	h, l := n.h, link{n.id, to}
	env := msg.Envelope{From: n.id, To: to, Msg: m}
	if h.cut[l] {
		h.printf(n.indent, "%v   (lost: link cut)", env)
		return
	}
	h.printf(n.indent, "%v", env)
	h.queue[l] = append(h.queue[l], m)
}

func (n *node) ToClient(_ shell.ClientID, m msg.Msg) { n.h.printf(n.indent, "%s: client %v", n.id, m) }

func (n *node) CloseClient(_ shell.ClientID, err error, _ string) {
	n.h.fatalf("%s closed the client: %v", n.id, err)
}

// Append prints the batch and makes it durable at once, from inside the
// drain (so the lines keep the order of the engine's Readies), unless
// fsyncs are held.
func (n *node) Append(recs []msg.Record) {
	for _, r := range recs {
		n.h.printf(n.indent, "%s: persist %v", n.id, r)
	}
	n.inflight = recs
	if n.hold {
		n.h.printf(n.indent, "%s: fsync pending", n.id)
		return
	}
	n.fsync()
}

// fsync completes the batch in flight: acks go to clients, the engine
// learns.
func (n *node) fsync() {
	n.h.printf(n.indent, "%s: fsync done", n.id)
	first := uint64(len(n.log)) + 1
	n.log = append(n.log, n.inflight...)
	n.inflight = nil
	if err := n.sh.Persisted(first, nil); err != nil {
		n.h.fatalf("%v", err)
	}
}

func (n *node) Fetch(f gd.Fetch, _ []uint64) {
	n.h.printf(n.indent, "%s: read back %s %v from the log", n.id, f.Pubend, f.Ranges)
	var evs []*msg.Event
	for _, r := range n.log {
		if ev := r.Event; ev != nil && r.Pubend == f.Pubend && slices.ContainsFunc(f.Ranges, func(rg tick.Range) bool { return rg.Lo <= ev.Tick && ev.Tick <= rg.Hi }) {
			evs = append(evs, ev)
		}
	}
	n.sh.Fetched(gd.Fetched{Pubend: f.Pubend, Events: evs})
}

func (n *node) Trim(uint64, []msg.Record) { n.h.fatalf("%s: the harness does not trim", n.id) }

// newShell gives n a fresh engine in a fresh shell, restored from its log,
// with the commands' client connected.
func (h *harness) newShell(n *node) {
	routes := n.routes
	if n.standby {
		routes = nil
	}
	e, err := gd.NewWithCells(n.id, h.cfg, routes, h.cells)
	if err != nil {
		h.fatalf("%v", err)
	}
	e.Mutate(h.mut)
	n.eng = e
	n.sh = shell.New(shell.Config{ID: n.id, Engine: e, Clock: n, Net: n, Durability: n, Strict: true})
	if err := n.sh.Restore(retention.Loaded{Records: n.log}); err != nil {
		h.fatalf("%v", err)
	}
	n.client = firstClient
	n.sh.ClientUp(n.client)
}

type harness struct {
	t     *testing.T
	td    *datadriven.TestData
	cfg   gd.Config
	mut   gd.Mutation // applied to every engine (tests of the tests)
	now   tick.Time
	nodes map[msg.NodeID]*node
	ids   []msg.NodeID // sorted
	cells gd.Cells
	queue map[link][]msg.Msg
	cut   map[link]bool
	seqs  map[string]uint64
	out   strings.Builder
	quiet bool
	head  string // printed before the next output line (tick rounds)
}

func (h *harness) fatalf(format string, args ...any) { h.td.Fatalf(h.t, format, args...) }

// printf writes one output line; in quiet mode only client-facing ones.
func (h *harness) printf(indent int, format string, args ...any) {
	s := fmt.Sprintf(format, args...)
	if h.quiet && !strings.Contains(s, "client ") {
		return
	}
	if h.head != "" {
		h.out.WriteString(h.head + "\n")
		h.head = ""
	}
	fmt.Fprintf(&h.out, "%s%s\n", strings.Repeat("  ", indent), s)
}

func (h *harness) node(id string) *node {
	n := h.nodes[msg.NodeID(id)]
	if n == nil {
		h.fatalf("unknown node %q", id)
	}
	return n
}

// input hands one input to a node's shell, then drains it.
func (h *harness) input(id msg.NodeID, indent int, fn func(b *shell.Broker)) {
	n := h.node(string(id))
	n.indent = indent
	fn(n.sh)
	n.sh.Drain()
}

// links returns the links with queued messages, sorted.
func (h *harness) links() []link {
	var ls []link
	for l, q := range h.queue {
		if len(q) > 0 {
			ls = append(ls, l)
		}
	}
	slices.SortFunc(ls, func(a, b link) int { return strings.Compare(a.String(), b.String()) })
	return ls
}

// deliver delivers the first n messages queued on l (all when n < 0).
func (h *harness) deliver(l link, n int) {
	q := h.queue[l]
	if n < 0 || n > len(q) {
		n = len(q)
	}
	h.queue[l] = q[n:]
	for _, m := range q[:n] {
		h.printf(0, "%v ⇒", msg.Envelope{From: l.from, To: l.to, Msg: m})
		h.input(l.to, 1, func(b *shell.Broker) {
			if err := b.PeerMsg(l.from, m); err != nil {
				h.fatalf("%s: %v", l.to, err)
			}
		})
	}
}

// deliverAll delivers what is queued now on every link, link by link.
func (h *harness) deliverAll() {
	counts := map[link]int{}
	ls := h.links()
	for _, l := range ls {
		counts[l] = len(h.queue[l])
	}
	for _, l := range ls {
		h.deliver(l, counts[l])
	}
}

func (h *harness) stabilize() {
	for i := 0; len(h.links()) > 0; i++ {
		if i == 100 {
			h.fatalf("stabilize: no quiescence after 100 rounds")
		}
		h.deliverAll()
	}
}

func (h *harness) run(td *datadriven.TestData) {
	args := map[string]string{}
	var pos []string
	for _, a := range td.CmdArgs {
		if len(a.Vals) == 0 {
			pos = append(pos, a.Key)
		} else {
			args[a.Key] = a.Vals[0]
		}
	}
	arg := func(i int) string {
		if i >= len(pos) {
			h.fatalf("%s: missing argument %d", td.Cmd, i+1)
		}
		return pos[i]
	}
	lnk := func() link {
		a, b, ok := strings.Cut(arg(0), "->")
		if !ok {
			h.fatalf("bad link %q (want a->b)", arg(0))
		}
		return link{msg.NodeID(a), msg.NodeID(b)}
	}
	n := -1
	if v, ok := args["n"]; ok {
		n, _ = strconv.Atoi(v)
	}
	if td.Cmd != "network" && h.nodes == nil {
		h.fatalf("%s before network", td.Cmd)
	}
	switch td.Cmd {
	case "network":
		h.network(args, td.Input)
	case "linkup":
		a, b := h.node(arg(0)), h.node(arg(1))
		h.input(a.id, 0, func(sh *shell.Broker) { sh.PeerUp(b.id, b.inc) })
		h.input(b.id, 0, func(sh *shell.Broker) { sh.PeerUp(a.id, a.inc) })
	case "linkdown":
		a, b := msg.NodeID(arg(0)), msg.NodeID(arg(1))
		h.input(a, 0, func(sh *shell.Broker) { sh.PeerDown(b) })
		h.input(b, 0, func(sh *shell.Broker) { sh.PeerDown(a) })
	case "restart":
		h.restart(msg.NodeID(arg(0)))
	case "failover":
		h.failover(msg.NodeID(arg(0)), msg.NodeID(arg(1)))
	case "publish":
		pub := cmp(args["pub"], "pub")
		seq := h.seqs[pub] + 1
		if v, ok := args["seq"]; ok {
			seq, _ = strconv.ParseUint(v, 10, 64)
		}
		h.seqs[pub] = max(h.seqs[pub], seq)
		m := msg.Publish{Pubend: msg.PubendID(arg(1)), Publisher: pub, Seq: seq, Topic: args["topic"], NoAck: slices.Contains(pos, "noack")}
		if v, ok := args["size"]; ok { // a payload of that many bytes
			n, err := strconv.Atoi(v)
			if err != nil {
				h.fatalf("bad size %q", v)
			}
			m.Payload = make([]byte, n)
		}
		for _, a := range td.CmdArgs {
			if a.Key != "props" {
				continue
			}
			props := map[string]any{}
			for _, kv := range a.Vals { // props=(k:v,...): integers, else strings
				k, v, _ := strings.Cut(kv, ":")
				if i, err := strconv.ParseInt(v, 10, 64); err == nil {
					props[k] = i
				} else {
					props[k] = v
				}
			}
			m.Props = msg.MustProps(props)
		}
		h.request(arg(0), m)
	case "subscribe":
		m := msg.Subscribe{Sub: msg.SubID(args["sub"]), Pattern: args["pattern"], Selector: args["selector"], Durable: slices.Contains(pos, "durable"), TotalOrder: slices.Contains(pos, "total")}
		if f, ok := args["from"]; ok {
			m.From = msg.Token{}
			for _, part := range strings.Split(f, ",") {
				p, t, _ := strings.Cut(part, ":")
				m.From[msg.PubendID(p)] = absTick(h, t)
			}
		}
		h.request(arg(0), m)
	case "disconnect":
		// The client's connection closes (a durable subscription stays,
		// away); the next commands use a new one.
		n := h.node(arg(0))
		h.input(n.id, 0, func(b *shell.Broker) { b.ClientDown(n.client) })
		n.client++
		reads := shell.Reads{ReportsTaken: slices.Contains(pos, "paced")}
		h.input(n.id, 0, func(b *shell.Broker) { b.ClientUpReading(n.client, nil, reads) })
	case "taken":
		// The client reports what its application has taken of a durable
		// subscription (msg.SubConsumed).
		m := msg.SubConsumed{Sub: msg.SubID(args["sub"]), Token: msg.Token{}}
		for _, part := range strings.Split(args["token"], ",") {
			p, t, _ := strings.Cut(part, ":")
			m.Token[msg.PubendID(p)] = absTick(h, t)
		}
		h.request(arg(0), m)
	case "unsubscribe":
		h.request(arg(0), msg.Unsubscribe{Sub: msg.SubID(args["sub"])})
	case "advance":
		d, err := time.ParseDuration(arg(0))
		if err != nil {
			h.fatalf("%v", err)
		}
		h.advance(d, slices.Contains(pos, "ticks"), slices.Contains(pos, "deliver"), slices.Contains(pos, "quiet"))
	case "tick":
		for _, id := range h.pick(pos) {
			h.input(id, 0, (*shell.Broker).Tick)
		}
	case "deliver":
		if len(pos) == 0 {
			h.deliverAll()
		} else {
			h.deliver(lnk(), n)
		}
	case "stabilize":
		h.stabilize()
	case "drop":
		l := lnk()
		q := h.queue[l]
		if n < 0 || n > len(q) {
			n = len(q)
		}
		for _, m := range q[:n] {
			h.printf(0, "%v   (dropped)", msg.Envelope{From: l.from, To: l.to, Msg: m})
		}
		h.queue[l] = q[n:]
	case "cut", "heal":
		h.cut[lnk()] = td.Cmd == "cut"
	case "fsync":
		nd, id := h.node(arg(0)), msg.NodeID(arg(0))
		switch {
		case len(pos) > 1:
			nd.hold = pos[1] == "hold"
		case nd.inflight == nil:
			h.printf(0, "%s: no fsync pending", id)
		default:
			h.input(id, 0, func(*shell.Broker) { nd.fsync() })
		}
	case "queue":
		for _, l := range h.links() {
			for _, m := range h.queue[l] {
				h.printf(0, "%v", msg.Envelope{From: l.from, To: l.to, Msg: m})
			}
		}
	case "floor":
		in := gd.ReleaseFloor{Pubend: msg.PubendID(arg(1)), Clear: slices.Contains(pos, "clear")}
		if !in.Clear {
			in.T = absTick(h, args["t"])
		}
		h.input(msg.NodeID(arg(0)), 0, func(b *shell.Broker) { b.ReleaseFloor(in) })
	case "describe":
		for _, id := range h.pick(pos) {
			h.out.WriteString(h.node(string(id)).eng.Describe())
		}
	case "cache":
		for _, id := range h.pick(pos) {
			for _, st := range h.node(string(id)).eng.Inspect() {
				h.printf(0, "%s %s: payloads cached %d B of %d, delivered to %d, known to %d", id, st.Pubend, st.Cached, st.CacheBudget, st.Delivered, st.KnownHi)
			}
		}
	case "stats":
		for _, id := range h.pick(pos) {
			st := h.node(string(id)).eng.Stats()
			h.printf(0, "%s: contradictions %d, unobserved D %d, payloads evicted %d", id, st.Contradictions, st.UnobservedD, st.Evicted)
		}
	default:
		h.fatalf("unknown command %q", td.Cmd)
	}
}

// request sends m on the node's client connection.
func (h *harness) request(id string, m msg.Msg) {
	n := h.node(id)
	h.input(n.id, 0, func(b *shell.Broker) { b.ClientRequest(n.client, m) })
}

func cmp(s, def string) string {
	if s == "" {
		return def
	}
	return s
}

// network builds the engines. Each pubend's tree is the set of "a -> b"
// edges reachable from its host; a broker's route has its parent as Up and
// its children as Down.
func (h *harness) network(args map[string]string, input string) {
	h.cfg = gd.DefaultConfig()
	fields := map[string]*time.Duration{
		"tick": &h.cfg.TickInterval, "gct": &h.cfg.GapCuriosityThreshold, "nrt": &h.cfg.NackRepetitionMin,
		"nrtmax": &h.cfg.NackRepetitionMax, "forget": &h.cfg.ForgettingInterval, "dct": &h.cfg.DelayCuriosityThreshold,
		"aet": &h.cfg.AckExpectedThreshold, "silence": &h.cfg.SilenceInterval, "ack": &h.cfg.AckInterval,
		"chunk": &h.cfg.NackChunk, "hwm": &h.cfg.HWMLead, "maxretain": &h.cfg.MaxRetain,
		"gonemin": &h.cfg.GoneMin,
	}
	for k, v := range args {
		if k == "cc" { // congestion control on
			h.cfg.CongestionControl = v == "on"
			continue
		}
		if k == "besteffort" { // Config.BestEffort
			h.cfg.BestEffort = v == "on"
			continue
		}
		if k == "dcq" {
			d, err := time.ParseDuration(v)
			if err != nil {
				h.fatalf("bad config %s=%s", k, v)
			}
			h.cfg.Congestion.DCQInterval = d
			continue
		}
		if k == "releasegone" {
			h.cfg.ReleaseGone = v == "true"
			continue
		}
		if k == "relaycache" || k == "pubendcache" || k == "deltamin" || k == "totalhold" || k == "window" || k == "windowbytes" { // bytes, bytes, clauses, bytes, events, bytes
			n, err := strconv.ParseInt(v, 10, 64)
			if err != nil {
				h.fatalf("bad config %s=%s", k, v)
			}
			switch k {
			case "deltamin":
				h.cfg.SummaryDeltaMin = int(n)
			case "totalhold":
				h.cfg.TotalOrderHoldBytes = n
			case "window":
				h.cfg.CatchupWindowEvents = int(n)
			case "windowbytes":
				h.cfg.CatchupWindowBytes = n
			case "pubendcache":
				h.cfg.PubendCacheBytes = n
			default:
				h.cfg.RelayCacheBytes = n
			}
			continue
		}
		d, err := time.ParseDuration(v)
		if fields[k] == nil || err != nil {
			h.fatalf("bad config %s=%s", k, v)
		}
		*fields[k] = d
	}
	if _, ok := args["forget"]; !ok {
		h.cfg.ForgettingInterval = h.cfg.NackRepetitionMin
	}
	children := map[msg.NodeID][]msg.NodeID{}
	parent := map[msg.NodeID]msg.NodeID{}
	hosts := map[msg.PubendID]msg.NodeID{}
	all := map[msg.NodeID]bool{}
	standby := map[msg.NodeID]bool{}
	h.cells = nil
	for _, line := range strings.Split(input, "\n") {
		if f := strings.Fields(line); len(f) > 3 && f[0] == "cell" && f[2] == "=" {
			if h.cells == nil {
				h.cells = gd.Cells{}
			}
			for _, m := range f[3:] {
				h.cells[msg.NodeID(f[1])] = append(h.cells[msg.NodeID(f[1])], msg.NodeID(m))
			}
			continue
		}
		if f := strings.Fields(line); len(f) > 1 && f[0] == "standby" {
			for _, m := range f[1:] {
				standby[msg.NodeID(m)] = true
			}
			continue
		}
		if f := strings.Fields(line); len(f) > 0 && f[0] == "pubends" {
			for _, kv := range f[1:] {
				n, p, _ := strings.Cut(kv, "=")
				hosts[msg.PubendID(p)] = msg.NodeID(n)
				all[msg.NodeID(n)] = true
			}
			continue
		}
		chain := strings.Split(strings.ReplaceAll(line, " ", ""), "->")
		for i, c := range chain {
			if c == "" {
				continue
			}
			all[msg.NodeID(c)] = true
			if a, b := msg.NodeID(chain[max(i-1, 0)]), msg.NodeID(c); i > 0 {
				if p, ok := parent[b]; ok && p != a {
					h.fatalf("%s has two parents", b)
				} else if !ok {
					parent[b] = a
					children[a] = append(children[a], b)
				}
			}
		}
	}
	routes := map[msg.NodeID][]gd.Route{}
	for p, host := range hosts {
		for todo := []msg.NodeID{host}; len(todo) > 0; todo = todo[1:] {
			n, up := todo[0], parent[todo[0]]
			if n == host {
				up = ""
			}
			routes[n] = append(routes[n], gd.Route{Pubend: p, Up: up, Down: children[n]})
			todo = append(todo, children[n]...)
		}
	}
	h.now, h.nodes, h.ids = epochTime, map[msg.NodeID]*node{}, nil
	h.queue, h.cut, h.seqs = map[link][]msg.Msg{}, map[link]bool{}, map[string]uint64{}
	for c, ms := range h.cells { // a cell's members take its routes
		delete(all, c)
		for _, m := range ms {
			all[m] = true
			routes[m] = routes[c]
		}
	}
	for id := range all {
		rs := slices.Clone(routes[id])
		slices.SortFunc(rs, func(a, b gd.Route) int { return strings.Compare(string(a.Pubend), string(b.Pubend)) })
		n := &node{h: h, id: id, routes: rs, inc: 1, standby: standby[id]}
		h.newShell(n)
		h.nodes[id] = n
		h.ids = append(h.ids, id)
	}
	slices.Sort(h.ids)
}

// restart replaces a node's engine by a fresh one (soft state lost; a PHB
// restores its pubends from its durable log) and loses what was in flight
// to or from it.
func (h *harness) restart(id msg.NodeID) {
	n := h.node(string(id))
	for _, l := range h.links() {
		if l.from == id || l.to == id {
			for _, m := range h.queue[l] {
				h.printf(0, "%v   (lost: %s restarted)", msg.Envelope{From: l.from, To: l.to, Msg: m}, id)
			}
			delete(h.queue, l)
		}
	}
	n.inflight = nil // lost with the process: never acked
	h.newShell(n)
	n.inc++
	h.printf(0, "%s restarted (incarnation %d)", id, n.inc)
}

// failover hands a replicated PHB cell's pubends from member a to member b:
// b serves from what a logged (Raft replicated it), a becomes a standby.
func (h *harness) failover(a, b msg.NodeID) {
	na, nb := h.node(string(a)), h.node(string(b))
	if na.standby || !nb.standby {
		h.fatalf("failover %s %s: %s must serve and %s be a standby", a, b, a, b)
	}
	nb.log = slices.Clone(na.log)
	na.standby, nb.standby = true, false
	h.restart(a)
	h.restart(b)
}

// advance moves the clock, optionally ticking (and delivering) on the way.
func (h *harness) advance(d time.Duration, ticks, deliver, quiet bool) {
	end, ti := h.now.Add(d), tick.Time(h.cfg.TickInterval)
	h.quiet = quiet
	for next := (h.now/ti + 1) * ti; ticks && next <= end; next += ti {
		h.now = next
		h.head = fmt.Sprintf("[+%v] tick", time.Duration(h.now-epochTime))
		for _, id := range h.ids {
			h.input(id, 0, (*shell.Broker).Tick)
		}
		if deliver {
			h.stabilize()
		}
	}
	h.now, h.head, h.quiet = end, "", false
	h.printf(0, "now +%v", time.Duration(h.now-epochTime))
}

func (h *harness) pick(pos []string) []msg.NodeID {
	if len(pos) == 0 {
		return h.ids
	}
	ids := make([]msg.NodeID, len(pos))
	for i, p := range pos {
		ids[i] = msg.NodeID(p)
	}
	return ids
}

// absTick reads a tick written as relTicks prints it (t<ms>[.seq]).
func absTick(h *harness, s string) tick.Tick {
	if s == "0" {
		return 0
	}
	ms, seq, _ := strings.Cut(strings.TrimPrefix(s, "t"), ".")
	m, err := strconv.ParseInt(ms, 10, 64)
	if err != nil || !strings.HasPrefix(s, "t") {
		h.fatalf("bad tick %q (want t<ms>[.seq])", s)
	}
	t := tick.FromMillis(epochMs + m)
	if seq != "" {
		n, err := strconv.ParseUint(seq, 10, 64)
		if err != nil {
			h.fatalf("bad tick %q", s)
		}
		t += tick.Tick(n)
	}
	return t
}

var bigNum = regexp.MustCompile(`\d{15,}`)

// relTicks rewrites every absolute tick in s relative to the epoch.
func relTicks(s string) string {
	return bigNum.ReplaceAllStringFunc(s, func(d string) string {
		n, err := strconv.ParseUint(d, 10, 64)
		switch {
		case err != nil:
			return d
		case n == math.MaxUint64:
			return "∞"
		}
		rel := fmt.Sprintf("t%d", tick.Tick(n).Millis()-epochMs)
		if seq := n & (1<<tick.SubTickBits - 1); seq != 0 {
			rel += fmt.Sprintf(".%d", seq)
		}
		return rel
	})
}
