package broker

import (
	"testing"

	"go.etcd.io/raft/v3/raftpb"
	"google.golang.org/protobuf/proto"
)

// TestAppendCacheMarshal: appends encoded with their entries cached decode
// to the messages they were made from, for each follower, after the
// entries change, and for messages that carry none.
func TestAppendCacheMarshal(t *testing.T) {
	ent := func(i uint64, data string) *raftpb.Entry {
		return &raftpb.Entry{Term: proto.Uint64(2), Index: proto.Uint64(i), Type: raftpb.EntryType_EntryNormal.Enum(), Data: []byte(data)}
	}
	a, b, c := ent(5, "a batch"), ent(6, ""), ent(7, string(make([]byte, 70000)))
	app := func(to uint64, ents ...*raftpb.Entry) *raftpb.Message {
		return &raftpb.Message{Type: raftpb.MessageType_MsgApp.Enum(), To: proto.Uint64(to), From: proto.Uint64(1),
			Term: proto.Uint64(2), LogTerm: proto.Uint64(2), Index: proto.Uint64(4), Commit: proto.Uint64(3 + to), Entries: ents}
	}
	msgs := []*raftpb.Message{
		app(2, a, b, c), app(3, a, b, c), app(2, a, b), app(3, a, b), app(2, c), app(3),
		{Type: raftpb.MessageType_MsgHeartbeat.Enum(), To: proto.Uint64(2), From: proto.Uint64(1), Term: proto.Uint64(2), Commit: proto.Uint64(7)},
		{Type: raftpb.MessageType_MsgAppResp.Enum(), To: proto.Uint64(1), From: proto.Uint64(2), Term: proto.Uint64(2), Index: proto.Uint64(7), Reject: proto.Bool(true), RejectHint: proto.Uint64(5)},
	}
	var cache appendCache
	for i, m := range msgs {
		before := proto.Clone(m)
		data, err := cache.marshal(m)
		if err != nil {
			t.Fatal(err)
		}
		if !proto.Equal(m, before) {
			t.Fatalf("message %d changed by its encoding", i)
		}
		got := &raftpb.Message{}
		if err := proto.Unmarshal(data, got); err != nil {
			t.Fatalf("message %d: %v", i, err)
		}
		if !proto.Equal(got, m) {
			t.Fatalf("message %d: decoded %v, sent %v", i, got, m)
		}
		if want, _ := proto.Marshal(m); len(want) != len(data) {
			t.Fatalf("message %d: %d bytes, proto.Marshal %d", i, len(data), len(want))
		}
	}
}
