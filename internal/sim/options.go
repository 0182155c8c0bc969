// Package sim runs whole aerie networks — the same gd engines the broker
// runtime drives — in one goroutine under simulated time, links, disks and
// clocks, with faults drawn from a seed (swarm testing, modelled on
// TigerBeetle's VOPR and FoundationDB's simulator). An oracle checks the
// invariants of docs/CONCEPTS.md "Invariants" after every step; the run ends with a
// heal-and-converge phase that checks liveness (I11). A seed reproduces a run
// exactly.
package sim

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"time"

	"github.com/aerie-mq/aerie/internal/gd"
	"github.com/aerie-mq/aerie/internal/msg"
	raftnode "github.com/aerie-mq/aerie/internal/raftphb/node"
	"github.com/aerie-mq/aerie/internal/tick"
)

// Fault kinds a run may inject.
const (
	FaultCrash     = "crash"     // broker crash and restart, every role
	FaultCut       = "cut"       // link cut, then heal
	FaultStall     = "stall"     // link accepts but does not forward, then fails (seed 000 §4.2)
	FaultPartition = "partition" // every link of one broker cut at once
	FaultLoss      = "loss"      // connections reset (a message is lost, the link reconnects)
	FaultDelay     = "delay"     // delay variance on links
	FaultDrift     = "drift"     // clocks drift, are offset, and step back across restarts
	FaultIOError   = "ioerror"   // a PHB's fsync fails: the broker stops (crash-only) and restarts
	// FaultCells is not a fault but redundancy to break: intermediate cells
	// of two brokers joined by link bundles (seed 000 §3), so that crashes
	// and cuts hit single members of a cell and single links of a bundle.
	FaultCells = "cells"
	// FaultHang: a broker stops answering for 2–3 s (its links stall, its
	// failure detector probes go unanswered), then crashes: seed 000 §4.2's
	// "stall, then fail" for a whole broker, which membership detects.
	FaultHang = "hang"
	// FaultLeave: a broker leaves gracefully, as the broker does when it
	// is shut down (its view layer says Bye, memberlist leaves), stops, and
	// restarts later as a new incarnation; the views must record a leave.
	FaultLeave = "leave"
	// FaultReplicas is not a fault but redundancy to break: PHBs become
	// replicated cells of 3 or 5 members, one Raft group each (raft.go),
	// and crashes prefer their leaders.
	FaultReplicas = "replicas"
	// FaultOverload caps a link's bandwidth below what the publishers may
	// offer for 2–10 s (Gryphon CC §2); the swarm runs congestion control
	// in every run, with this fault or without it, as real brokers do.
	FaultOverload = "overload"
	// FaultWipe turns some crashes of a replicated PHB cell's member into
	// a lost disk: its data directory is empty when it restarts (an
	// operator replaced the disk), so it rejoins its cell as a new member
	// (Raft thesis §4). Only while its cell has no replacement under way
	// and every member up: a second lost disk before the first member is
	// back would be a majority's state lost in a cell of 3.
	FaultWipe = "wipe"
	// FaultMembers changes replicated PHB cells' members: a member of a
	// settled cell (the serving leader half the time) is removed from the
	// config and stops, and is added back 2–8 s later as a new machine with
	// an empty disk (members.go).
	FaultMembers = "members"
	// FaultFailover is not a fault but a replicated PHB cell's fast
	// failover: a member whose link to another closes is told, as the
	// broker tells its Raft member (raftphb.Replica.PeerDown), so that a
	// follower of a crashed or cut-off leader campaigns at once instead of
	// after its election timeout. Runs without it (every seed found
	// before it, which keeps its fault set) elect on timeouts alone.
	FaultFailover = "failover"
	// FaultSummary damages, at some crashes of a broker with a disk, one
	// of the summaries its event log keeps of its sealed segments
	// (internal/storage): torn, replaced by another segment's, or a byte
	// flipped. A crash tears them by itself too at half the crashes (they
	// are written without an fsync; at the others the kernel had written
	// them back, crashFS); a restart must ignore a summary that does not
	// hold and read its segment instead (checkRestored).
	FaultSummary = "summary"
	// FaultDiskFull fills a PHB's disk for 0.2–5 s (vfs.MemFS.SetFull):
	// its writes and fsyncs fail with ENOSPC. A plain PHB refuses
	// publishes meanwhile and reopens its log once room returns
	// (shell.Reopener); a replicated cell's member whose Raft log fsync
	// fails waits for room and writes its Ready again (raftnode
	// Node.ResumeLog), and one whose pubend store fails stops
	// (crash-only), cuts its failed logs back to their synced records,
	// and is restarted, its cell going on without it. Members of a cell
	// that has not formed are spared (cellFormed). Nothing acknowledged
	// may be lost.
	FaultDiskFull = "diskfull"
	// FaultShed has a broker shed its caches for 0.2–5 s, as one whose
	// live heap is over its memory budget does (gd.Shed, shell.Memory):
	// its payload caches count as empty, its catch-up windows are the
	// least. Payloads then come back from upstream or the PHB's log more
	// often; nothing may be lost, duplicated or held past its bound.
	FaultShed = "shed"
)

// AllFaults lists every fault kind.
var allFaults = []string{FaultCrash, FaultCut, FaultStall, FaultPartition, FaultLoss, FaultDelay, FaultDrift, FaultIOError, FaultCells, FaultHang, FaultLeave, FaultReplicas, FaultOverload, FaultWipe, FaultFailover, FaultMembers, FaultSummary, FaultDiskFull, FaultShed}

// defaultFaults are the fault kinds a run allows unless told otherwise:
// every kind. Overload (congestion control under capped links) and
// diskfull joined them once the swarm passed with them
// (docs/known-issues/congestion-swarm.md); each decides from its own
// sub-seed, so every other fault of a seed replays as before.
var defaultFaults = slices.Clone(allFaults)

// FaultNames returns every fault kind, for flag help.
func FaultNames() []string { return slices.Clone(allFaults) }

// Options configure one run. Zero fields are drawn from the seed.
type Options struct {
	Seed     uint64
	Topology string   // "swarm" (default), "line", "fig6"
	Faults   []string // allowed fault kinds; nil = all (each enabled or not by the seed)
	// FaultPhase is how long publishing and faults last; then everything
	// heals and the network must converge within ConvergePhase.
	FaultPhase    time.Duration
	ConvergePhase time.Duration
	Config        gd.Config
	Mutation      gd.Mutation // tests only: break one protocol rule
	// FDSilent (tests only) breaks the simulated failure detector: it never
	// reports anything, so no member learns of another.
	FDSilent bool
	// Groups adds a consumer group to the swarm (groups.go): members at
	// its home that join, acknowledge, leave and lose their connections,
	// checked by the group's own invariants G1–G4. Off by default, so
	// the seeds of the swarm replay as before.
	Groups bool
	// AckFullSync (tests only): a plain PHB whose fsync failed on a full
	// disk (FaultDiskFull) reopens its log and reports the batch durable
	// anyway, as a broker that ignored the error would.
	AckFullSync bool
	// RaftMutation (tests only): the replicated PHB members' broken rules
	// (raftphb/node mutation.go), as Mutation is the engines'.
	RaftMutation raftnode.Mutation
	// RaftChunkBytes, when set, cuts the snapshots of replicated PHB
	// members into chunks of this size (raftphb/node.Compaction); the
	// default (1 MiB) is above any store the simulator builds, so its
	// snapshots travel in one message.
	RaftChunkBytes int
	// RaftClients says what the members of replicated PHB cells that do
	// not serve do with publishing clients (forward.go): "forward" their
	// publishes to the serving leader, "redirect" them (close the
	// connection; the client moves to the next member), or "" to draw one
	// per run.
	RaftClients string
	// NoAckPublishes says whether publishers send every third publish
	// asking for no ack (msg.Publish.NoAck, client.PublishNoAck): "on",
	// "off", or "" to draw it (in a third of the runs).
	NoAckPublishes string
	// Anywhere says whether each pubend of a plain PHB also gets a
	// publisher at an SHB of its tree, whose publishes the brokers relay
	// to the PHB (relay.go): "on", "off", or "" to draw it (in half the
	// swarm runs without capped links).
	Anywhere string
	// Unfenced (tests only) switches the view layer's fencing off: a
	// member cut off with a minority issues views anyway (member.Config).
	Unfenced bool
	// Scenario replaces random faults with a fixed script (e.g. "fig6",
	// or a Gryphon DS §5 experiment: ScenarioDSChurn, ScenarioDSCrash).
	Scenario string
	// DS shapes a DS experiment (ds.go); zero fields take defaults.
	DS DSParams
	// NoCongestionControl keeps congestion control off even where the
	// plan would run it: to watch the collapse of Gryphon CC §2.
	NoCongestionControl bool
	// NoSizeBound and TrimOnlyWhenIdle (tests only) run the swarm as it
	// ran before pubends had a size bound (max_retain_bytes) and trimmed
	// under load (shell.Config.TrimOnlyWhenIdle): a mutation test whose
	// scenario those make rare keeps its seeds.
	NoSizeBound, TrimOnlyWhenIdle bool
	// LinkQueueBytes is how many bytes one direction of a capped link
	// queues before the connection resets (congestion.go); 0 is
	// linkQueueBytes.
	LinkQueueBytes int
	// IBRelayCacheBytes, when positive, is the relay cache of every IB
	// (gd.Config.RelayCacheBytes there): the scenario "cc-collapse-pb"
	// makes it smaller than an outage, as in Gryphon CC §2 where the IB
	// could not answer a recovering SHB from its cache.
	IBRelayCacheBytes int64
	// Watch, when set with WatchLog, logs every message, delivery and
	// subscription event that concerns one tick of one pubend (diagnosis).
	WatchPubend msg.PubendID
	WatchTick   tick.Tick
	WatchLog    interface{ Write([]byte) (int, error) }
	// Trace, when set, receives per-broker time series as CSV.
	Trace interface{ Write([]byte) (int, error) }
	// KeepTrace keeps the same series in Result.Trace.
	KeepTrace bool
	// Scale shapes a run of the "scale" topology (scale.go).
	Scale ScaleParams
}

// DefaultOptions returns the options of `aerie sim` for one seed.
func DefaultOptions(seed uint64) Options {
	cfg := gd.DefaultConfig()
	// Backoff caps at 10s instead of 60s so a run converges in bounded
	// simulated time after healing; the protocol is the same.
	cfg.NackRepetitionMax = 10 * time.Second
	return Options{Seed: seed, Topology: "swarm", FaultPhase: 30 * time.Second, ConvergePhase: 60 * time.Second, Config: cfg}
}

// plan is what the seed decided for a run: printed first, so a reader knows
// what a failing run did.
type plan struct {
	topo        Topology
	faults      map[string]bool
	faultEvery  time.Duration
	linkDelay   time.Duration
	linkJitter  time.Duration
	lossProb    float64
	subscribers int
	diskLatency time.Duration
	// cacheBytes overrides Config.PubendCacheBytes when non-zero: small
	// caches make the PHB evict payloads and read them back from its log
	// to answer nacks.
	cacheBytes int64
	// maxRetain is every pubend's early-release bound (Config.MaxRetain),
	// and floors has SHBs stand in for durable subscribers that lag,
	// stay away and leave (release.go).
	maxRetain time.Duration
	floors    bool
	// maxRetainBytes is every pubend's size bound (Config.MaxRetainBytes):
	// 0 in half the runs, else a few events' worth, so that pubends
	// release by size past floors that stay behind.
	maxRetainBytes int64
	// raftMaxBytes bounds replicated members' Raft entries in memory
	// (raftnode.Compaction.MaxBytes): 0 (the default, 64 MiB, which no run
	// reaches) in half the runs, else a few KiB, so that members compact
	// by size as well as by count.
	raftMaxBytes int64
	// cc: congestion control runs (with the overload fault, or the "cc"
	// scenario).
	cc bool
	// noMembership: brokers run no view layer (scale runs: membership of
	// a thousand brokers is a subject of its own, docs/SCALE.md).
	noMembership bool
	scaleShape   ScaleShape
	// forward: the members of replicated cells forward their clients'
	// publishes (forward.go), drawn from its own sub-seed.
	forward bool
	// noAck: every third publish asks for no ack (Options.NoAckPublishes),
	// drawn from its own sub-seed.
	noAck bool
	// inOrder: the publishers of plain PHBs resend in order on a new
	// connection, as the Go client (publisher.inOrder), drawn from its
	// own sub-seed; otherwise they retry after a second.
	inOrder bool
	// anywhere: publishers at SHBs, relayed to their PHB (relay.go),
	// drawn from its own sub-seed.
	anywhere bool
}

func (p plan) String() string {
	var on []string
	for _, f := range allFaults {
		if p.faults[f] {
			on = append(on, f)
		}
	}
	cache, raftBytes := "default", "default"
	if p.cacheBytes > 0 {
		cache = fmt.Sprintf("%d B", p.cacheBytes)
	}
	if p.raftMaxBytes > 0 {
		raftBytes = fmt.Sprintf("%d B", p.raftMaxBytes)
	}
	return fmt.Sprintf("topology %v\nfaults [%s] every ~%v; link delay %v±%v loss %.3f; disk fsync %v; %d subscribers; pubend cache %s; max_retain %v, max_retain_bytes %d, durable floors %s; raft entries in memory %s; congestion control %s; raft clients %s; publishes without acks %s; plain PHB publishers %s; publishers at SHBs %s",
		p.topo, strings.Join(on, " "), p.faultEvery, p.linkDelay, p.linkJitter, p.lossProb, p.diskLatency, p.subscribers, cache, p.maxRetain, p.maxRetainBytes,
		either(p.floors, "on", "off"), raftBytes, either(p.cc, "on", "off"), either(p.forward, "forward", "redirect"),
		either(p.noAck, "every third", "off"), either(p.inOrder, "in order on reconnect", "retry after 1 s"),
		either(p.anywhere, "relayed to their PHB", "none"))
}

// either is yes if b, else no.
func either(b bool, yes, no string) string {
	if b {
		return yes
	}
	return no
}

func makePlan(o Options, rng *rand.Rand) (plan, error) {
	if o.Topology == "scale" {
		return makeScalePlan(o, rng)
	}
	topo, err := BuildTopology(o.Topology, rng)
	if err != nil {
		return plan{}, err
	}
	allowed := o.Faults
	if allowed == nil {
		allowed = defaultFaults
	}
	p := plan{topo: topo, faults: map[string]bool{}}
	// Faults added after the first release decide from their own sub-seed,
	// so that adding one does not change what every earlier seed replays.
	later := rand.New(rand.NewPCG(o.Seed, 0x6c61746572))    // "later"
	cellsRng := rand.New(rand.NewPCG(o.Seed, 0x63656c6c73)) // "cells"
	hangRng := rand.New(rand.NewPCG(o.Seed, 0x68616e67))    // "hang"
	leaveRng := rand.New(rand.NewPCG(o.Seed, 0x6c65617665)) // "leave"
	replRng := rand.New(rand.NewPCG(o.Seed, 0x7265706c))    // "repl"
	overRng := rand.New(rand.NewPCG(o.Seed, 0x6f766572))    // "over"
	wipeRng := rand.New(rand.NewPCG(o.Seed, 0x77697065))    // "wipe"
	membRng := rand.New(rand.NewPCG(o.Seed, 0x6d656d62))    // "memb"
	failRng := rand.New(rand.NewPCG(o.Seed, 0x6661696c))    // "fail"
	sumRng := rand.New(rand.NewPCG(o.Seed, 0x73756d73))     // "sums"
	fullRng := rand.New(rand.NewPCG(o.Seed, 0x6469736b))    // "disk"
	shedRng := rand.New(rand.NewPCG(o.Seed, 0x73686564))    // "shed"
	for _, f := range allowed {
		if !slices.Contains(allFaults, f) {
			return plan{}, fmt.Errorf("sim: unknown fault %q (known: %s)", f, strings.Join(allFaults, ","))
		}
		r := rng
		switch f {
		case FaultIOError:
			r = later
		case FaultCells:
			r = cellsRng
		case FaultHang:
			r = hangRng
		case FaultLeave:
			r = leaveRng
		case FaultReplicas:
			r = replRng
		case FaultOverload:
			r = overRng
		case FaultWipe:
			r = wipeRng
		case FaultMembers:
			r = membRng
		case FaultFailover:
			r = failRng
		case FaultSummary:
			r = sumRng
		case FaultDiskFull:
			r = fullRng
		case FaultShed:
			r = shedRng
		}
		// Swarm testing: each allowed fault is on in about two thirds of runs.
		if o.Scenario != "" || r.IntN(3) > 0 {
			p.faults[f] = true
		}
	}
	if o.Scenario != "" {
		p.faults = map[string]bool{}
	}
	if p.faults[FaultCells] {
		p.topo = p.topo.withCells(cellsRng)
	}
	if p.faults[FaultReplicas] {
		p.topo = p.topo.withReplicas(replRng)
	}
	p.faultEvery = time.Duration(500+rng.IntN(4500)) * time.Millisecond
	p.linkDelay = time.Duration(100+rng.IntN(2000)) * time.Microsecond
	if p.faults[FaultDelay] {
		p.linkJitter = time.Duration(rng.IntN(20)) * time.Millisecond
	}
	if p.faults[FaultLoss] {
		p.lossProb = 0.001 + rng.Float64()*0.05
	}
	p.subscribers = 1 + rng.IntN(50)
	p.diskLatency = time.Duration(100+rng.IntN(3000)) * time.Microsecond
	// The payload cache came after the first release: its own sub-seed.
	cacheRng := rand.New(rand.NewPCG(o.Seed, 0x6361636865)) // "cache"
	if cacheRng.IntN(2) == 0 {
		p.cacheBytes = int64(64 << cacheRng.IntN(9)) // 64 B … 16 KiB
	}
	// The release protocol came later still: its own sub-seed. A third of
	// the runs keep Config.MaxRetain, a third never release early, a third
	// release after 1–5 s, which the fault phase reaches.
	relRng := rand.New(rand.NewPCG(o.Seed, 0x72656c65617365)) // "release"
	p.maxRetain = o.Config.MaxRetain
	switch relRng.IntN(3) {
	case 0:
		p.maxRetain = 0
	case 1:
		p.maxRetain = time.Duration(1000+relRng.IntN(4000)) * time.Millisecond
	}
	// The size bound came after the age bound: its own sub-seed.
	if bytesRng := rand.New(rand.NewPCG(o.Seed, 0x72657462797465)); bytesRng.IntN(2) == 0 && !o.NoSizeBound { // "retbyte"
		p.maxRetainBytes = int64(256 << bytesRng.IntN(9)) // 256 B … 64 KiB
	}
	// The Raft log's byte bound came after: its own sub-seed.
	if rb := rand.New(rand.NewPCG(o.Seed, 0x726166746279)); rb.IntN(2) == 0 { // "raftby"
		p.raftMaxBytes = int64(1<<10) << rb.IntN(5) // 1 KiB … 16 KiB
	}
	if o.Scenario != "" {
		// The papers' scripted experiments release nothing early by age
		// (Gryphon DS §5 "disabled early-release in these experiments")
		// and judge no downstream gone: a link throttled or down for most
		// of the run, and the recovery that follows, are what they
		// measure (gd/gone.go).
		p.maxRetain = 0
	}
	if isDSScenario(o.Scenario) {
		p.maxRetainBytes = 0 // nor by size
	}
	p.floors = o.Scenario == "" && relRng.IntN(2) == 0
	// Congestion control runs where real brokers run it: everywhere, by
	// default (config.Network.CongestionOn). The scripted reproductions of
	// the GD papers (fig6, Gryphon DS §5) ran without it and keep doing so.
	p.cc = (o.Scenario == "" || isCCScenario(o.Scenario)) && !o.NoCongestionControl
	if isCollapseScenario(o.Scenario) {
		// The collapses are about what each broker's cache holds
		// (Options.IBRelayCacheBytes): no seed shrinks them.
		p.cacheBytes = 0
	}
	return p, nil
}

// makeScalePlan is the plan of a scale run: its tree, no random faults (it
// has its own schedule, scale_faults.go), no membership, link delays and
// disk latency from the seed.
func makeScalePlan(o Options, rng *rand.Rand) (plan, error) {
	topo, shape, err := scaleTopology(o)
	if err != nil {
		return plan{}, err
	}
	p := plan{topo: topo, faults: map[string]bool{}, noMembership: true, scaleShape: shape,
		subscribers: o.Scale.Subscriptions, maxRetain: o.Config.MaxRetain, faultEvery: o.FaultPhase}
	p.linkDelay = time.Duration(100+rng.IntN(2000)) * time.Microsecond
	p.diskLatency = time.Duration(100+rng.IntN(3000)) * time.Microsecond
	return p, nil
}

// isCCScenario: the scripted congestion control experiments of Gryphon CC
// §5 and the collapses of §2 (congestion*.go), which run with congestion
// control on.
func isCCScenario(s string) bool {
	return s == "cc" || s == "cc-e2" || s == "cc-e3" || s == "cc-e4" || isCollapseScenario(s)
}
