package node

// Chunked snapshot transfer. A leader sends a member that needs compacted
// entries its store image inside a MsgSnap (send, install). An image that
// fits one chunk travels in that one message, as msg.Raft; a larger one
// would not fit the wire's frame, so the marshalled MsgSnap is cut into
// chunks (msg.RaftChunk) that the receiver stages in a file of its data
// directory and acknowledges (msg.RaftChunkAck). Only once the receiver
// holds every byte, each chunk checked against its CRC, does it decode the
// MsgSnap and step it, so the install path runs as for a small image and
// a transfer cut short installs nothing.
//
// Flow control: the leader keeps at most ChunkWindow chunks beyond the
// receiver's acknowledgement in flight, and sends the next as each ack
// arrives, so a transfer never fills the link's outbound queue (which
// would close the link) and costs the leader's loop one chunk per ack,
// while it goes on stepping and committing publishes. The leader resends
// from the acknowledged offset when the receiver repeats an ack (it
// dropped a chunk after a lost one) or after an election timeout without
// an ack, and gives the transfer up after two, as Raft's own
// snapshot timer does (Replica.retrySnapshots, which each ack restarts):
// Raft then probes the member and sends a new snapshot, a new transfer.
// The receiver accepts chunks in order only and drops any other (a
// counter, and an error for the caller's log); it abandons a transfer that
// a new one replaces, that falls silent for four election timeouts, or
// that a crash interrupted (Open removes the staging file).
//
// A transfer takes time, during which the cell goes on committing: had
// the leader compacted its log past the snapshot meanwhile, the member
// would need another snapshot once it installed this one, and under a
// steady load it would never catch up. So the leader holds its compaction
// at the member's position from the start of a transfer until the member
// has caught up to within the retained tail (or has made no progress for
// two election timeouts, or the leadership ends): its Raft log grows by
// what the cell commits meanwhile, no more.
//
// Etcd's rafthttp takes the same approach with its separate snapshot
// stream; P2S's state flush (DEBS 2014 §3) moves a replica's state apart
// from the ordered log for the same reason: the log's transport stays
// small and ordered while a large state moves beside it.

import (
	"errors"
	"fmt"
	"hash/crc32"
	"io/fs"
	"math"
	"path"

	"go.etcd.io/raft/v3/raftpb"
	"google.golang.org/protobuf/proto"

	"github.com/aerie-mq/aerie/internal/msg"
)

// Errors StepChunk and StepChunkAck return for a message they drop; the
// member goes on. ErrChunkStale: a leftover of a transfer that ended or
// was replaced (normal around leader changes and losses). ErrChunkBad: a
// message that cannot be right (checksum, size, a mismatch with the
// transfer): worth a warning.
var (
	ErrChunkStale = errors.New("raftphb: snapshot chunk dropped")
	ErrChunkBad   = errors.New("raftphb: bad snapshot chunk dropped")
)

// castagnoli is read-only after package initialisation.
var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// stagingFile is where a member stages an incoming chunked snapshot.
const stagingFile = "snapshot.incoming"

// maxChunkBytes keeps a chunk's frame under the wire's 16 MiB.
const maxChunkBytes = 8 << 20

// outTransfer is a chunked snapshot the leader is sending.
type outTransfer struct {
	to, seq, term, index uint64
	data                 []byte // the marshalled MsgSnap
	acked, sent          uint64
	idle                 int  // ticks since the last progress
	resent               bool // resent from acked since the last progress
}

// inTransfer is a chunked snapshot this member is receiving.
type inTransfer struct {
	from, seq, term, index, total uint64
	next                          uint64 // bytes staged
	file                          stagingWriter
	idle                          int
}

// stagingWriter is the staging file (vfs.File's subset used here).
type stagingWriter interface {
	Write(p []byte) (int, error)
	ReadAt(p []byte, off int64) (int, error)
	Close() error
}

// hold keeps the leader's compaction at or below at, the Raft index a
// member that is sent (or was just sent) a chunked snapshot holds.
type hold struct {
	at   uint64
	idle int // ticks without progress
}

// transfers is a node's chunked snapshots in both directions.
type transfers struct {
	out     map[uint64]*outTransfer // by receiver's Raft id
	holds   map[uint64]*hold        // by receiver's Raft id
	lastSeq uint64
	in      *inTransfer
	stats   TransferStats
}

// TransferStats counts chunked snapshot transfers.
type TransferStats struct {
	// Sent and Received: transfers completed (the receiver held every
	// byte); Abandoned: transfers given up, at either end.
	Sent, Received, Abandoned uint64
	// ChunksSent (resends included), ChunksReceived (staged), ChunksDropped
	// (stale, out of order, or bad).
	ChunksSent, ChunksReceived, ChunksDropped uint64
}

// sendTransfer starts sending the marshalled MsgSnap raw to member to in
// chunks, replacing any transfer still under way to it.
func (n *Node) sendTransfer(m *raftpb.Message, raw []byte) {
	x := &n.xfer
	if x.out == nil {
		x.out = map[uint64]*outTransfer{}
	}
	if _, ok := x.out[m.GetTo()]; ok {
		x.stats.Abandoned++
	}
	x.lastSeq++
	t := &outTransfer{to: m.GetTo(), seq: x.lastSeq, term: m.GetTerm(),
		index: m.GetSnapshot().GetMetadata().GetIndex(), data: raw}
	x.out[t.to] = t
	if x.holds == nil {
		x.holds = map[uint64]*hold{}
	}
	if h, ok := x.holds[t.to]; !ok || h.at > t.index {
		x.holds[t.to] = &hold{at: t.index}
	}
	n.pump(t)
}

// compactionHold is the highest Raft index the leader may compact to
// while members catch up from chunked snapshots (false: no limit).
func (n *Node) compactionHold() (uint64, bool) {
	top := uint64(math.MaxUint64)
	for _, h := range n.xfer.holds {
		top = min(top, h.at)
	}
	return top, len(n.xfer.holds) > 0
}

// tickHolds moves each hold up to its member's progress and releases it
// once the member is within the retained tail of the applied index, or
// has not moved for two election timeouts with no transfer under way.
func (n *Node) tickHolds(et int) {
	applied := n.rep.Status().Applied
	for to, h := range n.xfer.holds {
		if m := n.rep.Match(to); m > h.at {
			h.at, h.idle = m, 0
		} else if _, sending := n.xfer.out[to]; !sending {
			h.idle++
		}
		if h.at+n.cfg.Compaction.Retain >= applied || h.idle >= 2*et {
			delete(n.xfer.holds, to)
		}
	}
}

// pump sends t's chunks up to the window beyond what was acknowledged.
func (n *Node) pump(t *outTransfer) {
	c := n.cfg.Compaction
	total := uint64(len(t.data))
	limit := min(total, t.acked+uint64(c.ChunkWindow*c.ChunkBytes))
	for t.sent < limit {
		end := min(total, t.sent+uint64(c.ChunkBytes))
		data := t.data[t.sent:end]
		n.cfg.SendChunk(t.to, msg.RaftChunk{From: n.ID(), To: t.to, Seq: t.seq, Term: t.term, Index: t.index,
			Total: total, Offset: t.sent, CRC: crc32.Checksum(data, castagnoli), Data: data})
		n.xfer.stats.ChunksSent++
		t.sent = end
	}
}

// StepChunkAck hands the leader a receiver's acknowledgement: the window
// moves on (and Raft's snapshot timer restarts); Next = Total ends the
// transfer.
func (n *Node) StepChunkAck(a msg.RaftChunkAck) error {
	t := n.xfer.out[a.From]
	if t == nil || t.seq != a.Seq || a.To != n.ID() {
		return fmt.Errorf("%w: ack of transfer %d from member %d: not under way", ErrChunkStale, a.Seq, a.From)
	}
	if a.Next > uint64(len(t.data)) {
		return fmt.Errorf("%w: ack of transfer %d from member %d at %d, past its %d bytes", ErrChunkBad, a.Seq, a.From, a.Next, len(t.data))
	}
	if a.Next < t.acked {
		return nil // overtaken
	}
	if a.Next == t.acked {
		// A repeated ack: the receiver dropped a chunk after a lost one.
		// Resend from there at once, once (a fast retransmit), rather
		// than on the timer.
		if t.sent > t.acked && !t.resent {
			t.sent, t.resent = t.acked, true
			n.pump(t)
		}
		return nil
	}
	t.acked, t.sent, t.idle, t.resent = a.Next, max(t.sent, a.Next), 0, false
	n.rep.SnapshotProgress(t.to)
	if t.acked == uint64(len(t.data)) {
		delete(n.xfer.out, t.to)
		n.xfer.stats.Sent++
		return nil
	}
	n.pump(t)
	return nil
}

// tickTransfers advances the transfers' timers: a leader resends from the
// acknowledged offset after an election timeout without progress and
// gives up after two; a receiver abandons a transfer silent for four.
func (n *Node) tickTransfers() {
	et := n.rep.ElectionTicks()
	for to, t := range n.xfer.out {
		t.idle++
		switch {
		case t.idle >= 2*et:
			delete(n.xfer.out, to)
			n.xfer.stats.Abandoned++
		case t.idle%et == 0:
			t.sent = t.acked
			n.pump(t)
		}
	}
	if in := n.xfer.in; in != nil {
		if in.idle++; in.idle >= 4*et {
			n.abandonIn()
		}
	}
	n.tickHolds(et)
}

// dropOutgoing ends the transfers this member sends (it no longer leads).
func (n *Node) dropOutgoing() {
	n.xfer.stats.Abandoned += uint64(len(n.xfer.out))
	clear(n.xfer.out)
	clear(n.xfer.holds)
}

// StepChunk hands the member a chunk of a snapshot for it: staged if it
// is the next of its transfer (the first chunk of a new transfer starts
// it, abandoning any other), acknowledged, and once the transfer is whole the
// MsgSnap it carries is stepped. Any other chunk is dropped with an error
// wrapping ErrChunkStale or ErrChunkBad; an error the staging file's disk
// returns abandons the transfer (Raft sends another snapshot).
func (n *Node) StepChunk(c msg.RaftChunk) error {
	err := n.stepChunk(c)
	if errors.Is(err, ErrChunkStale) || errors.Is(err, ErrChunkBad) {
		n.xfer.stats.ChunksDropped++
	}
	return err
}

func (n *Node) stepChunk(c msg.RaftChunk) error {
	if n.rejoining != nil || c.To != n.ID() {
		return fmt.Errorf("%w: chunk for member %d at member %d", ErrChunkStale, c.To, n.ID())
	}
	if max := uint64(n.cfg.Compaction.MaxSnapshotBytes); c.Total > max {
		return fmt.Errorf("%w: a snapshot of %d bytes from member %d, above the limit of %d", ErrChunkBad, c.Total, c.From, max)
	}
	if crc32.Checksum(c.Data, castagnoli) != c.CRC {
		return fmt.Errorf("%w: chunk at %d of transfer %d from member %d: checksum mismatch", ErrChunkBad, c.Offset, c.Seq, c.From)
	}
	in := n.xfer.in
	if c.Offset == 0 && (in == nil || in.from != c.From || in.seq != c.Seq || in.term != c.Term || in.index != c.Index || in.total != c.Total) {
		if err := n.startIn(c); err != nil {
			return err
		}
		in = n.xfer.in
	}
	switch {
	case in == nil || in.from != c.From || in.seq != c.Seq:
		return fmt.Errorf("%w: chunk at %d of transfer %d from member %d: not under way", ErrChunkStale, c.Offset, c.Seq, c.From)
	case in.term != c.Term || in.index != c.Index || in.total != c.Total:
		// One of the two is wrong: the transfer under way goes on.
		return fmt.Errorf("%w: chunk of transfer %d from member %d changed its snapshot (term %d index %d, %d bytes)", ErrChunkBad, c.Seq, c.From, c.Term, c.Index, c.Total)
	case c.Offset != in.next:
		// A chunk after a lost one, or a resent one: the ack tells the
		// leader where this member stands.
		n.ackIn(in)
		return fmt.Errorf("%w: chunk at %d of transfer %d from member %d, which holds %d bytes", ErrChunkStale, c.Offset, c.Seq, c.From, in.next)
	}
	if _, err := in.file.Write(c.Data); err != nil {
		n.abandonIn()
		return fmt.Errorf("raftphb: stage a snapshot from member %d: %w", c.From, err)
	}
	in.next += uint64(len(c.Data))
	in.idle = 0
	n.xfer.stats.ChunksReceived++
	if in.next < in.total {
		n.ackIn(in)
		return nil
	}
	return n.finishIn(in)
}

// startIn begins staging transfer c (its first chunk), abandoning any.
func (n *Node) startIn(c msg.RaftChunk) error {
	if n.xfer.in != nil {
		n.abandonIn()
	}
	if err := n.cfg.FS.MkdirAll(n.cfg.Dir); err != nil {
		return fmt.Errorf("raftphb: stage a snapshot from member %d: %w", c.From, err)
	}
	f, err := n.cfg.FS.Create(n.stagingPath())
	if err != nil {
		return fmt.Errorf("raftphb: stage a snapshot from member %d: %w", c.From, err)
	}
	n.xfer.in = &inTransfer{from: c.From, seq: c.Seq, term: c.Term, index: c.Index, total: c.Total, file: f}
	return nil
}

func (n *Node) ackIn(in *inTransfer) {
	n.cfg.SendChunk(in.from, msg.RaftChunkAck{From: n.ID(), To: in.from, Seq: in.seq, Next: in.next})
}

// finishIn reads the whole staged MsgSnap back, removes the staging file
// and steps the message, then tells the leader it has every byte.
func (n *Node) finishIn(in *inTransfer) error {
	raw := make([]byte, in.total)
	_, err := in.file.ReadAt(raw, 0)
	n.closeIn()
	if err != nil {
		n.xfer.stats.Abandoned++
		return fmt.Errorf("raftphb: read back a staged snapshot from member %d: %w", in.from, err)
	}
	m := &raftpb.Message{}
	if err := proto.Unmarshal(raw, m); err != nil {
		n.xfer.stats.Abandoned++
		return fmt.Errorf("%w: transfer %d from member %d: %v", ErrChunkBad, in.seq, in.from, err)
	}
	if m.GetType() != raftpb.MsgSnap || m.GetFrom() != in.from || m.GetTo() != n.ID() || m.GetTerm() != in.term ||
		m.GetSnapshot().GetMetadata().GetIndex() != in.index {
		n.xfer.stats.Abandoned++
		return fmt.Errorf("%w: transfer %d from member %d: a %v from %d to %d at term %d, not the snapshot it announced",
			ErrChunkBad, in.seq, in.from, m.GetType(), m.GetFrom(), m.GetTo(), m.GetTerm())
	}
	n.xfer.stats.Received++
	n.ackIn(in)
	return n.Step(m)
}

// abandonIn drops the incoming transfer and its staged bytes.
func (n *Node) abandonIn() {
	n.closeIn()
	n.xfer.stats.Abandoned++
}

// closeIn closes and removes the staging file. A file that cannot be
// removed now is truncated by the next transfer's Create, or removed by
// the next Open.
func (n *Node) closeIn() {
	if n.xfer.in == nil {
		return
	}
	_ = n.xfer.in.file.Close()
	_ = n.cfg.FS.Remove(n.stagingPath())
	n.xfer.in = nil
}

func (n *Node) stagingPath() string { return path.Join(n.cfg.Dir, stagingFile) }

// removeStaging removes what a crash left of an incoming transfer.
func removeStaging(n *Node) error {
	err := n.cfg.FS.Remove(n.stagingPath())
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("raftphb: remove a staged snapshot: %w", err)
	}
	return nil
}
