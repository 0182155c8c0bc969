package broker

import (
	"go.etcd.io/raft/v3/raftpb"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
)

// appendCache encodes Raft messages for the links to a cell's members. A
// leader sends the same entries to every follower (an append per follower,
// with the same entries and its own header), so the entries of the last
// append are encoded once and reused for the next follower's: each append
// still leaves in a frame of its own, but the entries' wire encoding (a
// copy of every event, and its sizing) is made once per append, not once
// per follower.
type appendCache struct {
	// first and last are the entries of the append encoded in enc, and n
	// their count. A Raft log's entry at an index is one object until
	// the log is truncated there, which replaces every entry after it
	// too; the cache holds first and last, so their addresses are not
	// reused: the same first, last and count are the same entries.
	first, last *raftpb.Entry
	n           int
	enc         []byte
}

// entriesField is raftpb.Message's field number of Entries.
const entriesField protowire.Number = 7

// marshal returns m's wire encoding. The encoding of an append carries its
// entries after the other fields, which protobuf allows (a parser takes
// fields in any order, and a repeated field's values in the order they
// come): it decodes to the same message as proto.Marshal's.
func (c *appendCache) marshal(m *raftpb.Message) ([]byte, error) {
	ents := m.GetEntries()
	if m.GetType() != raftpb.MessageType_MsgApp || len(ents) == 0 {
		return proto.Marshal(m)
	}
	if len(ents) != c.n || ents[0] != c.first || ents[len(ents)-1] != c.last {
		c.first, c.last, c.n = nil, nil, 0
		enc := c.enc[:0]
		for _, e := range ents {
			enc = protowire.AppendTag(enc, entriesField, protowire.BytesType)
			enc = protowire.AppendVarint(enc, uint64(proto.Size(e)))
			var err error
			if enc, err = (proto.MarshalOptions{UseCachedSize: true}).MarshalAppend(enc, e); err != nil {
				return nil, err
			}
		}
		c.first, c.last, c.n, c.enc = ents[0], ents[len(ents)-1], len(ents), enc
	}
	// The header alone (every field but the entries, the message itself
	// untouched), then the entries: one buffer of the frame's size.
	hdr := &raftpb.Message{}
	h := hdr.ProtoReflect()
	m.ProtoReflect().Range(func(fd protoreflect.FieldDescriptor, v protoreflect.Value) bool {
		if fd.Number() != entriesField {
			h.Set(fd, v)
		}
		return true
	})
	size := proto.Size(hdr)
	data, err := (proto.MarshalOptions{UseCachedSize: true}).MarshalAppend(make([]byte, 0, size+len(c.enc)), hdr)
	if err != nil {
		return nil, err
	}
	return append(data, c.enc...), nil
}
