package raftphb

import (
	"encoding/binary"
	"errors"
	"fmt"

	"github.com/aerie-mq/aerie/internal/msg"
)

// ErrBadBatch reports a Raft entry whose data is not a batch.
var ErrBadBatch = errors.New("raftphb: bad batch entry")

// Batch entry encoding (the Data of one Raft log entry; Raft's own log adds
// index and term, and internal/raftphb/raftlog adds length and CRC):
//
//	0x01 | first uvarint | n uvarint | (len uvarint | record)*n
//
// A record is msg.EncodeRecord's encoding, the same bytes the pubend's own
// event log stores. first is the index the batch's first record gets in the
// pubend's log: the leader stamps it when it proposes (its applied log's end
// plus what it proposed since), and every replica checks the stamp when it
// applies (see Replica.apply). Entries with empty Data are Raft's own (a new
// leader's first entry of its term) and carry no records.
const batchKind byte = 1

// encodeBatch appends the entry data of a batch of recs stamped first.
// Each record is encoded in place, behind room for its length (2 bytes:
// records of 128 B to 16 KiB, an event's usual size), and moved only when
// its length takes another number of bytes: one copy of every event's
// bytes, not two.
func encodeBatch(dst []byte, first uint64, recs []msg.Record) ([]byte, error) {
	dst = append(dst, batchKind)
	dst = binary.AppendUvarint(dst, first)
	dst = binary.AppendUvarint(dst, uint64(len(recs)))
	const room = 2
	for _, r := range recs {
		at := len(dst)
		var err error
		dst, err = msg.EncodeRecord(append(dst, make([]byte, room)...), r)
		if err != nil {
			return nil, fmt.Errorf("raftphb: encode %v: %w", r, err)
		}
		n := len(dst) - at - room
		var lb [binary.MaxVarintLen64]byte
		k := binary.PutUvarint(lb[:], uint64(n))
		if k != room {
			if k > room {
				dst = append(dst, make([]byte, k-room)...)
			}
			copy(dst[at+k:], dst[at+room:at+room+n])
			dst = dst[:at+k+n]
		}
		copy(dst[at:], lb[:k])
	}
	return dst, nil
}

// DecodeBatch decodes a batch entry's data: the pubend-log index stamped on
// its first record, and the records.
func DecodeBatch(b []byte) (first uint64, recs []msg.Record, err error) {
	first, raw, err := splitBatch(b)
	if err != nil {
		return 0, nil, err
	}
	recs, err = decodeRecords(raw)
	return first, recs, err
}

// splitBatch parses a batch entry's data down to its records' encodings
// (subslices of b), without decoding them: a member that only stores the
// records (every follower, P2S's replicas alike) needs no more.
func splitBatch(b []byte) (first uint64, raw [][]byte, err error) {
	if len(b) == 0 || b[0] != batchKind {
		return 0, nil, fmt.Errorf("%w: kind", ErrBadBatch)
	}
	b = b[1:]
	first, k := binary.Uvarint(b)
	if k <= 0 {
		return 0, nil, fmt.Errorf("%w: first index", ErrBadBatch)
	}
	raw, err = splitRecords(b[k:])
	if err != nil {
		return 0, nil, fmt.Errorf("%w: %w", ErrBadBatch, err)
	}
	return first, raw, nil
}

// splitRecords parses n uvarint | (len uvarint | record)*n, the records
// left encoded (subslices of b), nothing after them.
func splitRecords(b []byte) ([][]byte, error) {
	n, k := binary.Uvarint(b)
	if k <= 0 || n > uint64(len(b)) {
		return nil, errors.New("record count")
	}
	b = b[k:]
	raw := make([][]byte, 0, n)
	for i := uint64(0); i < n; i++ {
		l, k := binary.Uvarint(b)
		if k <= 0 || l == 0 || l > uint64(len(b)-k) {
			return nil, fmt.Errorf("record %d length", i)
		}
		raw = append(raw, b[k:k+int(l)])
		b = b[k+int(l):]
	}
	if len(b) != 0 {
		return nil, fmt.Errorf("%d trailing bytes", len(b))
	}
	return raw, nil
}

// decodeRecords decodes records' encodings (msg.EncodeRecord's).
func decodeRecords(raw [][]byte) ([]msg.Record, error) {
	recs := make([]msg.Record, 0, len(raw))
	for i, p := range raw {
		r, err := msg.DecodeRecord(p)
		if err != nil {
			return nil, fmt.Errorf("%w: record %d: %w", ErrBadBatch, i, err)
		}
		recs = append(recs, r)
	}
	return recs, nil
}
