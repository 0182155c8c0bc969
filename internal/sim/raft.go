package sim

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"time"

	"go.etcd.io/raft/v3/raftpb"
	"google.golang.org/protobuf/proto"

	"github.com/aerie-mq/aerie/internal/eventlog"
	"github.com/aerie-mq/aerie/internal/gd"
	"github.com/aerie-mq/aerie/internal/msg"
	"github.com/aerie-mq/aerie/internal/raftphb"
	raftnode "github.com/aerie-mq/aerie/internal/raftphb/node"
	"github.com/aerie-mq/aerie/internal/shell"
	"github.com/aerie-mq/aerie/internal/tick"
	"github.com/aerie-mq/aerie/internal/vfs"
	"github.com/aerie-mq/aerie/internal/wire"
)

// Replicated PHB cells (docs/CONFIG.md; internal/raftphb). A PHB cell of 3
// or 5 members is one Raft group for its pubends: every member runs the
// same raftphb/node over its own crashable disk, Raft messages travel
// over the cell's simulated links (encoded as protobuf, as on the wire),
// and only the serving leader runs the pubends' engine, restored from the
// committed log when it starts to serve (docs/REPLICATION.md). The other
// members run a standby shell with no routes, so that
// their links and the oracle treat them like any broker.
//
// For the oracle, "durable" is "committed": an event is Logged when a
// member applies its batch, which is before its publisher can be acked;
// the new leader's restored log must hold every acked event (Recovered,
// docs/CONCEPTS.md I9), and its ticks must lie above everything the old leader
// announced (I9, "reused tick").

// raftTick is the Raft timer: heartbeats every tick, elections after
// raftElectionTicks to twice that without a leader (0.5–1 s).
const (
	raftTick          = 50 * time.Millisecond
	raftElectionTicks = 10
)

// raftCompaction makes members compact their Raft logs every few batches
// and keep a short tail, so that a member back from a crash or a partition
// often needs a snapshot (the leader's store image) to catch up.
var raftCompaction = raftnode.Compaction{Every: 16, Retain: 4}

// raftStats sums the Raft log counters of every member incarnation.
type raftStats struct {
	compactions, snapshots, rejoins, wipes, chunked uint64
	byteCompactions                                 uint64
	linkCampaigns                                   uint64 // PeerDown campaigns (FaultFailover)
	maxBytes                                        int64
	maxEntries                                      uint64
	maxSnapshot                                     int
}

// sample notes the size of rn's Raft log.
func (s *raftStats) sample(rn *raftnode.Node) {
	st := rn.Stats()
	s.maxBytes, s.maxEntries = max(s.maxBytes, st.Log.Bytes), max(s.maxEntries, st.Log.Entries)
}

// tally adds the counters of an incarnation that ends (or the run).
func (s *raftStats) tally(rn *raftnode.Node) {
	s.sample(rn)
	st := rn.Stats()
	s.compactions += st.Compactions
	s.byteCompactions += st.ByteCompactions
	s.snapshots += st.SnapshotsInstalled
	s.chunked += st.Transfers.Received
	s.maxSnapshot = max(s.maxSnapshot, st.MaxSnapshotBytes)
}

// raftMember is the Raft side of one member of a replicated PHB cell.
type raftMember struct {
	members []msg.NodeID // the cell's, sorted: Raft id = index + 1
	fs      *vfs.MemFS
	rn      *raftnode.Node // nil while the broker is down
	busy    bool           // a Ready is written and its fsync pending
	serving bool
	// formed latches that every member of the cell had applied its first
	// entry when this member was last looked at (cellFormed).
	formed bool
	// fwd is the incarnation's clients and forwarding (forward.go).
	fwd *fwdMember
}

// cellFormed reports whether n's cell has formed: every member has applied
// an entry at some time. Until then a crash of a member is a killed
// process, not a power loss (world.crash): a member that starts with an
// empty Raft state waits for every other member to report an empty state
// too before it forms a new cell (raftphb, "A new cell, or a lost one"),
// and a power loss during the very first election can leave one member a
// term without entries beside empty ones — indistinguishable from a wiped
// majority beside a lagging member, so the cell stays stopped until an
// operator re-creates it. That is the price of never forming a new cell
// over lost acknowledged events, and not what the swarm is for. For the
// same reason FaultDiskFull and FaultIOError spare the members of a cell
// that has not formed: a member that cannot write its first vote, or
// that cuts it on the way out after a failed fsync, is as blank as
// after a power loss.
func (w *world) cellFormed(n *node) bool {
	if n.raft.formed {
		return true
	}
	for _, id := range w.plan.topo.members(n.cell) {
		m := w.nodes[id]
		if m.raft == nil || m.raft.rn == nil || m.raft.rn.Replica().Status().Applied == 0 {
			return false
		}
	}
	for _, id := range w.plan.topo.members(n.cell) {
		w.nodes[id].raft.formed = true
	}
	return true
}

// withReplicas makes about half the PHBs replicated cells of 3 (or, one
// time in four, 5) members: p1 gets p1b, p1c … in cell p1, each listing
// p1's pubends.
func (t Topology) withReplicas(rng *rand.Rand) Topology {
	out := Topology{Name: t.Name, Links: t.Links, Cells: gd.Cells{}}
	for c, ms := range t.Cells {
		out.Cells[c] = ms
	}
	for _, b := range t.Brokers {
		out.Brokers = append(out.Brokers, b)
		if b.Role != PHB || rng.IntN(2) != 0 {
			continue
		}
		k := 3
		if rng.IntN(4) == 0 {
			k = 5
		}
		ms := []msg.NodeID{b.ID}
		for i := 1; i < k; i++ {
			id := b.ID + msg.NodeID(rune('a'+i))
			out.Brokers = append(out.Brokers, Broker{ID: id, Role: PHB, Pubends: b.Pubends})
			ms = append(ms, id)
		}
		out.Cells[b.ID] = ms
	}
	return out
}

// replicas returns the members of n's cell when it is a replicated PHB.
func (w *world) replicas(b Broker) []msg.NodeID {
	if b.Role != PHB {
		return nil
	}
	ms := w.plan.topo.members(w.plan.topo.CellOf(b.ID))
	if len(ms) < 2 {
		return nil
	}
	out := slices.Clone(ms)
	slices.Sort(out)
	return out
}

// engineCells is the cell map n's engine gets. A member of a replicated
// cell sees itself alone in its cell, and each other member as a cell of
// its own: only one member runs the pubends' engine at a time, so there is
// no cell peer to relay through or to tell about links, and the filter
// versions it logs are one sequence, continued by the next leader from the
// committed log.
func (w *world) engineCells(n *node) gd.Cells {
	if n.raft == nil {
		return w.plan.topo.Cells
	}
	out := gd.Cells{}
	for c, ms := range w.plan.topo.Cells {
		if c != n.cell {
			out[c] = ms
		}
	}
	out[n.cell] = []msg.NodeID{n.id}
	for _, m := range n.raft.members {
		if m != n.id {
			out["~"+m] = []msg.NodeID{m}
		}
	}
	return out
}

// openRaft opens n's Raft member over its disk (a restart: recovery).
func (w *world) openRaft(n *node) error {
	r := n.raft
	id := uint64(slices.Index(r.members, n.id) + 1)
	peers := w.peerSlots(n)
	inc := n.inc
	if r.rn != nil {
		w.raftStats.tally(r.rn)
		r.rn = nil
	}
	rn, err := raftnode.Open(raftnode.Config{
		Replica: raftphb.Config{ID: id, Peers: peers, ElectionTicks: raftElectionTicks, HeartbeatTicks: 1,
			Jitter: w.rrng.IntN},
		FS: r.fs, Dir: "/data", LogOptions: diskOpts,
		Send:      func(m *raftpb.Message) { w.transmitRaft(n, inc, m) },
		SendChunk: func(to uint64, m msg.Msg) { w.transmitChunk(n, inc, to, m) },
		Applied: func(b raftphb.Batch) {
			recs, err := b.Records()
			if err != nil {
				panic(fmt.Sprintf("sim: %s applied a batch it cannot decode: %v", n.id, err))
			}
			for _, rec := range recs {
				if rec.Event != nil {
					w.orc.Logged(rec.Event)
				}
			}
		},
		Compaction: w.raftCompaction(),
		Mutation:   w.opts.RaftMutation,
	})
	if err != nil {
		return err
	}
	if c := rn.Corruption(); c != nil {
		// The simulator's disks lose unsynced bytes, never synced ones:
		// a corrupt Raft state is a bug, not something to rejoin from.
		return fmt.Errorf("%w (%v)", eventlog.ErrCorrupt, c)
	}
	r.rn, r.busy, r.serving = rn, false, false
	r.fwd = w.newFwdMember(n)
	return nil
}

// startRaft opens n's Raft member at a (re)start; false when it could not
// (then the restart is retried, or the oracle was told).
func (w *world) startRaft(n *node) bool {
	err := w.openRaft(n)
	if err == nil {
		return true
	}
	if errors.Is(err, eventlog.ErrCorrupt) {
		w.orc.Violate("I9", "%s cannot recover its Raft log or pubend store after a crash: %v", n.id, err)
		return false
	}
	w.watchf("restart of %s failed: %v", n.id, err)
	w.after(100*time.Millisecond, func() { w.restart(n) })
	return false
}

// raftTickLoop is the Raft timer of one incarnation.
func (w *world) raftTickLoop(n *node, inc int) {
	if !n.up || n.inc != inc || n.raft.rn == nil {
		return
	}
	n.raft.rn.Tick()
	if n.raft.fwd != nil {
		n.raft.fwd.lead.Tick()
	}
	w.raftStats.sample(n.raft.rn)
	if n.raft.busy {
		// A Ready waits for its fsync: a leadership lost meanwhile is
		// reported now (raftnode.Node.Tick).
		w.raftEvents(n, n.raft.rn)
	}
	w.raftWork(n)
	w.follow(n, true)
	w.after(raftTick, func() { w.raftTickLoop(n, inc) })
}

// raftPeerDown: n's link to peer closed. With FaultFailover, n's Raft
// member is told when peer is a member of its cell, as the broker tells
// its own (internal/broker raftPeerDown): a follower of peer campaigns at
// once.
func (w *world) raftPeerDown(n *node, peer msg.NodeID) {
	if !w.plan.faults[FaultFailover] || !n.up || n.raft == nil || n.raft.rn == nil {
		return
	}
	slot := slices.Index(n.raft.members, peer) + 1
	if slot == 0 {
		return
	}
	if n.raft.rn.PeerDown(uint64(slot)) {
		w.watchf("%s campaigns: its link to its leader %s closed", n.id, peer)
		w.raftStats.linkCampaigns++
	}
	w.raftWork(n)
}

// raftCompaction is the members' compaction, with the run's chunk size.
func (w *world) raftCompaction() raftnode.Compaction {
	c := raftCompaction
	c.ChunkBytes = w.opts.RaftChunkBytes
	c.MaxBytes = w.plan.raftMaxBytes
	return c
}

// transmitChunk carries a piece of a chunked snapshot, or its ack, over
// the cell's simulated link like a Raft message (transmitRaft), through
// the wire codec.
func (w *world) transmitChunk(from *node, inc int, to uint64, m msg.Msg) {
	frame, err := wire.AppendFrame(nil, m)
	if err != nil {
		panic(fmt.Sprintf("sim: raft chunk: %v", err))
	}
	w.transmitCell(from, inc, to, func(dst *raftnode.Node) error {
		got, err := wire.Decode(frame[4:])
		if err != nil {
			panic(fmt.Sprintf("sim: raft chunk: %v", err))
		}
		switch v := got.(type) {
		case msg.RaftChunk:
			return dst.StepChunk(v)
		case msg.RaftChunkAck:
			return dst.StepChunkAck(v)
		}
		return nil
	})
}

// transmitRaft carries a Raft message over the cell's simulated link,
// marshalled and unmarshalled as on the wire, in FIFO order, lost when the
// link is down, stalled or reset.
func (w *world) transmitRaft(from *node, inc int, m *raftpb.Message) {
	if !from.up || from.inc != inc {
		return
	}
	data, err := proto.Marshal(m)
	if err != nil {
		panic(fmt.Sprintf("sim: raft message: %v", err))
	}
	w.transmitCell(from, inc, m.GetTo(), func(dst *raftnode.Node) error {
		got := &raftpb.Message{}
		if err := proto.Unmarshal(data, got); err != nil {
			panic(fmt.Sprintf("sim: raft message: %v", err))
		}
		return dst.Step(got)
	})
}

// transmitCell carries a message of member from to Raft member to over
// the cell's simulated link, in FIFO order, lost when the link is down,
// stalled or reset: step hands it to the receiving member.
func (w *world) transmitCell(from *node, inc int, toID uint64, step func(dst *raftnode.Node) error) {
	if !from.up || from.inc != inc {
		return
	}
	to := w.nodes[from.raft.members[raftphb.Slot(toID)-1]]
	l := w.byPair[pairKey(from.id, to.id)]
	if l == nil || !l.up || l.stalled {
		return
	}
	at := w.untrackedArrival(l, from.id, 0)
	ep := l.epoch
	w.at(at, func() {
		if l.epoch != ep || !l.up || !to.up || to.raft.rn == nil {
			return
		}
		if err := step(to.raft.rn); err != nil {
			w.watchf("%s: raft step: %v", to.id, err)
		}
		w.raftWork(to)
	})
}

// untrackedArrival is when a message from sent now over l arrives, in
// FIFO order behind everything sent before on its direction, at least
// spacing after the one before it; the link notes it as an arrival of a
// message it does not keep in flights (a Raft message, a forwarded
// publish), which uncap must not let later messages overtake.
func (w *world) untrackedArrival(l *link, from msg.NodeID, spacing time.Duration) tick.Time {
	dir := 0
	if from == l.b {
		dir = 1
	}
	d := w.plan.linkDelay
	if w.plan.linkJitter > 0 {
		d += time.Duration(w.rng.Int64N(int64(w.plan.linkJitter)))
	}
	at := max(w.now.Add(d), l.lastAt[dir].Add(spacing))
	l.lastAt[dir], l.untracked[dir] = at, at
	return at
}

// raftWork writes n's next Ready to its Raft log and completes it (fsync,
// then send, apply, leadership changes) one disk latency later, unless
// the broker crashed meanwhile.
func (w *world) raftWork(n *node) {
	r := n.raft
	if !n.up || r.rn == nil || r.busy {
		return
	}
	rn, inc := r.rn, n.inc
	ok, err := rn.Write()
	if err != nil {
		w.raftDiskFailed(n, err)
		return
	}
	if !ok {
		if err := rn.RunJobs(); err != nil {
			w.raftDiskFailed(n, err)
		}
		return
	}
	r.busy = true
	w.after(w.plan.diskLatency, func() {
		if !n.up || n.inc != inc || r.rn != rn {
			return
		}
		if err := rn.SyncLog(); err != nil {
			if noRoom(err) {
				w.raftLogFull(n, rn, inc, err, raftResumeFirst)
				return
			}
			w.raftDiskFailed(n, err)
			return
		}
		w.raftSynced(n, rn)
	})
}

// raftResumeFirst and raftResumeMax bound the waits of a member whose Raft
// log had no room before it tries again, as the broker does
// (internal/broker raftLogFull).
const (
	raftResumeFirst = 500 * time.Millisecond
	raftResumeMax   = 5 * time.Second
)

// raftLogFull: the fsync of n's written Ready failed for want of room
// (FaultDiskFull). The member keeps its state and its place in the cell:
// it reopens its Raft log after wait, the Ready appended again
// (raftnode.Node.ResumeLog), and fsyncs it once that succeeds, waiting
// twice as long each time the disk is still full.
func (w *world) raftLogFull(n *node, rn *raftnode.Node, inc int, err error, wait time.Duration) {
	w.watchf("raft log full at %s: %v", n.id, err)
	w.after(wait, func() {
		if !n.up || n.inc != inc || n.raft.rn != rn {
			return
		}
		err := rn.ResumeLog()
		if err == nil {
			err = rn.SyncLog()
		}
		switch {
		case err == nil:
			w.watchf("raft log resumed at %s", n.id)
			w.raftSynced(n, rn)
		case noRoom(err):
			w.raftLogFull(n, rn, inc, err, min(2*wait, raftResumeMax))
		default:
			w.raftDiskFailed(n, err)
		}
	})
}

// raftSynced completes n's written Ready once its fsync succeeded: send,
// apply, leadership changes, then the next Ready.
func (w *world) raftSynced(n *node, rn *raftnode.Node) {
	r := n.raft
	r.busy = false
	if err := rn.Complete(); err != nil {
		w.raftDiskFailed(n, err)
		return
	}
	w.raftEvents(n, rn)
	if err := rn.RunJobs(); err != nil {
		w.raftDiskFailed(n, err)
		return
	}
	w.follow(n, false)
	w.raftWork(n)
}

// raftEvents acts on n's leadership changes.
func (w *world) raftEvents(n *node, rn *raftnode.Node) {
	for _, ev := range rn.Events() {
		switch ev.Kind {
		case raftnode.EventServe:
			w.serve(n, ev)
		case raftnode.EventLost:
			w.watchf("%s lost the leadership of term %d", n.id, ev.Lost.Term)
			w.standby(n)
		case raftnode.EventRejoin:
			w.watchf("%s rejoins its cell as Raft member %d: %s", n.id,
				raftphb.MemberID(raftphb.Slot(ev.Rejoin.ID), ev.Rejoin.Gen), ev.Rejoin.Reason)
			w.raftStats.rejoins++
		}
	}
}

// raftDiskFailed: a failed write or fsync cannot be retried safely: the
// member stops (crash-only) and a supervisor restarts it. Its process
// closes the member on the way out, as the broker's Run does, which cuts
// a failed log back to its synced records (raftlog.Log.Close,
// storage.Store.Close).
func (w *world) raftDiskFailed(n *node, err error) {
	w.watchf("disk failed at %s: %v", n.id, err)
	w.fsyncFailures++
	if n.up && n.raft.rn != nil {
		if err := n.raft.rn.Close(); err != nil {
			w.watchf("close of %s: %v", n.id, err)
		}
	}
	w.crash(n)
	w.after(time.Duration(100+w.rng.IntN(900))*time.Millisecond, func() { w.restart(n) })
}

// serve makes n, now the cell's serving leader, run the pubends' engine,
// restored from its copy of the committed log. Its links to other cells
// are reset, so that downstream brokers greet it as a new incarnation of
// the upstream (resend their summaries, acks and nacks), as they would a
// restarted PHB.
func (w *world) serve(n *node, ev raftnode.Event) {
	w.watchf("%s serves term %d (log %d records)", n.id, ev.Serve.Term, ev.Serve.Next)
	w.leaderServes++
	n.raft.serving = true
	w.newShell(n)
	if err := n.sh.Restore(ev.Loaded); err != nil {
		w.orc.Violate("I9", "%s cannot restore the pubends from the committed log: %v", n.id, err)
		return
	}
	recs, err := n.raft.rn.StoreRecords()
	if err != nil {
		w.orc.Violate("I9", "%s cannot read the committed log it restored from: %v", n.id, err)
		return
	}
	w.checkRestored(n, recs, ev.Loaded)
	n.raft.rn.Attach(&raftShell{w: w, n: n, gen: n.gen})
	w.forwardServe(n)
	for _, l := range w.links {
		other := l.a
		if other == n.id {
			other = l.b
		} else if l.b != n.id {
			continue
		}
		if l.up && w.nodes[other].cell != n.cell {
			w.cut(l)
			w.heal(l)
		}
	}
}

// releasedIn is the release point a log's snapshot records for pubend p.
func releasedIn(recs []msg.Record, p msg.PubendID) tick.Tick {
	var out tick.Tick
	for _, r := range recs {
		if r.Meta != nil && r.Pubend == p {
			out = max(out, r.Meta.Final)
		}
	}
	return out
}

// standby: n no longer leads; it runs a shell without the pubends.
func (w *world) standby(n *node) {
	w.forwardLost(n)
	n.raft.serving = false
	w.newShell(n)
}

// serving returns the serving leader of replicated cell c, or nil.
func (w *world) serving(c msg.NodeID) *node {
	for _, id := range w.plan.topo.members(c) {
		if m := w.nodes[id]; m.up && m.raft != nil && m.raft.serving {
			return m
		}
	}
	return nil
}

// raftDur is the serving shell's Durability: the Raft member.
type raftDur struct {
	w   *world
	n   *node
	gen int
}

func (d *raftDur) live() bool {
	return d.n.up && d.n.gen == d.gen && d.n.raft.rn != nil
}

func (d *raftDur) Append(recs []msg.Record) {
	d.n.raft.rn.Append(recs)
	d.w.after(0, func() {
		if d.live() {
			d.w.raftWork(d.n)
		}
	})
}

func (d *raftDur) Fetch(f gd.Fetch, from []uint64) {
	d.n.raft.rn.Fetch(f, from)
	d.w.after(d.w.plan.diskLatency, func() {
		if d.live() {
			d.w.fetches++
			if err := d.n.raft.rn.RunJobs(); err != nil {
				d.w.raftDiskFailed(d.n, err)
			}
		}
	})
}

func (d *raftDur) Trim(cut uint64, snap []msg.Record) {
	d.n.raft.rn.Trim(cut, snap)
	d.w.after(d.w.plan.diskLatency, func() {
		if d.live() {
			if err := d.n.raft.rn.RunJobs(); err != nil {
				d.w.raftDiskFailed(d.n, err)
			}
		}
	})
}

// raftShell is what the Raft member reports to at the serving leader: it
// hands each completion to the shell of its generation, as a later input,
// never from inside the member's Sync.
type raftShell struct {
	w   *world
	n   *node
	gen int
}

func (s *raftShell) later(fn func(b *shell.Broker)) {
	s.w.after(0, func() {
		if s.n.up && s.n.gen == s.gen {
			s.w.input(s.n, fn)
		}
	})
}

func (s *raftShell) Persisted(first uint64, err error) error {
	if err != nil {
		// ErrLostLeadership: the member reports EventLost next and the
		// shell is replaced. Anything else is a refusal the shell cannot
		// survive: stop the broker (crash-only).
		if !errors.Is(err, raftnode.ErrLostLeadership) {
			s.w.after(0, func() {
				if s.n.up && s.n.gen == s.gen {
					s.w.raftDiskFailed(s.n, err)
				}
			})
		}
		return err
	}
	s.later(func(b *shell.Broker) {
		if err := b.Persisted(first, nil); err != nil {
			panic(fmt.Sprintf("sim: %s: %v", s.n.id, err))
		}
	})
	return nil
}

func (s *raftShell) Fetched(f gd.Fetched) {
	s.later(func(b *shell.Broker) { b.Fetched(f) })
}

func (s *raftShell) Trimmed(first, dropped uint64, err error) {
	s.later(func(b *shell.Broker) { b.Trimmed(first, dropped, err) })
}

// cellSettled reports whether replicated cell c has no replacement under
// way: a serving leader whose configuration has no learner and every
// member up, holding some of the log, as a voter under its current Raft
// id (a member that never held an entry counts as one that lost its
// disk: wiping another then loses a majority in a cell of 3).
func (w *world) cellSettled(c msg.NodeID) bool {
	l := w.serving(c)
	if l == nil || l.raft.rn == nil {
		return false
	}
	conf := l.raft.rn.Replica().Status().Conf
	if len(conf.GetLearners()) > 0 {
		return false
	}
	for _, id := range w.plan.topo.members(c) {
		m := w.nodes[id]
		if !m.up || m.raft == nil || m.raft.rn == nil || m.raft.rn.Replica().Status().Applied == 0 ||
			!slices.Contains(conf.GetVoters(), m.raft.rn.ID()) {
			return false
		}
	}
	return true
}

// wipe empties the disk of n, a replicated member that just crashed: it
// restarts with an empty data directory and rejoins its cell as a new
// member.
func (w *world) wipe(n *node) {
	n.raft.fs = vfs.NewMem()
	w.raftStats.wipes++
	w.watchf("%s's disk is wiped", n.id)
}
