package storage

import (
	"fmt"
	"testing"

	"github.com/aerie-mq/aerie/internal/eventlog"
	"github.com/aerie-mq/aerie/internal/msg"
	"github.com/aerie-mq/aerie/internal/tick"
	"github.com/aerie-mq/aerie/internal/vfs"
)

// BenchmarkOpenSummarised: a restart (Open) of a log of one pubend's
// events from four publishers, 20-byte payloads, in 8 MiB segments: at
// least 1 M of them in sealed segments, taken from their summaries, and
// at most 256 in the last one, read whole (docs/RELIABILITY.md "Millions
// of events retained").
func BenchmarkOpenSummarised(b *testing.B) {
	const summarised = 1 << 20
	opts := eventlog.Options{SegmentBytes: 8 << 20}
	fsys := vfs.NewMem()
	s, _, _, err := Open(fsys, sumDir, sumSnap, opts)
	if err != nil {
		b.Fatal(err)
	}
	payload := make([]byte, 20)
	batch := make([]msg.Record, 0, 256)
	sealed := func() uint64 {
		segs := s.log.Segments()
		return segs[len(segs)-1].Base - segs[0].Base
	}
	events := 0
	for sealed() < summarised {
		for range cap(batch) {
			pub := fmt.Sprint("fill-", events%4)
			batch = append(batch, msg.Record{Pubend: "P1", Event: msg.NewEvent("P1", tick.Tick(1000+events*7), pub, uint64(1+events/4), "orders.eu", msg.Props{}, payload)})
			events++
		}
		if _, err := s.Append(batch); err != nil {
			b.Fatal(err)
		}
		if err := s.Sync(); err != nil {
			b.Fatal(err)
		}
		batch = batch[:0]
	}
	if err := s.Close(); err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	b.ResetTimer()
	for range b.N {
		s, ld, _, err := Open(fsys, sumDir, sumSnap, opts)
		if err != nil {
			b.Fatal(err)
		}
		if ld.Events["P1"].Len() != events || ld.Read != 1 {
			b.Fatalf("%d events, %d segments read", ld.Events["P1"].Len(), ld.Read)
		}
		b.StopTimer()
		s.Close()
		b.StartTimer()
	}
}
