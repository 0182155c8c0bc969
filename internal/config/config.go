// Package config reads and writes the network config, the TOML file that
// names every broker of an aerie network and the virtual links between their
// cells (docs/CONFIG.md, a product contract):
//
//	[[broker]]
//	id      = "p1"
//	cell    = "phb"               # optional; defaults to id
//	listen  = "127.0.0.1:7101"    # broker-to-broker
//	clients = "127.0.0.1:7201"    # client connections (optional)
//	data    = "data/p1"           # optional for brokers without durable state
//	pubends = ["P1", "P2"]        # makes this broker a PHB for these pubends
//	gossip  = "127.0.0.1:7301"    # membership (memberlist UDP+TCP); optional
//	http    = "127.0.0.1:7401"    # /metrics, /healthz, /readyz, dashboard; optional
//	max_retain = "168h"           # early-release bound of its pubends; optional
//	raft_clients = "forward"      # a replicated PHB member's clients while another leads:
//	                              # "forward" (default) or "redirect"; optional
//	raft_election_timeout = "1s"  # a replicated PHB cell's election timeout (all its
//	                              # members alike; 100ms to 60s, default 1s); optional
//	raft_slot = 4                 # a replicated PHB member's place in its cell (1 to 255;
//	                              # default: its position in the cell's sorted member
//	                              # list, among members without one); optional
//
//	[[link]]                      # from an upstream cell to a downstream cell
//	up   = "phb"
//	down = "b1"
//
// A link may carry bandwidth = "500KB/s": what the upstream cell sends on
// it, per connection, is paced to that (docs/CONFIG.md). A top-level
// congestion_control = true | false switches Gryphon CC on or off in every
// broker; absent, it runs (CongestionOn).
//
// A top-level memory_budget = "512MiB" bounds the memory of every broker
// process: over it a broker sheds its payload caches (MemoryBudget).
//
// A top-level seeds = ["p1", "b1"] (before the first table) names the
// brokers whose gossip address a broker joins the membership through; by
// default every broker with a gossip address is a seed. Brokers without a
// gossip address run no membership: their liveness comes from their TCP
// links alone (heartbeats).
//
// Parse refuses anything it does not understand, unknown keys included, and
// reports every problem at once, each as file:line:col: message. Per pubend,
// the links reachable downward from its PHB's cell must form a tree [000 §3];
// Routes turns that tree into one broker's gd.Route list.
//
// A [chaos] table configures the chaos monkey: spare = ["p1"] names the
// brokers it never touches (its blind spots), which `aerie chaos` honours
// too. With interval = "10m" every other broker runs the monkey in its own
// process: about once per interval it crashes itself (as kill -9 would,
// leaving the restart to its supervisor) or drops every link, as
// faults = ["crash", "links"] (the default) allow.
//
// A cell of several brokers is a redundant intermediate virtual broker
// (seed 000 §3): its brokers share the cell's place in every tree, each
// with its own replica of the streams, and every link to or from the cell
// is a bundle of connections to each of them (Cells, Peers). A cell of
// 2 to 7 brokers that all list the same pubends is a replicated PHB
// instead: one Raft group for those pubends (replicated.go, Replicas).
// An odd count is best: an even one is allowed, and the broker warns at
// start (raftphb.EvenCellWarning) that a cell of 2n members tolerates no more
// failures than one of 2n−1 (a majority of 4 is 3, so it survives one
// failure, like a cell of 3) while every write waits for one more member.
package config

import (
	"fmt"
	"os"
	"slices"
	"time"

	"github.com/BurntSushi/toml"

	"github.com/aerie-mq/aerie/internal/gd"
	"github.com/aerie-mq/aerie/internal/msg"
)

// Network is a parsed network config.
type Network struct {
	// Seeds are the ids of the brokers whose gossip address the others
	// join through; nil means every broker with a gossip address.
	Seeds   []string
	Brokers []Broker
	Links   []Link
	// Bandwidth holds the bandwidth of the links that have one: the bytes
	// per second the upstream cell sends on the link, per connection of
	// the bundle (docs/CONFIG.md; Gryphon CC §5's bandwidth limits). Kept
	// apart from Link so that a Link stays its two ends.
	Bandwidth map[Link]int64
	// Chaos is the [chaos] table; nil when absent.
	Chaos *Chaos
	// TLS is the [tls] table (security.go); nil: no TLS anywhere.
	TLS *TLS
	// Users are the [[user]] tables; when there is one, every client must
	// authenticate.
	Users []User
	// Anonymous is the [anonymous] table (security.go): what a client
	// without credentials may do when there are users; nil: nothing, it
	// is refused.
	Anonymous *Anonymous
	// CongestionControl is the top-level congestion_control key: nil when
	// absent (on, CongestionOn), else what it says. Switching it off is
	// for experiments that watch a network collapse under overload
	// (Gryphon CC §2).
	CongestionControl *bool
	// MemoryBudget is the top-level memory_budget key: the memory each
	// broker process may use, in bytes; 0 when absent (no budget). Over
	// it a broker sheds its payload caches (gd.Shed, shell.Memory) and
	// its Go runtime collects garbage harder (debug.SetMemoryLimit).
	MemoryBudget int64
}

// CongestionOn reports whether the brokers of the network run congestion
// control (Gryphon CC, Middleware 2003; gd.Config.CongestionControl): what
// congestion_control says, and on when it is absent. Every broker of a
// network decides alike: a broker without it passes no DCQ on and answers
// none, so its subtree would go unregulated.
//
// On by default, with or without a bandwidth on any link: a bottleneck no
// one declared (a WAN link, a slow disk, a starved broker) needs the
// regulation most, and where nothing is congested it costs nothing
// measurable (docs/BENCHMARKS.md §11b).
func (n *Network) CongestionOn() bool {
	if n.CongestionControl != nil {
		return *n.CongestionControl
	}
	return true
}

// Chaos is the [chaos] table: what the chaos monkey may do.
type Chaos struct {
	// Spare lists the brokers the monkey never touches.
	Spare []string
	// Interval is the mean time between the in-process monkey's actions;
	// 0 (no interval key) leaves it off.
	Interval time.Duration
	// Faults are the actions it may take (ChaosFaults); nil: all.
	Faults []string
}

// ChaosFaults are the in-process monkey's actions: crash the broker, or
// drop every link of it.
var ChaosFaults = []string{"crash", "links"}

// Broker is one [[broker]] table.
type Broker struct {
	ID      string
	Cell    string // defaults to ID; "" means ID
	Listen  string // host:port for broker-to-broker traffic
	Clients string // host:port for clients; "" for none
	Data    string // data directory; "" for brokers without durable state
	// TLSCert and TLSKey are the broker's certificate and key (PEM files,
	// relative to the config file); required when [tls] is set.
	TLSCert, TLSKey string
	Pubends         []string
	// Gossip is the membership address (memberlist, UDP and TCP on one
	// port); "" runs no membership on this broker.
	Gossip string
	// HTTP serves /metrics, /healthz, /readyz, /status and a dashboard;
	// "" serves none.
	HTTP string
	// MaxRetain is max_retain, the early-release bound of the pubends this
	// broker hosts (Gryphon DS, DSN 2003 §3; gd.Config.MaxRetain): a tick
	// older than this that every SHB has delivered is discarded even if a
	// durable subscriber that is away has not acknowledged it (it gets a
	// gap notice). 0 never releases early; otherwise it is at least the
	// links' heartbeat timeout (transport.DefaultDeadAfter), or it would
	// release past downstream brokers that are merely slow. nil when the
	// key is absent: Retain gives the default, 168h.
	MaxRetain *time.Duration
	// MaxRetainBytes is max_retain_bytes, the size bound beside MaxRetain
	// (gd.Config.MaxRetainBytes): past it each pubend this broker hosts
	// releases its oldest events every SHB has delivered, whatever their
	// age, with the same gap to a durable subscriber that is away. 0 when
	// absent: no size bound.
	MaxRetainBytes int64
	// DiskReserve is disk_reserve: while the filesystem of this broker's
	// event log has less room than this, it refuses new publishes with
	// the reason rather than fill the disk (broker.Options.DiskReserve).
	// 0 when absent: the default, four log segments (32 MiB); -1 for
	// "0": no reserve (a full disk is still refused, once an append
	// fails on it).
	DiskReserve int64
	// CatchupWindow and CatchupWindowBytes are catchup_window and
	// catchup_window_bytes, the catch-up window of the durable
	// subscriptions this broker holds (gd.Config.CatchupWindowEvents,
	// CatchupWindowBytes): the catch-up events delivered to a subscriber
	// and not yet reported taken by its client. 0 when absent: the
	// defaults, 10 000 events and 8 MiB. At least MinCatchupWindow and
	// MinCatchupWindowBytes, twice what a client leaves unreported.
	CatchupWindow      int
	CatchupWindowBytes int64
	// RelayCacheBytes is relay_cache_bytes (gd.Config.RelayCacheBytes):
	// the payload bytes of each pubend this broker does not host that it
	// keeps in memory, an IB's cache for its downstreams' nacks and an SHB's payloads
	// above a gap it recovers. 0 when absent: the default, 64 MiB. From
	// MinRelayCacheBytes to MaxRelayCacheBytes.
	RelayCacheBytes int64
	// MQTT is the MQTT 3.1.1 and 5 listener (docs/MQTT.md); "" serves none.
	MQTT string
	// RaftClients is raft_clients, what a member of a replicated PHB cell
	// does with a client while it does not serve: RaftClientsForward
	// (forward its publishes to the serving leader and relay the acks) or
	// RaftClientsRedirect (close it: "try another member"). "" when
	// absent: the broker's default (forward; docs/REPLICATION.md "Clients").
	RaftClients string
	// RaftElection is raft_election_timeout, the election timeout of a
	// replicated PHB cell (every member of a cell alike): a follower that
	// hears nothing from a leader for between it and twice it campaigns, so
	// a leader's crash stops publishing for about that long. Shorter fails
	// over sooner and mistakes a leader slowed by its machine for a dead
	// one more often. nil when absent: the broker's default, 1s.
	RaftElection *time.Duration
	// RaftSlot is raft_slot, the member's slot in its replicated PHB cell
	// (its Raft id's low bits, raftphb.MemberID): 0 when absent, then the
	// slot is its position among the cell's members without one
	// (Network.RaftSlots). A member's slot must never change while its
	// data directory lives: a cell that gains or loses a member keeps the
	// others' slots by giving the newcomer, or the members after a removed
	// one, an explicit slot (docs/REPLICATION.md "Changing a cell's
	// members").
	RaftSlot uint64
}

// MaxRaftSlot is the highest raft_slot (raftphb.MaxSlots: a Raft id keeps
// the slot in its low 8 bits).
const MaxRaftSlot = 255

// RaftElectionBounds bound raft_election_timeout: below 100ms a leader's
// heartbeats (a tenth of it) leave too little room for a loaded machine's
// scheduling delays; above a minute a leader's crash stops publishing for
// minutes.
var RaftElectionBounds = [2]time.Duration{100 * time.Millisecond, time.Minute}

// The values of raft_clients.
const (
	RaftClientsForward  = "forward"
	RaftClientsRedirect = "redirect"
)

// Retain returns the broker's early-release bound: max_retain, or the
// default (gd.DefaultConfig().MaxRetain, 168h) when absent.
func (b Broker) Retain() time.Duration {
	if b.MaxRetain != nil {
		return *b.MaxRetain
	}
	return gd.DefaultConfig().MaxRetain
}

// Link is one [[link]] table: a virtual link from the upstream cell Up to
// the downstream cell Down.
type Link struct {
	Up, Down string
}

// Keys of the format, in the order Marshal writes them.
var (
	topKeys    = []string{"seeds", "congestion_control", "memory_budget", "broker", "link", "chaos"}
	chaosKeys  = []string{"spare", "interval", "faults"}
	brokerKeys = []string{"id", "cell", "listen", "clients", "data", "pubends", "gossip", "http", "max_retain", "mqtt", "raft_clients", "raft_election_timeout", "raft_slot"}
	linkKeys   = []string{"up", "down", "bandwidth"}
)

// Load reads and parses the network config at path.
func Load(path string) (*Network, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("config: %w", err)
	}
	return Parse(data, path)
}

// Parse parses a network config; name (usually the file's path) prefixes
// every error. It returns every problem found, joined.
func Parse(data []byte, name string) (*Network, error) {
	p := &problems{file: name}
	var top map[string]any
	if _, err := toml.Decode(string(data), &top); err != nil {
		p.syntax(data, err)
		return nil, p.err()
	}
	p.loc = newLocator(data)
	okBrokers, okLinks := p.shape(top, "broker"), p.shape(top, "link")
	if okUsers := p.shape(top, "user"); !okBrokers || !okLinks || !okUsers {
		return nil, p.err()
	}
	var raw rawNetwork
	md, err := toml.Decode(string(data), &raw)
	if err != nil { // not expected once the shape is right
		p.syntax(data, err)
		return nil, p.err()
	}
	bad := map[fieldRef]bool{}
	n := p.convert(&raw, bad)
	p.unknownKeys(md)
	n.check(p, bad)
	if err := p.err(); err != nil {
		return nil, err
	}
	return n, nil
}

// Validate checks a network built in code (e.g. by Dev) as Parse checks a
// file, without positions.
func (n *Network) Validate() error {
	p := &problems{}
	n.check(p, nil)
	return p.err()
}

// Broker returns the broker with the given id.
func (n *Network) Broker(id string) (Broker, bool) {
	for _, b := range n.Brokers {
		if b.ID == id {
			return b, true
		}
	}
	return Broker{}, false
}

// CellID returns b's cell, applying the default (its id).
func (b Broker) CellID() string { return b.cell() }

// cell returns b's cell, applying the default.
func (b Broker) cell() string {
	if b.Cell == "" {
		return b.ID
	}
	return b.Cell
}

// Routes returns broker id's place in every pubend's tree whose cells
// include the broker's cell, sorted by pubend: Up is the upstream cell on
// the path from the pubend's PHB ("" when this broker hosts the pubend),
// Down the downstream cells, sorted (gd.NewWithCells with Cells). It
// assumes a valid network; an unknown id has no routes.
func (n *Network) Routes(id string) []gd.Route {
	me, ok := n.Broker(id)
	if !ok {
		return nil
	}
	cell := me.cell()
	hostCell := map[string]string{} // pubend → its PHB's cell
	var pubends []string
	for _, b := range n.Brokers {
		for _, p := range b.Pubends {
			if _, dup := hostCell[p]; !dup {
				hostCell[p] = b.cell()
				pubends = append(pubends, p)
			}
		}
	}
	slices.Sort(pubends)
	down := n.downLinks()
	var routes []gd.Route
	for _, p := range pubends {
		t := walkTree(hostCell[p], down, n.Links)
		parent, in := t.parent[cell]
		if !in {
			continue
		}
		r := gd.Route{Pubend: msg.PubendID(p)}
		if cell != hostCell[p] {
			r.Up = msg.NodeID(parent)
		}
		for _, c := range t.children[cell] {
			r.Down = append(r.Down, msg.NodeID(c))
		}
		slices.Sort(r.Down)
		routes = append(routes, r)
	}
	return routes
}

// Cells returns every cell with its brokers, sorted: routes name cells,
// and the engine needs to know who is in each.
func (n *Network) Cells() gd.Cells {
	out := gd.Cells{}
	for _, b := range n.Brokers {
		c := msg.NodeID(b.cell())
		out[c] = append(out[c], msg.NodeID(b.ID))
	}
	for _, ms := range out {
		slices.Sort(ms)
	}
	return out
}

// SeedAddrs returns the gossip addresses to join the membership through:
// those of the configured seeds, else of every broker with a gossip
// address, in config order. It assumes a valid network.
func (n *Network) SeedAddrs() []string {
	var out []string
	for _, b := range n.Brokers {
		if b.Gossip == "" {
			continue
		}
		if n.Seeds == nil || slices.Contains(n.Seeds, b.ID) {
			out = append(out, b.Gossip)
		}
	}
	return out
}

// Dials returns the brokers that broker id connects to: every member of its
// upstream cells (a link bundle), and the members of its own cell whose ids
// sort after its own. The others connect to it.
func (n *Network) Dials(id string) []string {
	var out []string
	cells := n.Cells()
	for _, r := range n.Routes(id) {
		for _, m := range cells[r.Up] { // none for a hosted pubend (Up "")
			if !slices.Contains(out, string(m)) {
				out = append(out, string(m))
			}
		}
	}
	for _, p := range n.Peers(id) {
		if p > id {
			out = append(out, p)
		}
	}
	return out
}

// Peers returns the other brokers of id's cell, sorted.
func (n *Network) Peers(id string) []string {
	me, ok := n.Broker(id)
	if !ok {
		return nil
	}
	var out []string
	for _, b := range n.Brokers {
		if b.ID != id && b.cell() == me.cell() {
			out = append(out, b.ID)
		}
	}
	slices.Sort(out)
	return out
}

// downLinks indexes the usable links (not self-links, not repeats) by
// upstream cell, in file order.
func (n *Network) downLinks() map[string][]int {
	down := map[string][]int{}
	seen := map[Link]bool{}
	for i, l := range n.Links {
		if l.Up == "" || l.Down == "" || l.Up == l.Down || seen[l] {
			continue
		}
		seen[l] = true
		down[l.Up] = append(down[l.Up], i)
	}
	return down
}

// tree is what a breadth-first walk down the links from a pubend's cell
// reaches.
type tree struct {
	parent   map[string]string   // cell → cell it was first reached from ("" for the root)
	children map[string][]string // cell → cells first reached from it
	twice    []reachedTwice      // cells reached again: not a tree
}

type reachedTwice struct {
	cell, first, again string // again: the cell it was reached from the second time
	link               int    // the link that reached it again
}

func walkTree(root string, down map[string][]int, links []Link) tree {
	t := tree{parent: map[string]string{root: ""}, children: map[string][]string{}}
	reported := map[string]bool{}
	queue := []string{root}
	for len(queue) > 0 {
		u := queue[0]
		queue = queue[1:]
		for _, li := range down[u] {
			d := links[li].Down
			if first, seen := t.parent[d]; seen {
				if !reported[d] {
					reported[d] = true
					t.twice = append(t.twice, reachedTwice{cell: d, first: first, again: u, link: li})
				}
				continue
			}
			t.parent[d] = u
			t.children[u] = append(t.children[u], d)
			queue = append(queue, d)
		}
	}
	return t
}
