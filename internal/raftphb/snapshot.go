package raftphb

import (
	"encoding/binary"
	"fmt"
)

// Snapshot data (the Data of a raftpb.Snapshot). A member compacts its
// Raft log only below what its pubend store holds durably, so the store
// is the state machine's snapshot and the Raft snapshot refers to it:
//
//	reference: 0x02 | next uvarint
//	transfer:  0x03 | next uvarint | store
//	staged:    0x04 | next uvarint
//
// next is the pubend log's next index after the snapshot's Raft index
// (the stamp the following batch carries). A reference is what a member
// keeps in its Raft log and MemoryStorage; a transfer is the reference
// with the sender's store appended (internal/raftphb/node encodes it),
// built when a leader sends MsgSnap to a member that needs compacted
// entries. A staged snapshot is a transfer whose store the receiving
// member holds in a file of its own (it came in chunks, node's
// transfer_in.go): it never leaves the member, and is installed from the
// file.
const (
	snapRef      byte = 2
	snapTransfer byte = 3
	snapStaged   byte = 4
)

// EncodeStagedSnapshot returns the data of a staged snapshot.
func EncodeStagedSnapshot(next uint64) []byte {
	return binary.AppendUvarint([]byte{snapStaged}, next)
}

// IsStagedSnapshot reports whether b is a staged snapshot's data.
func IsStagedSnapshot(b []byte) bool { return len(b) > 0 && b[0] == snapStaged }

// EncodeSnapshot returns snapshot data for a pubend log whose next index
// is next: a reference when store is nil, else a transfer carrying it.
func EncodeSnapshot(next uint64, store []byte) []byte {
	kind := snapRef
	if store != nil {
		kind = snapTransfer
	}
	b := binary.AppendUvarint([]byte{kind}, next)
	return append(b, store...)
}

// DecodeSnapshot decodes snapshot data: the pubend log's next index and,
// for a transfer, the store it carries (nil for a reference or a staged
// snapshot).
func DecodeSnapshot(b []byte) (next uint64, store []byte, err error) {
	if len(b) == 0 || (b[0] != snapRef && b[0] != snapTransfer && b[0] != snapStaged) {
		return 0, nil, fmt.Errorf("raftphb: snapshot data: bad kind")
	}
	next, k := binary.Uvarint(b[1:])
	if k <= 0 {
		return 0, nil, fmt.Errorf("raftphb: snapshot data: bad next index")
	}
	if b[0] != snapTransfer {
		if len(b) != 1+k {
			return 0, nil, fmt.Errorf("raftphb: snapshot data: %d trailing bytes", len(b)-1-k)
		}
		return next, nil, nil
	}
	return next, b[1+k:], nil
}
