package node

// A replicated PHB cell in one goroutine: N nodes, each on its own MemFS,
// a seeded network (delay, loss, partitions), disk latency between a
// Ready's write and its fsync, crashes that lose unsynced bytes, and
// failed fsyncs. Each serving leader runs a publisher stand-in (pubShell)
// in place of the runtime shell: it appends one batch at a time, as the
// shell does, and records every batch reported Persisted. The checker:
//
//   - every batch acknowledged at any leader is, at every later leader's
//     serve point, in the store it restores from, at the acknowledged
//     index, with the same records (Raft's Leader Completeness carried to
//     the pubend: docs/CONCEPTS.md I9);
//   - no record is in a store twice (no batch applied twice), and all
//     stores agree at every index they share (one pubend log);
//   - at the end, with faults healed, a leader serves and every member's
//     store holds every acknowledged batch.

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"slices"
	"strconv"
	"testing"

	"go.etcd.io/raft/v3/raftpb"
	"google.golang.org/protobuf/proto"

	"github.com/aerie-mq/aerie/internal/eventlog"
	"github.com/aerie-mq/aerie/internal/gd"
	"github.com/aerie-mq/aerie/internal/msg"
	"github.com/aerie-mq/aerie/internal/raftphb"
	"github.com/aerie-mq/aerie/internal/storage"
	"github.com/aerie-mq/aerie/internal/tick"
	"github.com/aerie-mq/aerie/internal/vfs"
)

// Simulated time is in steps of 1 ms; Raft ticks every tickMs.
const tickMs = 10

type faults struct {
	loss      float64 // per message
	maxDelay  int     // ms, at least 1
	diskMs    int     // max fsync latency
	crashes   bool
	partition bool
	fsyncFail bool
	// wipes: now and then a member loses its disk (it restarts with an
	// empty data directory), while no replacement is under way.
	wipes bool
}

type event struct {
	at  int
	seq int
	fn  func()
}

type acked struct {
	first  uint64
	values []tick.Tick
	term   uint64
	by     uint64
	at     int
}

type member struct {
	id   uint64
	fs   *vfs.MemFS
	node *Node // nil while down
	inc  int   // incarnation: events of a crashed node are dropped
	sh   *pubShell
	sh2  *realShell // the runtime shell, when the cell runs one (shell_test.go)
	// busy: a Ready is written and its fsync is scheduled.
	busy bool
	// out: not a member of the cell's config (not yet added, or removed:
	// members_test.go); it is not started.
	out bool
}

type cell struct {
	t      testing.TB
	rng    *rand.Rand
	f      faults
	now    int
	seq    int
	queue  []event
	ms     []*member
	cut    map[uint64]bool // partitioned away from the rest
	acks   []acked
	value  tick.Tick // next record value: every record is unique
	errs   []string
	serves []serveAt
	quiet  bool // no new batches: let the last ones reach every member
	// statistics
	crashes, lost, fsyncFails int
	// logFulls counts the fsyncs of a Raft log that failed for want of
	// room and were tried again (resumeLog).
	logFulls       int
	maxOutstanding int // most batches a leader had outstanding
	// compaction configures every member's (zero: the defaults, which
	// these short runs never reach).
	compaction Compaction
	// stats sums the counters of every incarnation (tally); opened the
	// Raft log's first index at each start, per member.
	stats  Stats
	opened map[uint64][]uint64
	// serveHook, when set, replaces the publisher stand-in at a new
	// serving leader.
	serveHook func(m *member, ev Event)
	// sendHook, when set, sees every message a member sends.
	sendHook func(from *member, m *raftpb.Message)
	wiped    int
	// rejoinLog says why and when members rejoined.
	rejoinLog []string
	// chunkAt is when the last chunk message between two members (by
	// slot) arrives: they travel in order, as on a TCP link.
	chunkAt map[[2]uint64]int
	// chunkHook, when set, sees every chunk message; false drops it.
	chunkHook func(from *member, m msg.Msg) bool
	// corruptOK: a test corrupts disks, so a member's start may find its
	// state corrupt (else that fails the run).
	corruptOK bool
	// mut: the members' mutations (mutation.go); MutAckOwnFsync and
	// MutCompactUnsynced take effect once a member has opened.
	mut Mutation
	// mutBlankBootstrap: the mutation raftphb.Config.UnsafeBlankBootstrap
	// (a blank member votes at once, without establishing that its cell
	// is new).
	mutBlankBootstrap bool
	// isFormed latches formed.
	isFormed bool
}

type serveAt struct {
	id   uint64
	term uint64
	at   int
}

func newCell(t testing.TB, n int, seed uint64, f faults) *cell {
	c := &cell{t: t, rng: rand.New(rand.NewPCG(seed, 0xce11)), f: f, cut: map[uint64]bool{}}
	for i := 1; i <= n; i++ {
		c.ms = append(c.ms, &member{id: uint64(i), fs: vfs.NewMem()})
	}
	return c
}

func (c *cell) failf(format string, args ...any) {
	c.errs = append(c.errs, fmt.Sprintf("t=%dms: ", c.now)+fmt.Sprintf(format, args...))
}

func (c *cell) at(d int, fn func()) {
	c.seq++
	c.queue = append(c.queue, event{at: c.now + d, seq: c.seq, fn: fn})
}

// member returns the member in the slot of Raft id id (transports route
// by slot: a rejoined member keeps its address).
func (c *cell) member(id uint64) *member { return c.ms[raftphb.Slot(id)-1] }

// peers returns the slots of the cell's config: its members not out.
func (c *cell) peers() []uint64 {
	var out []uint64
	for _, m := range c.ms {
		if !m.out {
			out = append(out, raftphb.Slot(m.id))
		}
	}
	return out
}

func (c *cell) start(m *member) {
	m.inc++
	inc := m.inc
	nd, err := Open(Config{
		Replica:    raftphb.Config{ID: m.id, Peers: c.peers(), Jitter: c.rng.IntN, UnsafeBlankBootstrap: c.mutBlankBootstrap},
		FS:         m.fs,
		Dir:        "/data",
		LogOptions: eventlog.Options{SegmentBytes: 2 << 10},
		Send:       func(msg *raftpb.Message) { c.send(m, inc, msg) },
		SendChunk:  func(to uint64, msg msg.Msg) { c.sendChunk(m, inc, to, msg) },
		Compaction: c.compaction,
		Mutation:   c.mut &^ (MutAckOwnFsync | MutCompactUnsynced), // those below
	})
	if err != nil {
		if errors.Is(err, eventlog.ErrCorrupt) {
			c.failf("member %d: open: %v", m.id, err)
			return
		}
		// A disk that fails while the member recovers (an injected
		// fsync failure): it does not start, and is tried again.
		c.at(50+c.rng.IntN(200), func() { c.restart(m) })
		return
	}
	if cr := nd.Corruption(); cr != nil && !c.corruptOK {
		// The cell's disks lose unsynced bytes, never synced ones: a
		// corrupt state is a bug, not something to rejoin from.
		c.failf("member %d: open: %v", m.id, cr)
		return
	}
	if c.opened == nil {
		c.opened = map[uint64][]uint64{}
	}
	c.opened[m.id] = append(c.opened[m.id], nd.Replica().Status().FirstIndex)
	nd.ackEarly = c.mut.has(MutAckOwnFsync)
	nd.cfg.Mutation = c.mut
	m.node, m.busy, m.sh, m.sh2 = nd, false, nil, nil
}

// crash drops the node (memory lost) and crashes its disk: synced bytes
// stay, and a random prefix of the unsynced ones.
func (c *cell) crash(m *member) { c.down(m, func() { m.fs.Crash(c.rng) }) }

// kill stops m as kill -9 does: its disk keeps every byte it wrote.
func (c *cell) kill(m *member) { c.down(m, m.fs.Kill) }

func (c *cell) down(m *member, disk func()) {
	if m.node == nil {
		return
	}
	c.crashes++
	c.tally(m.node)
	m.node, m.sh, m.sh2, m.busy = nil, nil, nil, false
	m.inc++
	disk()
}

func (c *cell) send(from *member, inc int, m *raftpb.Message) {
	if from.inc != inc {
		return
	}
	if c.sendHook != nil {
		c.sendHook(from, m)
	}
	if c.rng.Float64() < c.f.loss {
		return
	}
	// The wire: the receiver gets its own copy.
	m = proto.Clone(m).(*raftpb.Message)
	to := c.member(m.GetTo())
	d := 1 + c.rng.IntN(max(1, c.f.maxDelay))
	fromID := from.id
	c.at(d, func() {
		if c.cut[fromID] != c.cut[to.id] || to.node == nil {
			return
		}
		_ = to.node.Step(m)
		c.work(to)
	})
}

// work writes the member's next Ready and schedules its fsync one disk
// latency later; the fsync then sends, applies and reports.
func (c *cell) work(m *member) {
	if m.node == nil || m.busy {
		return
	}
	nd, inc := m.node, m.inc
	ok, err := nd.Write()
	if err != nil {
		if _, full := storage.NoRoom(err); errors.Is(err, eventlog.ErrCorrupt) || !c.f.fsyncFail && !full {
			c.failf("member %d: write: %v", m.id, err)
			return
		}
		// An injected fsync failure (installing a snapshot syncs the
		// store), or a write of the store on a full disk: crash-only, as
		// for Sync.
		c.crash(m)
		c.at(50+c.rng.IntN(200), func() { c.restart(m) })
		return
	}
	if !ok {
		if err := nd.RunJobs(); err != nil {
			// The store's fsync failed: crash-only, as for the Raft log.
			c.crash(m)
			c.at(50+c.rng.IntN(200), func() { c.restart(m) })
		}
		return
	}
	m.busy = true
	c.at(1+c.rng.IntN(max(1, c.f.diskMs)), func() {
		if m.inc != inc {
			return // crashed meanwhile: the written Ready was never synced
		}
		// Only a Ready that writes something fsyncs the Raft log (and so
		// meets the injected failure).
		if w := nd.written; c.f.fsyncFail && c.formed() && w != nil && (len(w.Entries) > 0 || w.HardState != nil) && c.rng.IntN(200) == 0 {
			c.fsyncFails++
			m.fs.InjectError(vfs.OpSync, "", errors.New("injected fsync failure"))
		}
		if err := nd.SyncLog(); err != nil {
			if _, ok := storage.NoRoom(err); ok {
				c.resumeLog(m, nd, inc, 50)
				return
			}
			// Crash-only: a failed fsync stops the member, which a
			// supervisor restarts.
			m.busy = false
			c.crash(m)
			c.at(50+c.rng.IntN(200), func() { c.restart(m) })
			return
		}
		c.complete(m, nd)
	})
}

// complete carries out m's written Ready once its fsync succeeded.
func (c *cell) complete(m *member, nd *Node) {
	m.busy = false
	if err := nd.Complete(); err != nil {
		// Crash-only, as for the Raft log's fsync.
		c.crash(m)
		c.at(50+c.rng.IntN(200), func() { c.restart(m) })
		return
	}
	c.handle(m)
	c.work(m)
}

// resumeLog: m's Raft log had no room for its written Ready; after wait
// it writes the Ready again (ResumeLog) and fsyncs it, as the broker does
// (internal/broker raftLogFull), waiting twice as long while still full.
func (c *cell) resumeLog(m *member, nd *Node, inc, wait int) {
	c.logFulls++
	c.at(wait, func() {
		if m.inc != inc {
			return
		}
		err := nd.ResumeLog()
		if err == nil {
			err = nd.SyncLog()
		}
		if _, ok := storage.NoRoom(err); ok {
			c.resumeLog(m, nd, inc, min(2*wait, 500))
			return
		}
		if err != nil {
			m.busy = false
			c.crash(m)
			c.at(50+c.rng.IntN(200), func() { c.restart(m) })
			return
		}
		c.complete(m, nd)
	})
}

func (c *cell) restart(m *member) {
	if m.node != nil || m.out {
		return
	}
	c.start(m)
	c.work(m)
}

// handle acts on the node's leadership events: a serving leader gets a
// publisher stand-in, restored from its store; a lost one drops it.
func (c *cell) handle(m *member) {
	for _, ev := range m.node.Events() {
		switch ev.Kind {
		case EventServe:
			c.serves = append(c.serves, serveAt{id: m.id, term: ev.Serve.Term, at: c.now})
			c.checkServe(m, ev)
			if c.serveHook != nil {
				c.serveHook(m, ev)
				continue
			}
			c.attachPub(m, ev)
		case EventLost:
			c.lost++
			m.sh, m.sh2 = nil, nil
		case EventRejoin:
			c.rejoinLog = append(c.rejoinLog, fmt.Sprintf("t=%dms: member %d: %v", c.now, m.id, &ev.Rejoin))
		}
	}
}

// checkServe: the store a new leader restores from holds every batch
// acknowledged so far, where it was acknowledged, and nothing twice.
func (c *cell) checkServe(m *member, ev Event) {
	recs := ev.Loaded.Records
	// An event's tick is never reused (I9); the stand-in's HWM records
	// are all different, so one seen twice was applied twice.
	type key struct {
		event bool
		t     tick.Tick
	}
	seen := map[key]int{}
	for i, r := range recs {
		k := key{event: r.Event != nil, t: r.HWM}
		if r.Event != nil {
			k.t = r.Event.Tick
		} else if c.serveHook != nil {
			continue // the engine's own HWM records may repeat a value
		}
		if j, dup := seen[k]; dup {
			c.failf("member %d serving term %d: record %+v is in its log twice (%d and %d)", m.id, ev.Serve.Term, k, j, i)
		}
		seen[k] = i
	}
	for _, a := range c.acks {
		for i, v := range a.values {
			at := a.first + uint64(i)
			if at >= uint64(len(recs)) || recs[at].HWM != v {
				got := "nothing"
				if at < uint64(len(recs)) {
					got = fmt.Sprint(recs[at].HWM)
				}
				c.failf("member %d serving term %d: batch acked by %d in term %d at %d has %d at index %d, the log has %s", m.id, ev.Serve.Term, a.by, a.term, a.first, v, at, got)
				return
			}
		}
	}
}

// pubShell stands in for the runtime shell at a serving leader: batches
// of 1–4 records, up to shellWindow of them outstanding (pipelined, as the
// shell does with gd.Config.PersistWindow), acknowledged in order.
type pubShell struct {
	c    *cell
	m    *member
	inc  int
	term uint64
	outs [][]tick.Tick // the values of each outstanding batch, oldest first
	dead bool
}

// shellWindow: batches a pubShell proposes before the first commits.
const shellWindow = 3

func (p *pubShell) next() {
	if p.c.quiet || p.dead || p.m.inc != p.inc || p.m.sh != p || len(p.outs) >= shellWindow {
		return
	}
	n := 1 + p.c.rng.IntN(4)
	var vals []tick.Tick
	recs := make([]msg.Record, n)
	for i := range recs {
		p.c.value++
		vals = append(vals, p.c.value)
		recs[i] = msg.Record{Pubend: "P1", HWM: p.c.value}
	}
	p.outs = append(p.outs, vals)
	p.c.maxOutstanding = max(p.c.maxOutstanding, len(p.outs))
	p.m.node.Append(recs)
	// The shell's next Ready may come while this batch replicates.
	p.c.at(p.c.rng.IntN(3), p.next)
	p.c.at(0, func() { p.c.work(p.m) })
}

func (p *pubShell) Persisted(first uint64, err error) error {
	if err != nil {
		p.dead = true // the shell stops: crash-only
		return fmt.Errorf("shell: %w", err)
	}
	if len(p.outs) == 0 {
		p.c.failf("member %d: Persisted(%d) with no batch outstanding", p.m.id, first)
		return nil
	}
	p.c.acks = append(p.c.acks, acked{first: first, values: p.outs[0], term: p.term, by: p.m.id, at: p.c.now})
	p.outs = p.outs[1:]
	// The next batch after a moment (the shell's next Ready).
	p.c.at(p.c.rng.IntN(3), p.next)
	p.c.at(0, func() { p.c.work(p.m) })
	return nil
}

func (p *pubShell) Fetched(gd.Fetched)            {}
func (p *pubShell) Trimmed(uint64, uint64, error) {}

// run drives the cell for ms milliseconds of simulated time, with faults
// drawn from the seed, then heals everything and runs quiet for settle ms.
func (c *cell) run(ms, settle int) {
	for _, m := range c.ms {
		if !m.out {
			c.start(m)
		}
	}
	c.tickAll(ms + settle)
	if c.f.crashes || c.f.partition {
		for t := 100; t < ms; t += 50 + c.rng.IntN(300) {
			c.at(t, c.fault)
		}
	}
	if c.f.wipes {
		for t := 700; t < ms-1500; t += 800 + c.rng.IntN(1200) {
			c.at(t, c.wipeOne)
		}
	}
	c.at(ms, c.heal)
	c.at(ms+settle-1000, func() { c.quiet = true })
	c.loop(ms + settle)
	c.final()
}

// tickAll ticks every member that is up, and lets it work, every tickMs
// from 0 until until.
func (c *cell) tickAll(until int) {
	for t := 0; t < until; t += tickMs {
		c.at(t, func() {
			for _, m := range c.ms {
				if m.node != nil {
					m.node.Tick()
					if m.busy {
						// A leadership lost while a Ready waits for
						// its fsync is reported now, as the broker
						// does on its Raft tick.
						c.handle(m)
					}
					c.work(m)
				}
			}
		})
	}
}

// attachPub attaches the publisher stand-in to m, which serves from ev.
func (c *cell) attachPub(m *member, ev Event) {
	m.sh = &pubShell{c: c, m: m, inc: m.inc, term: ev.Serve.Term}
	m.node.Attach(m.sh)
	m.sh.next()
}

// noteServesAfter sets *served when a member serves after at ms, and
// attaches the publisher stand-in to it as without a serveHook.
func (c *cell) noteServesAfter(at int, served *bool) {
	c.serveHook = func(m *member, ev Event) {
		if c.now > at {
			*served = true
		}
		c.attachPub(m, ev)
	}
}

// formed reports whether the cell has formed: every member has applied
// its first entry, so none can restart with an empty Raft state but by a
// wipe. Crashes and failed fsyncs wait for it. Before, a crash that loses
// the unsynced bytes of a majority during the cell's first election can
// leave that majority blank beside a member with a term (its vote for
// itself): to the blank members that is a cell with a history they lost,
// just as after a wiped majority, and they wait to be admitted while the
// member with the term is no majority: the cell stops for the operator
// (newcell.go), which TestCrashInFirstElection shows.
func (c *cell) formed() bool {
	if c.isFormed {
		return true
	}
	for _, m := range c.ms {
		if !m.out && (m.node == nil || m.node.Replica().Status().Applied == 0) {
			return false
		}
	}
	c.isFormed = true
	return true
}

func (c *cell) fault() {
	if !c.formed() {
		return
	}
	m := c.ms[c.rng.IntN(len(c.ms))]
	switch k := c.rng.IntN(4); {
	case k == 0 && c.f.crashes:
		c.crash(m)
		c.at(50+c.rng.IntN(500), func() { c.restart(m) })
	case k == 1 && c.f.crashes:
		// Crash the leader, if there is one: failover under load.
		for _, l := range c.ms {
			if l.sh != nil && l.node != nil {
				c.crash(l)
				c.at(50+c.rng.IntN(500), func() { c.restart(l) })
				break
			}
		}
	case k >= 2 && c.f.partition:
		// Cut a minority (sometimes the leader) off for a while.
		for id := range c.cut {
			delete(c.cut, id)
		}
		for range 1 + c.rng.IntN((len(c.ms)-1)/2) {
			c.cut[c.ms[c.rng.IntN(len(c.ms))].id] = true
		}
		c.at(100+c.rng.IntN(600), func() { clear(c.cut) })
	}
}

func (c *cell) heal() {
	clear(c.cut)
	c.f = faults{maxDelay: c.f.maxDelay, diskMs: c.f.diskMs, wipes: c.f.wipes}
	for _, m := range c.ms {
		c.restart(m)
	}
}

func (c *cell) loop(until int) {
	for len(c.queue) > 0 && len(c.errs) == 0 {
		i := 0
		for j := range c.queue {
			if e, b := c.queue[j], c.queue[i]; e.at < b.at || (e.at == b.at && e.seq < b.seq) {
				i = j
			}
		}
		e := c.queue[i]
		if e.at > until {
			return
		}
		c.queue[i] = c.queue[len(c.queue)-1]
		c.queue = c.queue[:len(c.queue)-1]
		c.now = e.at
		e.fn()
	}
}

// final: a leader serves, and every store agrees and holds every ack.
func (c *cell) final() {
	if len(c.errs) > 0 {
		return
	}
	serving := 0
	for _, m := range c.ms {
		if m.node != nil && m.node.Replica().Status().Serving {
			serving++
		}
	}
	if serving != 1 {
		c.failf("after healing, %d members serve", serving)
	}
	var logs [][]msg.Record
	var slots []uint64 // of logs
	for _, m := range c.ms {
		if m.out {
			continue
		}
		slots = append(slots, m.id)
		if m.node == nil {
			c.failf("member %d is down at the end", m.id)
			return
		}
		c.tally(m.node)
		if err := m.node.Close(); err != nil {
			c.failf("member %d: close: %v", m.id, err)
		}
		dir, snap, err := StorePaths(m.fs, "/data")
		if err != nil {
			c.failf("member %d: %v", m.id, err)
			return
		}
		st, ld, _, err := storage.Open(m.fs, dir, snap, eventlog.Options{SegmentBytes: 2 << 10})
		if err != nil {
			c.failf("member %d: reopen store: %v", m.id, err)
			return
		}
		st.Close()
		logs = append(logs, ld.Records)
	}
	for i, l := range logs {
		seen := map[tick.Tick]bool{}
		for j, r := range l {
			if seen[r.HWM] {
				c.failf("member %d's store holds record %d twice", slots[i], r.HWM)
				return
			}
			seen[r.HWM] = true
			if j < len(logs[0]) && r.HWM != logs[0][j].HWM {
				c.failf("stores of members %d and %d differ at index %d", slots[0], slots[i], j)
				return
			}
		}
	}
	for _, a := range c.acks {
		for i, l := range logs {
			for k, v := range a.values {
				at := a.first + uint64(k)
				if at >= uint64(len(l)) || l[at].HWM != v {
					c.failf("member %d's store lacks acked record %d at %d", slots[i], v, at)
					return
				}
			}
		}
	}
}

func (c *cell) report() string {
	terms := map[uint64]bool{}
	for _, s := range c.serves {
		terms[s.term] = true
	}
	return fmt.Sprintf("%d acked batches, %d leaders served, %d crashes, %d leaderships lost, %d fsync failures, %d rejoins",
		len(c.acks), len(terms), c.crashes, c.lost, c.fsyncFails, c.stats.Rejoins)
}

var swarm = faults{loss: 0.05, maxDelay: 8, diskMs: 3, crashes: true, partition: true, fsyncFail: true}

// TestCellSwarm runs 3- and 5-member cells under every fault.
// RAFTPHB_SEEDS=N runs more seeds.
func TestCellSwarm(t *testing.T) {
	seeds := uint64(60)
	if s, err := strconv.ParseUint(os.Getenv("RAFTPHB_SEEDS"), 10, 64); err == nil {
		seeds = s
	}
	if testing.Short() {
		seeds = 15
	}
	for _, n := range []int{3, 5} {
		total := 0
		for seed := uint64(1); seed <= seeds; seed++ {
			c := swarmSeed(t, n, seed, swarm)
			total += len(c.acks)
			if seed == 1 {
				t.Logf("%d members, seed 1: %s", n, c.report())
			}
		}
		t.Logf("%d members: seeds 1..%d, %d acked batches, 0 violations", n, seeds, total)
	}
}

// TestAckBeforeCommitIsCaught: the mutation "report Persisted when the
// leader's own copy is durable" (skipping the majority) breaks the rule
// that a later leader has every acked batch; the checker must say so in
// some of the seeds.
func TestAckBeforeCommitIsCaught(t *testing.T) {
	caught := 0
	var first string
	for seed := uint64(1); seed <= 40; seed++ {
		c := newCell(t, 3, seed, swarm)
		c.mut |= MutAckOwnFsync
		c.run(6000, 3000)
		if len(c.errs) > 0 {
			caught++
			if first == "" {
				first = fmt.Sprintf("seed %d: %s", seed, c.errs[0])
			}
		}
	}
	if caught == 0 {
		t.Fatal("acking before the majority commit went unnoticed in 40 seeds")
	}
	t.Logf("caught in %d of 40 seeds; first: %s", caught, first)
}

// TestIsolatedLeaderReportsNothing: a leader cut off from its majority
// (alone, or with one follower of five) acks nothing, steps down within
// two election timeouts (CheckQuorum), and fails its outstanding batch;
// the majority elects a leader that serves.
func TestIsolatedLeaderReportsNothing(t *testing.T) {
	for _, n := range []int{3, 5} {
		for seed := uint64(1); seed <= 10; seed++ {
			c := newCell(t, n, seed, faults{maxDelay: 3, diskMs: 2})
			for _, m := range c.ms {
				c.start(m)
			}
			c.tickAll(5000)
			c.loop(1000)
			var old *member
			for _, m := range c.ms {
				if m.sh != nil {
					old = m
				}
			}
			if old == nil {
				t.Fatalf("%d members, seed %d: no leader after 1 s", n, seed)
			}
			sh := old.sh
			c.cut[old.id] = true
			if n == 5 {
				c.cut[old.id%5+1] = true // and one follower: still a minority
			}
			acksBefore := len(c.acks)
			// The batches outstanding at the cut may have been committed
			// already (their acks in flight or on the leader's disk): they
			// may still be acked, and the checker at the next serve
			// verifies they are in the log. Nothing proposed after the cut
			// may be.
			inFlight := slices.Clone(sh.outs)
			c.loop(5000)
			for _, a := range c.acks[acksBefore:] {
				if a.by == old.id && a.term == sh.term && !slices.ContainsFunc(inFlight, func(v []tick.Tick) bool { return slices.Equal(v, a.values) }) {
					t.Fatalf("%d members, seed %d: isolated leader %d acked batch %v at %d, proposed after the cut", n, seed, old.id, a.values, a.first)
				}
			}
			if !sh.dead && len(sh.outs) > 0 {
				t.Fatalf("%d members, seed %d: isolated leader's outstanding batches neither acked nor failed", n, seed)
			}
			if old.sh != nil || old.node.Replica().Status().Serving {
				t.Fatalf("%d members, seed %d: isolated leader %d still serves", n, seed, old.id)
			}
			newer := false
			for _, a := range c.acks[acksBefore:] {
				newer = newer || a.by != old.id
			}
			if !newer {
				t.Fatalf("%d members, seed %d: the majority acked nothing after the leader was cut off", n, seed)
			}
			if len(c.errs) > 0 {
				t.Fatalf("%d members, seed %d: %s", n, seed, c.errs[0])
			}
		}
	}
}

// TestFailoverTicks measures leader failover in Raft ticks: the serving
// leader of a busy cell crashes; how long until another member serves, and
// until its first ack. Election timeout 10 ticks, drawn in [10, 20).
func TestFailoverTicks(t *testing.T) {
	for _, n := range []int{3, 5} {
		var toServe, toAck []int
		pipelined := 0
		for seed := uint64(1); seed <= 30; seed++ {
			c := newCell(t, n, seed, faults{maxDelay: 3, diskMs: 2})
			for _, m := range c.ms {
				c.start(m)
			}
			c.tickAll(4000)
			c.loop(1000)
			var old *member
			for _, m := range c.ms {
				if m.sh != nil {
					old = m
				}
			}
			if old == nil {
				t.Fatalf("%d members, seed %d: no leader after 1 s", n, seed)
			}
			c.crash(old)
			crashAt, served, acks := c.now, len(c.serves), len(c.acks)
			c.loop(4000)
			if len(c.serves) == served || len(c.acks) == acks {
				t.Fatalf("%d members, seed %d: no new leader served and acked within 3 s", n, seed)
			}
			toServe = append(toServe, (c.serves[served].at-crashAt+tickMs-1)/tickMs)
			toAck = append(toAck, (c.acks[acks].at-crashAt+tickMs-1)/tickMs)
			if c.maxOutstanding > 1 {
				pipelined++
			}
			if len(c.errs) > 0 {
				t.Fatalf("%d members, seed %d: %s", n, seed, c.errs[0])
			}
		}
		if pipelined == 0 {
			t.Errorf("%d members: no leader ever had two batches outstanding (no pipelining)", n)
		}
		slices.Sort(toServe)
		slices.Sort(toAck)
		t.Logf("%d members, 30 seeds: leader crash → new leader serves: min %d, median %d, max %d ticks; → first ack: min %d, median %d, max %d ticks",
			n, toServe[0], toServe[len(toServe)/2], toServe[len(toServe)-1], toAck[0], toAck[len(toAck)/2], toAck[len(toAck)-1])
		// A follower forgets the leader 10 ticks after it last heard from
		// it and campaigns within [10, 20); pre-vote, vote and the first
		// entry's commit take a few round trips of ≤ 3 ms plus fsyncs, so
		// a failover without a split vote takes at most about 20 ticks.
		// A split vote costs one more timeout, [10, 20): two of them in
		// a row happen among these 60 failovers (the timeouts are drawn
		// from 10 values; 3 members, seed 2 elects in term 4 after 41
		// ticks), three should not.
		if med := toAck[len(toAck)/2]; med > 20 {
			t.Errorf("%d members: median failover %d ticks, want ≤ 20", n, med)
		}
		if worst := toAck[len(toAck)-1]; worst > 6*10 {
			t.Errorf("%d members: worst failover %d ticks, want ≤ 60", n, worst)
		}
	}
}

// swarmSeed runs one swarm seed of a cell of n members under f and fails
// the test on a violation or when nothing was acked.
func swarmSeed(t *testing.T, n int, seed uint64, f faults) *cell {
	t.Helper()
	c := newCell(t, n, seed, f)
	c.run(6000, 3000)
	if len(c.errs) > 0 {
		t.Fatalf("%d members, seed %d: %s\n%s", n, seed, c.errs[0], c.report())
	}
	if len(c.acks) == 0 {
		t.Fatalf("%d members, seed %d: nothing acked (%s)", n, seed, c.report())
	}
	return c
}
