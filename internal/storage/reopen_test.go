package storage

import (
	"errors"
	"math/rand/v2"
	"syscall"
	"testing"

	"github.com/aerie-mq/aerie/internal/eventlog"
	"github.com/aerie-mq/aerie/internal/msg"
	"github.com/aerie-mq/aerie/internal/tick"
	"github.com/aerie-mq/aerie/internal/vfs"
)

// TestReopenAfterDiskFull: batches fail on a full disk, the store is
// reopened once room returns and the failed batch appended again; after
// a power loss the store restarts (from its segment summaries) with every
// record of the batches that succeeded, each once, in order.
func TestReopenAfterDiskFull(t *testing.T) {
	opts := eventlog.Options{SegmentBytes: 1 << 10}
	fsys := vfs.NewMem()
	s, _, _, err := Open(fsys, "/d/log", "/d/snap", opts)
	if err != nil {
		t.Fatal(err)
	}
	ev := func(i int) msg.Record {
		return msg.Record{Pubend: "P1", Event: &msg.Event{Pubend: "P1", Tick: tick.Tick(10 + i), Topic: "t", Payload: make([]byte, 40+i%9)}}
	}
	var want []msg.Record
	batch := func(from, n int) ([]msg.Record, uint64, error) {
		var recs []msg.Record
		for i := from; i < from+n; i++ {
			recs = append(recs, ev(i))
		}
		first, err := s.Append(recs)
		if err == nil {
			err = s.Sync()
		}
		return recs, first, err
	}
	i := 0
	for round := range 6 {
		recs, _, err := batch(i, 7)
		if err != nil {
			t.Fatal(err)
		}
		want, i = append(want, recs...), i+7
		// A full disk: the next batch fails, and one more while still full.
		fsys.SetFull(syscall.ENOSPC)
		recs, first, err := batch(i, 7+round)
		if !errors.Is(err, syscall.ENOSPC) || !errors.Is(s.Failed(), eventlog.ErrFailed) {
			t.Fatalf("batch on a full disk: %v", err)
		}
		// Nacks are still answered meanwhile: the durable events read
		// back, and none of the failed batch.
		evs, err := s.Fetch("P1", []tick.Range{{Lo: 0, Hi: tick.Tick(1 << 40)}}, []uint64{0})
		if err != nil || len(evs) != len(want) {
			t.Fatalf("fetch from a failed store: %d events, %v; want %d", len(evs), err, len(want))
		}
		if round%2 == 1 {
			if err := s.Reopen(); err == nil {
				if _, _, err := batch(i, 1); !errors.Is(err, syscall.ENOSPC) {
					t.Fatalf("batch on a still full disk after Reopen: %v", err)
				}
			}
		}
		fsys.SetFull(nil)
		if err := s.Reopen(); err != nil {
			t.Fatalf("Reopen: %v", err)
		}
		if _, next := s.Bounds(); next != first {
			t.Fatalf("reopened store ends at %d, want %d (the failed batch's first)", next, first)
		}
		if f, err := s.Append(recs); err != nil || f != first {
			t.Fatalf("Append again: %d, %v", f, err)
		}
		if err := s.Sync(); err != nil {
			t.Fatal(err)
		}
		want, i = append(want, recs...), i+len(recs)
	}
	fsys.Crash(rand.New(rand.NewPCG(5, 6)))
	s, ld, _, err := Open(fsys, "/d/log", "/d/snap", opts)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if ld.Next != uint64(len(want)) || len(ld.Events) == 0 {
		t.Fatalf("after a power loss: next %d, want %d", ld.Next, len(want))
	}
	recs, err := s.Records()
	if err != nil {
		t.Fatal(err)
	}
	if len(recs) != len(want) {
		t.Fatalf("%d records, want %d", len(recs), len(want))
	}
	for k, r := range recs {
		if r.Event == nil || r.Event.Tick != want[k].Event.Tick {
			t.Fatalf("record %d: %+v, want tick %d", k, r, want[k].Event.Tick)
		}
	}
	checkLoaded(t, ld, nil, recs)
}

// TestCloseCutsFailedStore: a broker that stops after its store's fsync
// failed on a full disk closes the store, which cuts the records that
// fsync did not make durable (and the summaries of segments sealed on
// the way). A restart without a power loss must not find them: the page
// cache holds them, but a later power loss would take them back
// (vfs.MemFS.SetFull).
func TestCloseCutsFailedStore(t *testing.T) {
	opts := eventlog.Options{SegmentBytes: 1 << 10}
	fsys := vfs.NewMem()
	s, _, _, err := Open(fsys, "/d/log", "/d/snap", opts)
	if err != nil {
		t.Fatal(err)
	}
	ev := func(i int) msg.Record {
		return msg.Record{Pubend: "P1", Event: &msg.Event{Pubend: "P1", Tick: tick.Tick(10 + i), Topic: "t", Payload: make([]byte, 40)}}
	}
	var recs []msg.Record
	for i := range 30 {
		recs = append(recs, ev(i))
	}
	if _, err := s.Append(recs[:10]); err != nil {
		t.Fatal(err)
	}
	if err := s.Sync(); err != nil {
		t.Fatal(err)
	}
	// Written whole, rolling segments, before the disk filled: the fsync
	// fails, not the writes.
	if _, err := s.Append(recs[10:]); err != nil {
		t.Fatal(err)
	}
	if err := s.Flush(); err != nil {
		t.Fatal(err)
	}
	fsys.SetFull(syscall.ENOSPC)
	if err := s.Sync(); !errors.Is(err, syscall.ENOSPC) {
		t.Fatalf("sync on a full disk: %v", err)
	}
	if err := s.Close(); !errors.Is(err, eventlog.ErrFailed) {
		t.Fatalf("close of a failed store: %v, want its failure", err)
	}
	fsys.Kill()
	fsys.SetFull(nil)
	check := func(when string) {
		t.Helper()
		s, ld, _, err := Open(fsys, "/d/log", "/d/snap", opts)
		if err != nil {
			t.Fatalf("%s: %v", when, err)
		}
		if ld.Next != 10 {
			t.Fatalf("%s: the store ends at %d, want 10 (the last synced)", when, ld.Next)
		}
		s.Close()
	}
	check("restart")
	fsys.CrashWith(func(string) *rand.Rand { return rand.New(rand.NewPCG(5, 6)) })
	check("power loss")
}
