package broker

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"path/filepath"
	"runtime"
	"time"

	"go.etcd.io/raft/v3/raftpb"
	"google.golang.org/protobuf/proto"

	"github.com/aerie-mq/aerie/internal/auth"
	"github.com/aerie-mq/aerie/internal/eventlog"
	"github.com/aerie-mq/aerie/internal/gd"
	"github.com/aerie-mq/aerie/internal/msg"
	"github.com/aerie-mq/aerie/internal/raftphb"
	"github.com/aerie-mq/aerie/internal/raftphb/forward"
	raftnode "github.com/aerie-mq/aerie/internal/raftphb/node"
	"github.com/aerie-mq/aerie/internal/shell"
	"github.com/aerie-mq/aerie/internal/storage"
)

// A member of a replicated PHB cell (docs/CONFIG.md; docs/REPLICATION.md)
// runs the Raft member (internal/raftphb/node) on the
// loop, over the broker's data directory: its Raft log in DATA/raft, its
// copy of the pubends' log in DATA/pubends. Raft messages travel as
// msg.Raft frames on the ordinary links between the cell's members. Only
// the serving leader runs the pubends' engine, restored from the
// committed log when it starts to serve, with the Raft member as its
// Durability: a publish is acked once its batch is committed (fsynced by
// a majority) and applied here. The other members run a standby shell
// without routes; a client that connects to one has its publishes
// forwarded to the serving leader (forward.go), or, configured to
// redirect, is told to go elsewhere and its client library moves on to
// the next address of its list. The member's fsyncs run on the loop:
// simple, and a Ready per loop turn is the group commit.

// RaftOptions make the broker a member of a replicated PHB cell.
type RaftOptions struct {
	// Cell is the cell's id; Members its brokers, sorted; Slots their
	// slots, in the same order (config.Network.RaftSlots; nil: a member's
	// index plus one). A member's Raft id is its slot and the generation
	// its data directory records (raftphb.MemberID: 0, the slot alone,
	// until the member rejoins after losing its state).
	Cell    msg.NodeID
	Members []msg.NodeID
	Slots   []uint64
	// TickInterval is Raft's timer (default 100 ms); ElectionTicks the
	// election timeout in ticks (default 10: a follower campaigns after
	// 1–2 s without a leader; one whose link to the leader closes, at once:
	// raft_failover.go).
	TickInterval  time.Duration
	ElectionTicks int
	// Compaction says when the member compacts its Raft log (zero: every
	// 1024 entries, keeping 512; see raftphb/node.Compaction).
	Compaction raftnode.Compaction
	// Clients is what the member does with a client while it does not
	// serve: forward its publishes to the serving leader, or redirect it
	// ("" : DefaultRaftClients; forward.go).
	Clients RaftClients
	// ForwardTimeout bounds how long a forwarded client's publishes wait
	// for a serving leader before the client is closed (default: five
	// election timeouts).
	ForwardTimeout time.Duration
	// Window is how many batches the serving leader proposes before the
	// first of them commits (default raftphb.Window; 1: one at a time).
	Window int
}

// raftState is the loop-owned state of a Raft member.
type raftState struct {
	opts    RaftOptions
	rn      *raftnode.Node
	serving bool
	fatal   error // a refusal the serving shell cannot survive
	// syncing: a goroutine fsyncs the Raft log and reports on synced.
	syncing bool
	synced  chan error
	// full: the Raft log's fsync failed for want of room; the member
	// waits resumeWait (resume fires) and tries again (raftLogFull).
	full       error
	fullSince  time.Time
	resume     <-chan time.Time
	resumeWait time.Duration
	// One-hop forwarding of clients (forward.go): the clients this member
	// forwards for while it does not serve, with their permissions; the
	// forwarded streams it serves, each a session of its shell.
	fwd      *forward.Forwarder
	fwdPerms map[shell.ClientID]*auth.Perms
	lead     *forward.Leader
	// joinTicks counts the ticks this member has waited to be admitted
	// to its cell as a new member (joinWatch); awaitTicks those it has
	// waited, with an empty Raft state, to learn whether its cell is new.
	joinTicks, awaitTicks int
	// apps encodes the appends sent, their entries once for every
	// follower (raft_wire.go).
	apps appendCache
}

// memberNames returns the brokers of the cell's slots.
func (r *raftState) memberNames(slots []uint64) []string {
	out := make([]string, 0, len(slots))
	for _, s := range slots {
		if m, ok := r.member(s); ok {
			out = append(out, string(m))
		}
	}
	return out
}

// slot returns the slot of Members[i].
func (o *RaftOptions) slot(i int) uint64 {
	if o.Slots != nil {
		return o.Slots[i]
	}
	return uint64(i + 1)
}

// raftID returns broker id's slot in the cell (0: not a member).
func (r *raftState) raftID(id msg.NodeID) uint64 {
	for i, m := range r.opts.Members {
		if m == id {
			return r.opts.slot(i)
		}
	}
	return 0
}

// member returns the broker in slot.
func (r *raftState) member(slot uint64) (msg.NodeID, bool) {
	for i, m := range r.opts.Members {
		if r.opts.slot(i) == slot {
			return m, true
		}
	}
	return "", false
}

// checkSlots refuses Slots that do not give each member its own slot.
func checkSlots(r RaftOptions) error {
	if r.Slots == nil {
		return nil
	}
	if len(r.Slots) != len(r.Members) {
		return fmt.Errorf("replicated PHB cell %s: %d slots for %d members", r.Cell, len(r.Slots), len(r.Members))
	}
	seen := map[uint64]msg.NodeID{}
	for i, s := range r.Slots {
		if s == 0 || s > raftphb.MaxSlots {
			return fmt.Errorf("replicated PHB cell %s: member %s on slot %d, outside 1 to %d", r.Cell, r.Members[i], s, raftphb.MaxSlots)
		}
		if o, dup := seen[s]; dup {
			return fmt.Errorf("replicated PHB cell %s: members %s and %s both on slot %d", r.Cell, o, r.Members[i], s)
		}
		seen[s] = r.Members[i]
	}
	return nil
}

// peerSlots returns the cell's slots.
func (r *raftState) peerSlots() []uint64 {
	out := make([]uint64, len(r.opts.Members))
	for i := range out {
		out[i] = r.opts.slot(i)
	}
	return out
}

// engineCells is the cell map of a member's engine: itself alone in its
// cell, each other member a cell of its own. One member at a time runs
// the pubends, so the engine has no cell peer to relay through, and the
// filter versions it logs are one sequence, continued by the next leader
// from the committed log.
func engineCells(cells gd.Cells, cell, self msg.NodeID, members []msg.NodeID) gd.Cells {
	out := gd.Cells{}
	for c, ms := range cells {
		if c != cell {
			out[c] = ms
		}
	}
	out[cell] = []msg.NodeID{self}
	for _, m := range members {
		if m != self {
			out["~"+m] = []msg.NodeID{m}
		}
	}
	return out
}

// newShell builds the shell of this member: serving (the pubends, with the
// Raft member as Durability) or standby (no routes).
func (n *Node) newRaftShell(serving bool) (*shell.Broker, *gd.Engine, error) {
	r := n.raft
	routes := n.opts.Routes
	if !serving {
		routes = nil
	}
	cfg := n.opts.GD
	cfg.PersistWindow = r.opts.Window
	if cfg.PersistWindow == 0 {
		cfg.PersistWindow = raftphb.Window
	}
	eng, err := gd.NewWithCells(n.opts.ID, cfg, routes, engineCells(n.opts.Cells, r.opts.Cell, n.opts.ID, r.opts.Members))
	if err != nil {
		return nil, nil, fmt.Errorf("broker %s: %w", n.opts.ID, err)
	}
	sc := shell.Config{ID: n.opts.ID, Engine: eng, Clock: n, Net: n, Logger: n.log}
	if serving {
		// The serving member refuses publishes while its own disk is
		// short of room (its reserve, measured at every trim tick), as a
		// plain PHB does; its Raft log still stops it if an append fails.
		sc.Hosted, sc.Durability, sc.DiskReserve = n.hosted, r.rn, max(n.opts.DiskReserve, 0)
	}
	sh := shell.New(sc)
	if serving {
		sh.DiskRoom(diskRoom(n.opts.DataDir))
	}
	return sh, eng, nil
}

// openRaft opens the member's disks (recovering its Raft log) at start.
func (n *Node) openRaft() error {
	r := n.raft
	if err := checkMemberDir(n.opts.FS, n.opts.DataDir, r.opts.Cell, n.opts.ID, r.raftID(n.opts.ID)); err != nil {
		return fmt.Errorf("broker %s: %w", n.opts.ID, err)
	}
	peers := r.peerSlots()
	rng := rand.New(rand.NewPCG(n.inc, uint64(time.Now().UnixNano())))
	rn, err := raftnode.Open(raftnode.Config{
		Replica: raftphb.Config{ID: r.raftID(n.opts.ID), Peers: peers, ElectionTicks: r.opts.ElectionTicks, HeartbeatTicks: 1,
			Jitter: rng.IntN},
		FS: n.opts.FS, Dir: n.opts.DataDir, LogOptions: eventlog.Options{SegmentBytes: n.opts.SegmentBytes},
		Send:       n.sendRaft,
		SendChunk:  n.sendRaftChunk,
		Compaction: r.opts.Compaction,
	})
	if err != nil {
		return fmt.Errorf("broker %s: open the Raft member in %s: %w", n.opts.ID, n.opts.DataDir, err)
	}
	r.rn = rn
	rn.Attach(raftReport{n})
	if c := rn.Corruption(); c != nil {
		n.log.Error("the Raft log or pubend store of this replicated PHB member is corrupt: its Raft state is lost. "+
			"It was moved aside, untouched, for inspection, and the member rejoins its cell as a new member: "+
			"without a vote until the cell's serving leader admits it and it has caught up from the leader's store image. "+
			"If most of the cell lost its state, no leader can admit it and the cell stays stopped: restore the members' data",
			"cell", string(r.opts.Cell), "found", c.Err.Error(), "moved_to", filepath.Join(n.opts.DataDir, c.Aside),
			"old_raft_id", c.From, "new_raft_id", rn.ID())
	}
	if rec := rn.Recovery(); rec.TornTail {
		n.log.Warn("Raft log had a torn tail after a crash; truncated it", "segment", rec.Segment, "offset", rec.Offset, "bytes", rec.TruncatedBytes)
	}
	n.log.Info("replicated PHB member started", "cell", string(r.opts.Cell), "raft_id", rn.ID(), "slot", r.raftID(n.opts.ID), "members", fmt.Sprint(r.opts.Members))
	if _, awaiting := rn.Replica().Awaiting(); awaiting && rn.Corruption() == nil {
		n.log.Info("this member's Raft state is empty (a new cell, or a lost data directory): "+
			"it forms a new cell only once every member of the cell reports an empty state too, and rejoins as a new member "+
			"if one reports the cell's history; it neither votes nor campaigns meanwhile",
			"cell", string(r.opts.Cell), "members", fmt.Sprint(r.opts.Members))
	}
	if w := raftphb.EvenCellWarning(len(r.opts.Members)); w != "" {
		// Allowed (internal/config), but an odd count is better.
		n.log.Warn("even number of replicated PHB members: "+w, "cell", string(r.opts.Cell), "members", len(r.opts.Members))
	}
	return nil
}

// sendRaft hands a Raft message to the link to its member (by slot: a
// rejoined member keeps its broker), if connected; Raft retransmits what
// a broken link loses.
func (n *Node) sendRaft(m *raftpb.Message) {
	to, ok := n.raft.member(raftphb.Slot(m.GetTo()))
	if !ok {
		return
	}
	c := n.peers[to]
	if c == nil {
		return
	}
	data, err := n.raft.apps.marshal(m)
	if err != nil {
		n.log.Error("cannot encode a Raft message", "err", err)
		return
	}
	c.Send(msg.Raft{Data: data})
}

// sendRaftChunk hands a piece of a chunked snapshot, or its ack, to the
// link to its member. The member's window bounds what is queued (a few
// chunks per transfer), far below the link's outbound queue.
func (n *Node) sendRaftChunk(to uint64, m msg.Msg) {
	member, ok := n.raft.member(raftphb.Slot(to))
	if !ok {
		return
	}
	if c := n.peers[member]; c != nil {
		c.Send(m)
	}
}

// stepRaftChunk hands the member a piece of a chunked snapshot, or an
// ack of one, from a cell peer. A piece it drops is logged, not an error
// of the link: a transfer cut short by a leader change leaves some.
func (n *Node) stepRaftChunk(from msg.NodeID, m msg.Msg) error {
	slot := n.raft.raftID(from)
	if slot == 0 {
		return fmt.Errorf("broker %s: a Raft snapshot chunk from %s, which is not a member of cell %s", n.opts.ID, from, n.raft.opts.Cell)
	}
	var err error
	switch v := m.(type) {
	case msg.RaftChunk:
		if raftphb.Slot(v.From) != slot {
			return fmt.Errorf("broker %s: a Raft snapshot chunk from %s signed by Raft member %d, of another slot", n.opts.ID, from, v.From)
		}
		err = n.raft.rn.StepChunk(v)
	case msg.RaftChunkAck:
		if raftphb.Slot(v.From) != slot {
			return fmt.Errorf("broker %s: a Raft snapshot chunk ack from %s signed by Raft member %d, of another slot", n.opts.ID, from, v.From)
		}
		err = n.raft.rn.StepChunkAck(v)
	}
	switch {
	case err == nil:
	case errors.Is(err, raftnode.ErrChunkStale):
		n.log.Debug("Raft snapshot chunk dropped", "from", string(from), "err", err)
	default:
		n.log.Warn("Raft snapshot chunk dropped", "from", string(from), "err", err)
	}
	return nil
}

// stepRaft hands the member a Raft message from a cell peer.
func (n *Node) stepRaft(from msg.NodeID, m msg.Raft) error {
	slot := n.raft.raftID(from)
	if slot == 0 {
		return fmt.Errorf("broker %s: a Raft message from %s, which is not a member of cell %s", n.opts.ID, from, n.raft.opts.Cell)
	}
	rm := &raftpb.Message{}
	if err := proto.Unmarshal(m.Data, rm); err != nil {
		return fmt.Errorf("broker %s: a malformed Raft message from %s: %w", n.opts.ID, from, err)
	}
	if raftphb.Slot(rm.GetFrom()) != slot {
		return fmt.Errorf("broker %s: a Raft message from %s signed by Raft member %d, of another slot", n.opts.ID, from, rm.GetFrom())
	}
	if err := n.raft.rn.Step(rm); err != nil {
		n.log.Debug("Raft message refused", "from", string(from), "err", err)
	}
	return nil
}

// runRaft carries out the member's work until none is left or an fsync
// of its Raft log is under way: write each Ready, fsync it on a goroutine
// of the Node (the loop meanwhile steps Raft messages and queues
// publishes: the next batch), then complete it in raftSynced. An error is
// fatal (a disk failed).
func (n *Node) runRaft() error {
	r := n.raft
	if r.full != nil {
		// The written Ready waits for room (raftLogFull): nothing
		// else is written, applied or read meanwhile.
		return r.fatal
	}
	for !r.syncing {
		ok, err := r.rn.Write()
		if err != nil {
			return fmt.Errorf("broker %s: Raft log: %w", n.opts.ID, err)
		}
		if !ok {
			if err := r.rn.RunJobs(); err != nil {
				return fmt.Errorf("broker %s: %w", n.opts.ID, err)
			}
			n.sh.Drain()
			return r.fatal
		}
		if r.rn.NeedsSync() {
			r.syncing = true
			rn, done := r.rn, r.synced
			go func() {
				// Let the frames just queued (appends to the followers,
				// acks) leave first: a new goroutine runs before the
				// writers the loop woke, and one in fsync keeps its P
				// until the runtime takes it back (persister.go, the same
				// for a PHB's group commit).
				runtime.Gosched()
				done <- rn.SyncLog()
			}()
			// Write applied what the log held durably already (the
			// leader's commits): their acks and knowledge leave now, not
			// after this fsync.
			n.sh.Drain()
			return r.fatal
		}
		if err := n.completeRaft(); err != nil {
			return err
		}
	}
	return nil
}

// raftSynced: the Raft log's fsync returned.
func (n *Node) raftSynced(err error) error {
	r := n.raft
	r.syncing = false
	if _, ok := storage.NoRoom(err); ok {
		n.raftLogFull(err)
		return nil
	}
	if err != nil {
		return fmt.Errorf("broker %s: %w", n.opts.ID, err)
	}
	if r.full != nil {
		n.log.Warn("Raft log writable again: the member goes on", "err", r.full, "after", time.Since(r.fullSince).Round(time.Millisecond))
		r.full, r.resumeWait = nil, 0
	}
	if err := n.completeRaft(); err != nil {
		return err
	}
	return n.runRaft()
}

// Waits of a member whose Raft log had no room before it tries again, as
// a plain PHB's log (shell.Reopener).
const (
	raftResumeFirst = 500 * time.Millisecond
	raftResumeMax   = 5 * time.Second
)

// raftLogFull: the fsync of the written Ready failed for want of room. The
// member keeps running, its Raft state and its place in the cell: after
// a wait (0.5 s, doubling to at most 5 s) raftResume reopens the Raft log,
// cut to its synced records, and writes the Ready again. Meanwhile it
// writes nothing else, as if that fsync were slow; the cell elects
// another leader if it led (docs/RELIABILITY.md "Disk full").
func (n *Node) raftLogFull(err error) {
	r := n.raft
	if r.full == nil {
		n.log.Error("Raft log disk full: the member waits for room, keeping its place in the cell; nothing acknowledged is lost", "err", err)
		r.fullSince = time.Now()
	}
	r.full = err
	r.resumeWait = min(max(2*r.resumeWait, raftResumeFirst), raftResumeMax)
	r.resume = time.After(r.resumeWait)
}

// raftResume: the wait after a full Raft log is over: write the Ready
// again and fsync it on the goroutine, as runRaft does.
func (n *Node) raftResume() error {
	r := n.raft
	r.resume = nil
	err := r.rn.ResumeLog()
	if _, ok := storage.NoRoom(err); ok {
		n.raftLogFull(err)
		return nil
	}
	if err != nil {
		return fmt.Errorf("broker %s: %w", n.opts.ID, err)
	}
	r.syncing = true
	rn, done := r.rn, r.synced
	go func() { done <- rn.SyncLog() }()
	return nil
}

// raftHeldEvents: while a Ready waits for its fsync (slow, or for room:
// raftLogFull), a leadership the member lost is reported on the tick
// (raftnode.Node.Tick), so that its shell gives up serving now.
func (n *Node) raftHeldEvents() error {
	r := n.raft
	if !r.syncing && r.full == nil {
		return nil
	}
	for _, ev := range r.rn.Events() {
		if err := n.raftEvent(ev); err != nil {
			return err
		}
	}
	return nil
}

// completeRaft sends, applies (acks reach the serving shell) and acts on
// leadership changes; the shell's next batch is proposed as it drains.
func (n *Node) completeRaft() error {
	r := n.raft
	if err := r.rn.Complete(); err != nil {
		return fmt.Errorf("broker %s: %w", n.opts.ID, err)
	}
	for _, ev := range r.rn.Events() {
		if err := n.raftEvent(ev); err != nil {
			return err
		}
	}
	if err := r.rn.RunJobs(); err != nil {
		return fmt.Errorf("broker %s: %w", n.opts.ID, err)
	}
	n.sh.Drain()
	return r.fatal
}

// raftEvent swaps the shell when the leadership changes.
func (n *Node) raftEvent(ev raftnode.Event) error {
	r := n.raft
	var kept map[shell.ClientID]bool
	switch ev.Kind {
	case raftnode.EventServe:
		sh, eng, err := n.newRaftShell(true)
		if err != nil {
			return err
		}
		if err := sh.Restore(ev.Loaded); err != nil {
			return fmt.Errorf("broker %s: restore the pubends from the committed log: %w", n.opts.ID, err)
		}
		r.serving = true
		n.sh, n.eng = sh, eng
		r.rn.Attach(raftReport{n})
		// The clients this member forwarded for are its own now.
		kept = n.forwardServe()
		n.log.Info("leading the replicated PHB cell", "cell", string(r.opts.Cell), "term", ev.Serve.Term, "records", ev.Serve.Next)
	case raftnode.EventRejoin:
		if ev.Corrupt != nil {
			return nil // openRaft logged it
		}
		n.log.Warn("this member has lost the Raft state its cell relies on (a new or wiped data directory): "+
			"it rejoins the cell as a new member, first without a vote, and catches up from the leader",
			"cell", string(r.opts.Cell), "old_raft_id", ev.Rejoin.ID,
			"new_raft_id", raftphb.MemberID(raftphb.Slot(ev.Rejoin.ID), ev.Rejoin.Gen), "reason", ev.Rejoin.Reason)
		return nil
	case raftnode.EventLost:
		sh, eng, err := n.newRaftShell(false)
		if err != nil {
			return err
		}
		r.serving = false
		n.sh, n.eng = sh, eng
		// Forwarded streams are told (fwdConn.CloseWith below): their
		// members resend to the next leader, in new streams. Their
		// publishes the lost shell held went with it: should this member
		// serve again, it takes nothing more of those streams
		// (forward.Refusals).
		r.lead.Lost() // the streams are told below, as clients (fwdConn)
		n.log.Info("no longer leading the replicated PHB cell", "cell", string(r.opts.Cell), "term", ev.Lost.Term, "unacked_batches", len(ev.Lost.Pending))
	}
	// Clients go elsewhere (or come back: they reconnect to the list), and
	// the links to other cells are renewed, so that downstream brokers
	// greet the new engine as a restarted upstream (resend summaries, acks
	// and nacks). Links within the cell carry Raft and stay.
	for cid, c := range n.clients {
		if kept[cid] {
			continue
		}
		c.CloseWith(errNotLeader, n.notLeaderReason())
		delete(n.clients, cid)
		n.relay.ClientDown(cid)
	}
	for peer, c := range n.peers {
		if r.raftID(peer) == 0 {
			c.Close()
			continue
		}
		n.sh.PeerUp(peer, n.peerInc[peer])
	}
	return nil
}

// awaitWarnTimeouts: a member that has waited this many election
// timeouts to learn whether its cell is new says so (and again after as
// many more).
const awaitWarnTimeouts = 10

// awaitWatch, on every Raft tick, warns when this member, started with an
// empty Raft state, has waited long to learn whether its cell is new: it
// forms a new cell only once every member reports an empty state, so a
// member that does not answer keeps it waiting — one that is down, or
// unreachable. If a majority of the cell lost its state, the members that
// kept theirs cannot lead alone and the cell stays stopped.
func (n *Node) awaitWatch() {
	r := n.raft
	missing, awaiting := r.rn.Replica().Awaiting()
	if r.waitedAgain(&r.awaitTicks, awaiting, awaitWarnTimeouts) {
		n.log.Warn("this member's Raft state is empty and it still waits to learn whether its cell is new: "+
			"it forms a new cell only when every member reports an empty state, and rejoins as a new member when one reports the cell's history. "+
			"Start the members it waits for, or check the links to them. If a majority of the cell's members lost their state "+
			"(wiped or replaced data directories), the others cannot lead alone and the cell stays stopped: "+
			"restore the members' data directories, or re-create the cell (empty every member's data directory and start them all: "+
			"its acknowledged events are then lost)",
			"cell", string(r.opts.Cell), "raft_id", r.rn.ID(), "waiting_for", fmt.Sprint(r.memberNames(missing)),
			"waited", time.Duration(r.awaitTicks)*r.opts.TickInterval)
	}
}

// joinWaitTimeouts: a member that has waited this many election
// timeouts to be admitted as a new member says so (and again after as
// many more).
const joinWaitTimeouts = 30

// joinWatch, on every Raft tick, warns when this member has waited long to
// be admitted to its cell as a new member (after a wiped or corrupt Raft
// state): only a serving leader admits it, and a cell most of whose
// members lost their state has none.
func (n *Node) joinWatch() {
	r := n.raft
	if r.waitedAgain(&r.joinTicks, r.rn.Replica().Joining(), joinWaitTimeouts) {
		n.log.Warn("this member still waits to be admitted to its cell as a new member: no serving leader has admitted it. "+
			"If a majority of the cell's members lost their Raft state, none can: the cell stays stopped until an operator restores "+
			"the members' data directories, or re-creates the cell (empty every member's data directory and start them all: "+
			"its acknowledged events are then lost)",
			"cell", string(r.opts.Cell), "raft_id", r.rn.ID(), "waited", time.Duration(r.joinTicks)*r.opts.TickInterval)
	}
}

// waitedAgain counts, in *ticks, the Raft ticks of a wait that goes on
// while waiting (a tick not waiting ends it: 0), and reports whether the
// wait has just lasted another timeouts election timeouts: time to warn.
func (r *raftState) waitedAgain(ticks *int, waiting bool, timeouts int) bool {
	if !waiting {
		*ticks = 0
		return false
	}
	*ticks++
	return *ticks%(timeouts*r.opts.ElectionTicks) == 0
}

var errNotLeader = errors.New("broker: not the leader of its replicated PHB cell")

func (n *Node) notLeaderReason() string {
	return fmt.Sprintf("%s does not lead replicated PHB cell %s now: try another member", n.opts.ID, n.raft.opts.Cell)
}

// standbyClient: a client reached a member that does not serve. It is
// told so, after a moment (so that a client cycling through the cell's
// members while it elects a leader does not spin), and moves on.
func (n *Node) standbyClient(c clientConn) {
	reason := n.notLeaderReason()
	time.AfterFunc(200*time.Millisecond, func() { c.CloseWith(errNotLeader, reason) })
}

// raftReport is what the Raft member reports to: the current shell.
type raftReport struct{ n *Node }

func (r raftReport) Persisted(first uint64, err error) error {
	if err != nil && errors.Is(err, raftnode.ErrLostLeadership) {
		return err // the shell is replaced on EventLost
	}
	if err2 := r.n.sh.Persisted(first, err); err2 != nil {
		r.n.raft.fatal = err2
		return err2
	}
	return nil
}

func (r raftReport) Fetched(f gd.Fetched) { r.n.sh.Fetched(f) }

func (r raftReport) Trimmed(first, dropped uint64, err error) { r.n.sh.Trimmed(first, dropped, err) }

// raftResumeC fires when a member whose Raft log had no room tries again
// (raftLogFull); nil otherwise.
func (n *Node) raftResumeC() <-chan time.Time {
	if n.raft == nil {
		return nil
	}
	return n.raft.resume
}
