package node

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io/fs"
	"path"

	"go.etcd.io/raft/v3/raftpb"
	"google.golang.org/protobuf/proto"

	"github.com/aerie-mq/aerie/internal/msg"
	"github.com/aerie-mq/aerie/internal/raftphb"
)

// The receiving end of a chunked snapshot transfer (transfer.go): chunks
// are staged, in order, in one file of the member's data directory, and
// the image is installed from that file record by record, so that memory
// stays bounded by a record (and a chunk), whatever the image's size.

// stagingFile is where a member stages an incoming chunked snapshot.
const stagingFile = "snapshot.incoming"

// inTransfer is a chunked snapshot this member is receiving.
type inTransfer struct {
	from, seq, term, index uint64
	next                   uint64 // bytes staged
	file                   stagingWriter
	idle                   int
}

// stagingWriter is the staging file (the part of vfs.File used here).
type stagingWriter interface {
	Write(p []byte) (int, error)
	ReadAt(p []byte, off int64) (int, error)
	Close() error
}

// StepChunk hands the member a chunk of a snapshot for it: staged if it
// is the next of its transfer (the first chunk of a new transfer starts
// it, abandoning any other), acknowledged, and once the last is in the
// MsgSnap the transfer carries is stepped. Any other chunk is dropped
// with an error wrapping ErrChunkStale or ErrChunkBad; an error of the
// staging file's disk abandons the transfer (Raft sends another
// snapshot).
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
	if crc32.Checksum(c.Data, castagnoli) != c.CRC {
		return fmt.Errorf("%w: chunk at %d of transfer %d from member %d: checksum mismatch", ErrChunkBad, c.Offset, c.Seq, c.From)
	}
	in := n.xfer.in
	if c.Offset == 0 && (in == nil || in.from != c.From || in.seq != c.Seq || in.term != c.Term || in.index != c.Index) {
		if err := n.startIn(c); err != nil {
			return err
		}
		in = n.xfer.in
	}
	switch {
	case in == nil || in.from != c.From || in.seq != c.Seq:
		return fmt.Errorf("%w: chunk at %d of transfer %d from member %d: not under way", ErrChunkStale, c.Offset, c.Seq, c.From)
	case in.term != c.Term || in.index != c.Index:
		// One of the two is wrong: the transfer under way goes on.
		return fmt.Errorf("%w: chunk of transfer %d from member %d changed its snapshot (term %d index %d)", ErrChunkBad, c.Seq, c.From, c.Term, c.Index)
	case c.Offset != in.next:
		// A chunk after a lost one, or a resent one: the ack tells the
		// leader where this member stands.
		n.ackIn(in)
		return fmt.Errorf("%w: chunk at %d of transfer %d from member %d, which holds %d bytes", ErrChunkStale, c.Offset, c.Seq, c.From, in.next)
	case in.next+uint64(len(c.Data)) > uint64(n.cfg.Compaction.MaxSnapshotBytes):
		n.abandonIn()
		return fmt.Errorf("%w: a snapshot from member %d above the limit of %d bytes", ErrChunkBad, c.From, n.cfg.Compaction.MaxSnapshotBytes)
	}
	if _, err := in.file.Write(c.Data); err != nil {
		n.abandonIn()
		return fmt.Errorf("raftphb: stage a snapshot from member %d: %w", c.From, err)
	}
	in.next += uint64(len(c.Data))
	in.idle = 0
	n.xfer.stats.ChunksReceived++
	if !c.Last {
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
	n.xfer.in = &inTransfer{from: c.From, seq: c.Seq, term: c.Term, index: c.Index, file: f}
	return nil
}

func (n *Node) ackIn(in *inTransfer) {
	if n.cfg.SendChunk == nil {
		return // a member that cannot send chunks cannot ack them either
	}
	n.cfg.SendChunk(in.from, msg.RaftChunkAck{From: n.ID(), To: in.from, Seq: in.seq, Next: in.next})
}

// finishIn checks the staged transfer's MsgSnap, keeps its image in a
// file of its own (readyPath) and steps the message, its data a staged
// snapshot: the install reads the image from that file, record by record
// (installStaged), so it is never in memory whole. It tells the leader it
// has every byte first.
func (n *Node) finishIn(in *inTransfer) error {
	m, off, err := n.readHeader(in)
	_ = in.file.Close()
	if err == nil {
		if err = n.cfg.FS.Rename(n.stagingPath(), n.readyPath(in.index, off)); err != nil {
			err = fmt.Errorf("keep the staged image: %w", err)
		}
	}
	n.closeIn()
	if err != nil {
		n.xfer.stats.Abandoned++
		return fmt.Errorf("%w: transfer %d from member %d: %v", ErrChunkBad, in.seq, in.from, err)
	}
	n.xfer.stats.Received++
	n.ackIn(in)
	return n.Step(m)
}

// readHeader decodes the staged transfer's MsgSnap and returns it, its
// reference replaced by a staged snapshot, and the offset of the image
// that follows it.
func (n *Node) readHeader(in *inTransfer) (*raftpb.Message, int64, error) {
	head := make([]byte, min(in.next, binary.MaxVarintLen64))
	if _, err := in.file.ReadAt(head, 0); err != nil {
		return nil, 0, fmt.Errorf("read back: %w", err)
	}
	hl, k := binary.Uvarint(head)
	if k <= 0 || hl > in.next-uint64(k) {
		return nil, 0, errors.New("bad header length")
	}
	hdr := make([]byte, hl)
	if _, err := in.file.ReadAt(hdr, int64(k)); err != nil {
		return nil, 0, fmt.Errorf("read back: %w", err)
	}
	m := &raftpb.Message{}
	if err := proto.Unmarshal(hdr, m); err != nil {
		return nil, 0, err
	}
	if m.GetType() != raftpb.MsgSnap || m.GetFrom() != in.from || m.GetTo() != n.ID() || m.GetTerm() != in.term ||
		m.GetSnapshot().GetMetadata().GetIndex() != in.index {
		return nil, 0, fmt.Errorf("a %v from %d to %d at term %d, not the snapshot it announced", m.GetType(), m.GetFrom(), m.GetTo(), m.GetTerm())
	}
	next, store, err := raftphb.DecodeSnapshot(m.GetSnapshot().GetData())
	if err != nil || store != nil || raftphb.IsStagedSnapshot(m.GetSnapshot().GetData()) {
		return nil, 0, fmt.Errorf("the snapshot's data is not a reference (%v)", err)
	}
	m.Snapshot.Data = raftphb.EncodeStagedSnapshot(next)
	return m, int64(k) + int64(hl), nil
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

// removeStaging removes what a crash left of incoming transfers.
func removeStaging(n *Node) error {
	err := n.cfg.FS.Remove(n.stagingPath())
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("raftphb: remove a staged snapshot: %w", err)
	}
	return n.removeReady()
}
