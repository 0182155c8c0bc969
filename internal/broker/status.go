package broker

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"sort"

	"github.com/aerie-mq/aerie/internal/msg"

	"github.com/aerie-mq/aerie/internal/gd"
	raftnode "github.com/aerie-mq/aerie/internal/raftphb/node"
)

// Status is a snapshot of a broker for dashboards and tests.
type Status struct {
	ID      string           `json:"id"`
	Streams []gd.StreamState `json:"streams"`
	Stats   gd.Stats         `json:"stats"`
	// Durable counts the durable subscriptions' catch-ups, gaps and
	// pacing (gd.DurableStats).
	Durable gd.DurableStats `json:"durable"`
	Peers   []string        `json:"peers"`
	// Forwarded counts, per downstream cell, the events this broker sent
	// it (first-time and in answer to nacks).
	Forwarded map[string]uint64 `json:"forwarded,omitempty"`
	Clients   int               `json:"clients"`
	// LogFirst and LogNext bound the records the event log still holds.
	LogFirst uint64 `json:"log_first"`
	LogNext  uint64 `json:"log_next"`
	// LogBytes is the event log's size on disk (0 without one).
	LogBytes int64 `json:"log_bytes"`
	// DiskFull is why publishes are refused for want of room on the event
	// log's disk ("" when they are not: docs/RELIABILITY.md "Disk full");
	// DiskFullSince when an append failed on it (Unix ms, 0 for the
	// reserve); DiskFullTimes how often appends failed on a full disk,
	// PublishesRefusedDisk the publishes refused for want of room.
	DiskFull             string `json:"disk_full,omitempty"`
	DiskFullSince        int64  `json:"disk_full_since,omitempty"`
	DiskFullTimes        uint64 `json:"disk_full_times"`
	PublishesRefusedDisk uint64 `json:"publishes_refused_disk"`
	// MemoryBudget is the memory budget (0: none), LiveHeap the live heap
	// last sampled against it, Shedding whether the broker sheds its
	// caches now for being near it, MemorySheds how often it began
	// (shell.Memory).
	MemoryBudget int64  `json:"memory_budget,omitempty"`
	LiveHeap     int64  `json:"live_heap,omitempty"`
	Shedding     bool   `json:"shedding,omitempty"`
	MemorySheds  uint64 `json:"memory_sheds"`
	// Release is the release protocol's state per pubend stream (Gryphon
	// DS §3): how far each downstream cell has acknowledged, which is
	// what holds a pubend's release and its log.
	Release []gd.ReleaseState `json:"release"`
	// Membership is the installed membership view (nil: no membership).
	Membership *MembershipStatus `json:"membership,omitempty"`
	// Chaos counts the chaos monkey's actions, by kind (nil: no monkey).
	Chaos map[string]int `json:"chaos,omitempty"`
	// AuthFailures counts clients refused for bad credentials;
	// HandshakeFailures every connection refused before it was up (TLS,
	// Hello, certificate name, credentials).
	AuthFailures      uint64 `json:"auth_failures"`
	HandshakeFailures uint64 `json:"handshake_failures"`
	// Congestion is congestion control per pubend regulated or monitored
	// here (nil when it is off).
	Congestion []gd.CCState `json:"congestion,omitempty"`
	// Fsync is the event log's fsync latency in seconds, Batch the records
	// per group commit (both empty on a broker without an event log).
	Fsync Histogram `json:"fsync"`
	Batch Histogram `json:"batch"`
	// Raft is this member's view of its replicated PHB cell (nil: not a
	// member of one).
	Raft *RaftStatus `json:"raft,omitempty"`
	// Relay is the relaying of publishes to pubends hosted elsewhere
	// (nil: every pubend in reach is hosted here, and none is relayed here).
	Relay *RelayStatus `json:"relay,omitempty"`
}

// RelayStatus counts a broker's relayed publishes (docs/ARCHITECTURE.md
// "Publishing anywhere"): Relayed, sent up a pubend's tree for its
// clients (a resend counts again); Taken, relayed here from downstream;
// Clients, the clients whose publishes it relays now; Streams, the
// streams downstream brokers relay here now.
type RelayStatus struct {
	Relayed uint64 `json:"relayed"`
	Taken   uint64 `json:"taken"`
	Clients int    `json:"clients"`
	Streams int    `json:"streams"`
}

// RaftStatus is a replicated PHB member's view: whether it serves the
// cell's pubends (its leader, with its term's first entry applied), the
// term and the leader it knows of, and the configuration it applied. Raft
// ids are a member's slot (its index in Members plus one) in the low 8
// bits and its generation above them (raftphb.MemberID): a member that
// lost its data directory rejoins under the next generation.
type RaftStatus struct {
	Cell    string   `json:"cell"`
	Members []string `json:"members"`
	ID      uint64   `json:"id"`
	Serving bool     `json:"serving"`
	Term    uint64   `json:"term"`
	Leader  uint64   `json:"leader"`
	// Voters and Learners are the configuration this member applied;
	// Joining says it waits to be admitted (it rejoins as a new member).
	Voters   []uint64 `json:"voters"`
	Learners []uint64 `json:"learners,omitempty"`
	Joining  bool     `json:"joining,omitempty"`
	// Awaiting says it started with an empty Raft state and waits until
	// every member of the cell reports one too (a new cell) before it
	// votes; AwaitingFrom are the members it has not heard that from.
	Awaiting     bool     `json:"awaiting_new_cell,omitempty"`
	AwaitingFrom []string `json:"awaiting_from,omitempty"`
	// Rejoins counts the times this member rejoined since it started.
	Rejoins uint64 `json:"rejoins,omitempty"`
	// Log is this member's Raft log: its first Raft index (after the
	// snapshot it was compacted to), entries, eventlog records and bytes.
	LogFirstIndex uint64 `json:"log_first_index"`
	LogEntries    uint64 `json:"log_entries"`
	LogRecords    uint64 `json:"log_records"`
	LogBytes      int64  `json:"log_bytes"`
	// Compactions of the log since the broker started; snapshots sent to
	// members that needed compacted entries, and installed here.
	Compactions        uint64 `json:"compactions"`
	SnapshotsSent      uint64 `json:"snapshots_sent"`
	SnapshotsInstalled uint64 `json:"snapshots_installed"`
	// StoreFirst and StoreNext bound the records this member's pubend
	// store holds, serving or not: every member trims it as the serving
	// leader does (TrimsProposed while serving, TrimsApplied by every
	// member that dropped segments on the leader's word).
	StoreFirst    uint64 `json:"store_first"`
	StoreNext     uint64 `json:"store_next"`
	TrimsProposed uint64 `json:"trims_proposed"`
	TrimsApplied  uint64 `json:"trims_applied"`
	// Snapshots larger than one chunk travel in chunks: transfers this
	// member completed as sender and as receiver, transfers given up at
	// either end (a leader change, a crash, silence), and chunks it
	// dropped (stale, out of order, or bad: the log says which).
	// Flow: batches proposed (serving) and applied, with their records,
	// Raft log writes and fsyncs, and append messages sent with the
	// entries they carried, since the broker started.
	Flow               raftnode.Flow `json:"flow"`
	TransfersSent      uint64        `json:"snapshot_transfers_sent,omitempty"`
	TransfersReceived  uint64        `json:"snapshot_transfers_received,omitempty"`
	TransfersAbandoned uint64        `json:"snapshot_transfers_abandoned,omitempty"`
	ChunksDropped      uint64        `json:"snapshot_chunks_dropped,omitempty"`
	// Clients is what the member does with clients while it does not
	// serve ("forward" or "redirect"); Forwarding counts the clients it
	// forwards for now, Forwarded those forwarded to it (serving).
	Clients    string `json:"clients"`
	Forwarding int    `json:"forwarding,omitempty"`
	Forwarded  int    `json:"forwarded,omitempty"`
	// Refused counts the streams forwarded to it of which it refused a
	// publish, kept until their end, their link's loss or their member's
	// restart (forward.Leader; docs/RELIABILITY.md "Running for weeks").
	Refused int `json:"refused,omitempty"`
}

// Status asks the loop for a snapshot.
func (n *Node) Status(ctx context.Context) (Status, error) {
	reply := make(chan Status, 1)
	select {
	case n.status <- reply:
	case <-ctx.Done():
		return Status{}, ctx.Err()
	}
	select {
	case s := <-reply:
		return s, nil
	case <-ctx.Done():
		return Status{}, ctx.Err()
	}
}

func (n *Node) snapshot() Status {
	s := Status{ID: string(n.opts.ID), Streams: n.eng.Inspect(), Stats: n.eng.Stats(), Clients: n.sh.Clients(), Congestion: n.eng.CCStates()}
	for down, c := range n.eng.Forwarded() {
		if s.Forwarded == nil {
			s.Forwarded = map[string]uint64{}
		}
		s.Forwarded[string(down)] = c
	}
	for p := range n.peers {
		s.Peers = append(s.Peers, string(p))
	}
	sort.Strings(s.Peers)
	s.LogFirst, s.LogNext = n.sh.LogBounds()
	s.LogBytes = n.disk.logBytes.Load()
	d := n.sh.Disk()
	s.DiskFull, s.DiskFullSince, s.DiskFullTimes, s.PublishesRefusedDisk = d.Full, d.FullSince.Millis(), d.FullTimes, d.Refused
	m := n.sh.MemoryState()
	s.MemoryBudget, s.LiveHeap, s.Shedding, s.MemorySheds = m.Budget, m.Live, m.Shedding, m.Sheds
	s.Release = n.eng.ReleaseStates()
	s.Durable = n.eng.DurableStats()
	s.Membership = n.membershipStatus()
	if n.monkey != nil {
		s.Chaos = maps.Clone(n.chaos)
	}
	s.AuthFailures, s.HandshakeFailures = n.authFailures.Load(), n.handshakeFailures.Load()
	if r := n.relay; r.Active() || r.Taken > 0 {
		s.Relay = &RelayStatus{Relayed: r.Relayed, Taken: r.Taken, Clients: r.Clients(), Streams: r.Streams()}
	}
	if r := n.raft; r != nil && r.rn != nil {
		st := r.rn.Replica().Status()
		ns := r.rn.Stats()
		s.Raft = &RaftStatus{Cell: string(r.opts.Cell), ID: st.ID, Serving: r.serving, Term: st.Term, Leader: st.Lead,
			Voters: st.Conf.GetVoters(), Learners: st.Conf.GetLearners(), Joining: st.Joining, Rejoins: ns.Rejoins,
			LogFirstIndex: ns.Log.FirstIndex, LogEntries: ns.Log.Entries, LogRecords: ns.Log.Records, LogBytes: ns.Log.Bytes,
			Flow: ns.Flow, Compactions: ns.Compactions, SnapshotsSent: ns.SnapshotsSent, SnapshotsInstalled: ns.SnapshotsInstalled,
			TrimsProposed: ns.TrimsProposed, TrimsApplied: ns.TrimsApplied,
			TransfersSent: ns.Transfers.Sent, TransfersReceived: ns.Transfers.Received,
			TransfersAbandoned: ns.Transfers.Abandoned, ChunksDropped: ns.Transfers.ChunksDropped,
			Clients: string(r.opts.Clients), Forwarding: r.fwd.Len(), Forwarded: r.lead.Len(), Refused: r.lead.Refused()}
		s.Raft.StoreFirst, s.Raft.StoreNext = r.rn.StoreBounds()
		if missing, ok := r.rn.Replica().Awaiting(); ok {
			s.Raft.Awaiting, s.Raft.AwaitingFrom = true, r.memberNames(missing)
		}
		for _, m := range r.opts.Members {
			s.Raft.Members = append(s.Raft.Members, string(m))
		}
	}
	s.Fsync, s.Batch = n.disk.fsync.snapshot(), n.disk.batch.snapshot()
	return s
}

// Ready reports whether the broker can do its job, and if not, why: it
// listens, its loop answers, and it has a link to at least one member of
// every upstream cell (a broker that only hosts pubends needs none).
func (n *Node) Ready(ctx context.Context) (bool, string) {
	select {
	case <-n.listening:
	default:
		return false, "not listening yet"
	}
	st, err := n.Status(ctx)
	if err != nil {
		return false, "its loop does not answer: " + err.Error()
	}
	for _, r := range n.opts.Routes {
		if r.Up == "" {
			continue
		}
		members := n.opts.Cells[r.Up]
		if members == nil {
			members = []msg.NodeID{r.Up}
		}
		if !slices.ContainsFunc(members, func(m msg.NodeID) bool { return slices.Contains(st.Peers, string(m)) }) {
			return false, fmt.Sprintf("no link to upstream cell %s (pubend %s)", r.Up, r.Pubend)
		}
	}
	return true, ""
}
