package raftphb

import (
	"encoding/binary"
	"errors"
	"fmt"

	"github.com/aerie-mq/aerie/internal/msg"
)

// Trim entries: the leader's retention, replicated. A member's pubend store
// is trimmed by the release protocol (internal/retention): the serving
// leader's engine learns from its downstreams what every subscriber has
// released and drops the log below that, after a snapshot of what it
// summarises. Followers hear nothing from downstream, so before trim
// entries their stores kept every event ever published. The leader now
// proposes each trim it made as an entry; every member that applies it
// trims its own store at the same pubend-log index with the same
// snapshot. The records below the cut are the same at every member (the
// batch stamps), so the snapshot means the same there, and the entry
// follows in the Raft log every batch it summarises.
//
//	0x02 | cut uvarint | n uvarint | (len uvarint | record)*n
//
// A replayed trim entry (a restart replays the Raft log from its
// snapshot) finds its segments gone and does nothing
// (storage.Store.TrimEncoded).
const trimKind byte = 2

// Trim is a committed trim entry: drop the pubend log below Cut after
// writing Snapshot (msg.EncodeRecord's encodings, in the entry's memory)
// as the store's snapshot.
type Trim struct {
	Index    uint64 // the Raft entry's
	Cut      uint64
	Snapshot [][]byte
}

// ProposeTrim proposes the trim the serving leader just made of its own
// store: cut and the snapshot it wrote, for every member to make the same.
// It does not touch the batches' stamps: a trim adds no record.
func (r *Replica) ProposeTrim(cut uint64, snap []msg.Record) error {
	if !r.serving {
		return ErrNotServing
	}
	data, err := encodeTrim(nil, cut, snap)
	if err != nil {
		return err
	}
	if err := r.rn.Propose(data); err != nil {
		return fmt.Errorf("raftphb: propose trim: %w", err)
	}
	return nil
}

func encodeTrim(dst []byte, cut uint64, recs []msg.Record) ([]byte, error) {
	dst = append(dst, trimKind)
	dst = binary.AppendUvarint(dst, cut)
	dst = binary.AppendUvarint(dst, uint64(len(recs)))
	var one []byte
	for _, r := range recs {
		var err error
		if one, err = msg.EncodeRecord(one[:0], r); err != nil {
			return nil, fmt.Errorf("raftphb: encode trim snapshot %v: %w", r, err)
		}
		dst = binary.AppendUvarint(dst, uint64(len(one)))
		dst = append(dst, one...)
	}
	return dst, nil
}

// ErrBadTrim reports a trim entry that does not parse.
var ErrBadTrim = errors.New("raftphb: bad trim entry")

// splitTrim parses a trim entry's data; the snapshot's records stay
// encoded (subslices of b).
func splitTrim(b []byte) (cut uint64, raw [][]byte, err error) {
	if len(b) == 0 || b[0] != trimKind {
		return 0, nil, fmt.Errorf("%w: kind", ErrBadTrim)
	}
	b = b[1:]
	cut, k := binary.Uvarint(b)
	if k <= 0 {
		return 0, nil, fmt.Errorf("%w: cut", ErrBadTrim)
	}
	raw, err = splitRecords(b[k:])
	if err != nil {
		return 0, nil, fmt.Errorf("%w: %w", ErrBadTrim, err)
	}
	return cut, raw, nil
}

// isTrim reports whether an entry's data is a trim entry.
func isTrim(data []byte) bool { return len(data) > 0 && data[0] == trimKind }
