package storage

import (
	"reflect"
	"testing"

	"github.com/aerie-mq/aerie/internal/eventlog"
	"github.com/aerie-mq/aerie/internal/msg"
	"github.com/aerie-mq/aerie/internal/tick"
	"github.com/aerie-mq/aerie/internal/vfs"
)

// TestAppendEncodedIsAppend: records appended as their encodings (as a
// replicated PHB member stores a committed batch) and records appended
// whole read back the same after a reopen, flushed but not yet synced
// ones included.
func TestAppendEncodedIsAppend(t *testing.T) {
	fsys := vfs.NewMem()
	s, _, _, err := Open(fsys, "/d/log", "/d/snap", eventlog.Options{SegmentBytes: 1 << 10})
	if err != nil {
		t.Fatal(err)
	}
	var want []msg.Record
	for i := range 40 {
		r := msg.Record{Pubend: "P1", Event: &msg.Event{Pubend: "P1", Tick: tick.Tick(10 + i), Topic: "t", Payload: []byte{byte(i)}}}
		if i%7 == 0 {
			r = msg.Record{Pubend: "P1", HWM: tick.Tick(100 + i)}
		}
		want = append(want, r)
		if i%2 == 0 {
			if _, err := s.Append([]msg.Record{r}); err != nil {
				t.Fatal(err)
			}
			continue
		}
		b, err := msg.EncodeRecord(nil, r)
		if err != nil {
			t.Fatal(err)
		}
		if first, err := s.AppendEncoded([][]byte{b}); err != nil || first != uint64(i) {
			t.Fatalf("AppendEncoded = %d, %v; want %d", first, err, i)
		}
		if i%5 == 0 {
			if err := s.Flush(); err != nil {
				t.Fatal(err)
			}
		}
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s, ld, _, err := Open(fsys, "/d/log", "/d/snap", eventlog.Options{SegmentBytes: 1 << 10})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	recs, err := s.Records()
	if err != nil {
		t.Fatal(err)
	}
	if ld.Next != uint64(len(want)) || len(recs) != len(want) {
		t.Fatalf("reopened store ends at %d with %d records, want %d", ld.Next, len(recs), len(want))
	}
	checkLoaded(t, ld, nil, recs)
	for i, r := range recs {
		b1, _ := msg.EncodeRecord(nil, r)
		b2, _ := msg.EncodeRecord(nil, want[i])
		if !reflect.DeepEqual(b1, b2) {
			t.Fatalf("record %d: %+v, want %+v", i, r, want[i])
		}
	}
}
