package raftphb

import (
	"bytes"
	"slices"
	"testing"

	"github.com/aerie-mq/aerie/internal/msg"
)

// TestBatchRoundTrip: records whose lengths take 1, 2 and 3 bytes (a
// high-water mark, an event, a large event) come back as they went in.
func TestBatchRoundTrip(t *testing.T) {
	var recs []msg.Record
	for i, size := range []int{0, 100, 300, 20000, 5, 200000, 16300} {
		recs = append(recs, msg.Record{Pubend: "P1", Event: msg.NewEvent("P1", 0, "pub", uint64(i+1), "t", msg.Props{}, bytes.Repeat([]byte{byte(i)}, size))})
		recs = append(recs, msg.Record{Pubend: "P1", HWM: 7})
	}
	for n := 0; n <= len(recs); n++ {
		data, err := encodeBatch(nil, 42, recs[:n])
		if err != nil {
			t.Fatal(err)
		}
		first, raw, err := splitBatch(data)
		if err != nil || first != 42 || len(raw) != n {
			t.Fatalf("%d records: first %d, %d raw, %v", n, first, len(raw), err)
		}
		for i, r := range raw {
			want, err := msg.EncodeRecord(nil, recs[i])
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(r, want) {
				t.Fatalf("%d records: record %d differs", n, i)
			}
		}
	}
}

// TestProposeCopied: Propose reuses its encoding buffer for the next
// batch, which is safe only because etcd raft appends a copy of the
// entry it is given. Should a later etcd raft keep the proposer's slice,
// this test fails rather than the committed log.
func TestProposeCopied(t *testing.T) {
	h := failoverCell(t, 3)
	r := h.reps[1]
	if _, err := r.Propose([]msg.Record{{Pubend: "P1", HWM: 5}}); err != nil {
		t.Fatal(err)
	}
	clear(r.buf[:cap(r.buf)]) // what the next batch's encoding would do
	rd := r.Ready()
	defer r.Advance()
	var found bool
	for _, e := range rd.Entries {
		if _, recs, err := DecodeBatch(e.GetData()); err == nil && slices.Equal(recs, []msg.Record{{Pubend: "P1", HWM: 5}}) {
			found = true
		}
	}
	if !found {
		t.Fatalf("the proposed batch is not intact in the Ready's entries: %v", rd.Entries)
	}
}
