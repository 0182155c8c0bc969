package node

// Chunked snapshot transfer. A leader sends a member that needs compacted
// entries its store image inside a MsgSnap (send, install). A store that
// fits one chunk travels in that one message, as msg.Raft; a larger one
// would not fit the wire's frame, and building it whole would stall the
// leader's loop for as long as it takes to read and copy it. So the
// leader streams it: a transfer is the MsgSnap (with the snapshot's
// reference, not the store) followed by the store image's encoding, read
// from the store a few chunks ahead of what the receiver acknowledged
// (storage.ImageSource) and sent in chunks (msg.RaftChunk) that the
// receiver stages in a file of its data directory and acknowledges
// (msg.RaftChunkAck):
//
//	header length uvarint | MsgSnap (protobuf) | store image (storage.Image.Encode)
//
// Only once the receiver holds the last chunk, each chunk checked against
// its CRC, does it read the MsgSnap back and step it, its data a staged
// snapshot that names the file: the install reads the image from there
// record by record, into the store as for a small image, and a transfer
// cut short installs nothing (transfer_in.go).
//
// Flow control: the leader keeps at most ChunkWindow chunks beyond the
// receiver's acknowledgement in flight, and reads and sends the next as
// each ack arrives, so a transfer never fills the link's outbound queue
// (which would close the link), holds at most a window of the image in
// memory, and costs the leader's loop one chunk per ack, while it goes on
// stepping and committing publishes. The leader resends from the
// acknowledged offset when the receiver repeats an ack (it dropped a chunk
// after a lost one) or after an election timeout without an ack, and gives
// the transfer up after two, as Raft's own snapshot timer does
// (Replica.retrySnapshots, which each ack restarts): Raft then probes the
// member and sends a new snapshot, a new transfer. The leader also gives
// up when its store drops records the transfer has not read yet (a trim).
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
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"math"

	"go.etcd.io/raft/v3/raftpb"
	"google.golang.org/protobuf/proto"

	"github.com/aerie-mq/aerie/internal/msg"
	"github.com/aerie-mq/aerie/internal/raftphb"
	"github.com/aerie-mq/aerie/internal/storage"
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

// maxChunkBytes keeps a chunk's frame under the wire's 16 MiB.
const maxChunkBytes = 8 << 20

// outTransfer is a chunked snapshot the leader is sending.
type outTransfer struct {
	to, seq, term, index uint64
	// src reads the rest of the store image (nil once read to the end:
	// done); buf is the transfer's bytes from offset base that were read
	// and not yet acknowledged.
	src         *storage.ImageSource
	buf         []byte
	base        uint64
	done        bool
	acked, sent uint64
	idle        int  // ticks since the last progress
	resent      bool // resent from acked since the last progress
}

// end is the offset after the bytes read so far (the transfer's size once
// done).
func (t *outTransfer) end() uint64 { return t.base + uint64(len(t.buf)) }

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

// sendTransfer starts streaming the store image to the receiver of the
// MsgSnap m, whose snapshot's pubend log index is next, replacing any
// transfer still under way to it.
func (n *Node) sendTransfer(m *raftpb.Message, next uint64) error {
	src, err := n.store.ImageSource()
	if err != nil {
		return fmt.Errorf("pubend store: %w", err)
	}
	if src.Next() < next {
		return fmt.Errorf("raftphb: snapshot at pubend index %d, the store ends at %d", next, src.Next())
	}
	m = proto.CloneOf(m)
	m.Snapshot.Data = raftphb.EncodeSnapshot(next, nil)
	hdr, err := proto.Marshal(m)
	if err != nil {
		return fmt.Errorf("raftphb: outgoing snapshot: %w", err)
	}
	x := &n.xfer
	if x.out == nil {
		x.out, x.holds = map[uint64]*outTransfer{}, map[uint64]*hold{}
	}
	if _, ok := x.out[m.GetTo()]; ok {
		x.stats.Abandoned++
	}
	x.lastSeq++
	t := &outTransfer{to: m.GetTo(), seq: x.lastSeq, term: m.GetTerm(), index: m.GetSnapshot().GetMetadata().GetIndex(),
		src: src, buf: append(binary.AppendUvarint(nil, uint64(len(hdr))), hdr...)}
	x.out[t.to] = t
	if h, ok := x.holds[t.to]; !ok || h.at > t.index {
		x.holds[t.to] = &hold{at: t.index}
	}
	n.snapshotsSent++
	n.pump(t)
	return nil
}

// pump sends t's chunks up to the window beyond what was acknowledged,
// reading the image as far as they need.
func (n *Node) pump(t *outTransfer) {
	c := n.cfg.Compaction
	limit := t.acked + uint64(c.ChunkWindow*c.ChunkBytes)
	for t.sent < limit {
		end := t.sent + uint64(c.ChunkBytes)
		if end > t.end() && !t.done && !n.readImage(t, c.ChunkBytes) {
			return
		}
		end = min(end, t.end())
		if end <= t.sent {
			return // all sent
		}
		data := t.buf[t.sent-t.base : end-t.base]
		n.cfg.SendChunk(t.to, msg.RaftChunk{From: n.ID(), To: t.to, Seq: t.seq, Term: t.term, Index: t.index,
			Offset: t.sent, Last: t.done && end == t.end(), CRC: crc32.Checksum(data, castagnoli), Data: data})
		n.xfer.stats.ChunksSent++
		t.sent = end
	}
}

// readImage reads at least k more bytes of t's image, or its end. A
// store that no longer holds what is left to read (a trim), or an image
// above MaxSnapshotBytes, ends the transfer: false.
func (n *Node) readImage(t *outTransfer, k int) bool {
	buf, done, err := n.store.ReadImage(t.src, t.buf, k)
	t.buf = buf
	if done {
		t.done, t.src = true, nil
		n.snapshotBytes = max(n.snapshotBytes, int(t.end()))
	}
	if err != nil || t.end() > uint64(n.cfg.Compaction.MaxSnapshotBytes) {
		delete(n.xfer.out, t.to)
		n.xfer.stats.Abandoned++
		return false
	}
	return true
}

// StepChunkAck hands the leader a receiver's acknowledgement: the window
// moves on (and Raft's snapshot timer restarts); an ack of the whole
// transfer ends it.
func (n *Node) StepChunkAck(a msg.RaftChunkAck) error {
	t := n.xfer.out[a.From]
	if t == nil || t.seq != a.Seq || a.To != n.ID() {
		return fmt.Errorf("%w: ack of transfer %d from member %d: not under way", ErrChunkStale, a.Seq, a.From)
	}
	if a.Next > t.sent {
		return fmt.Errorf("%w: ack of transfer %d from member %d at %d, past the %d bytes sent", ErrChunkBad, a.Seq, a.From, a.Next, t.sent)
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
	t.buf, t.base = t.buf[a.Next-t.base:], a.Next
	t.acked, t.idle, t.resent = a.Next, 0, false
	n.rep.SnapshotProgress(t.to)
	if t.done && t.acked == t.end() {
		delete(n.xfer.out, t.to)
		n.xfer.stats.Sent++
		return nil
	}
	n.pump(t)
	return nil
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

// tickHolds moves each hold up to its member's progress and releases it,
// once no transfer to the member is under way, when the member is within
// the retained tail of the applied index (compaction keeps its entries
// anyway) or has not moved for two election timeouts.
func (n *Node) tickHolds(et int) {
	if len(n.xfer.holds) == 0 {
		return
	}
	applied := n.rep.Status().Applied
	for to, h := range n.xfer.holds {
		if m := n.rep.Match(to); m > h.at {
			h.at, h.idle = m, 0
		}
		if _, sending := n.xfer.out[to]; sending {
			continue
		}
		if h.idle++; h.at+n.cfg.Compaction.Retain >= applied || h.idle >= 2*et {
			delete(n.xfer.holds, to)
		}
	}
}

// dropOutgoing ends the transfers this member sends (it no longer leads).
func (n *Node) dropOutgoing() {
	n.xfer.stats.Abandoned += uint64(len(n.xfer.out))
	clear(n.xfer.out)
	clear(n.xfer.holds)
}
