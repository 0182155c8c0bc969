package storage

import (
	"encoding/binary"
	"fmt"
	"hash/crc32"
	"math/rand/v2"
	"testing"

	"github.com/aerie-mq/aerie/internal/msg"
	"github.com/aerie-mq/aerie/internal/retention"
	"github.com/aerie-mq/aerie/internal/tick"
	"github.com/aerie-mq/aerie/internal/vfs"
)

// TestSummaryRunsAcrossSegments: a publisher with more than DedupKept
// events over many segments, one that stopped in the first segments, and
// a summary missing in the middle (that segment read whole between
// summaries): the restart remembers each publisher's latest DedupKept
// events (checkLoaded), and the tracker's index finds every event from
// where it says to read.
func TestSummaryRunsAcrossSegments(t *testing.T) {
	fsys := vfs.NewMem()
	s, _ := reopen(t, fsys, nil)
	rng := rand.New(rand.NewPCG(11, 12))
	var tk tick.Tick
	seqs := map[string]uint64{}
	for i := range 2 * DedupKept {
		pub := "busy"
		if i < 300 && i%3 == 0 {
			pub = "early"
		}
		p := msg.PubendID(fmt.Sprint("P", 1+rng.IntN(2)))
		tk += tick.Tick(1 + rng.IntN(1000))
		seqs[pub]++
		r := msg.Record{Pubend: p, Event: msg.NewEvent(p, tk, pub, seqs[pub], "t", msg.Props{}, make([]byte, rng.IntN(200)))}
		if i%500 == 0 {
			r = msg.Record{Pubend: p, HWM: tk}
		}
		if _, err := s.Append([]msg.Record{r}); err != nil {
			t.Fatal(err)
		}
		if i%100 == 0 {
			if err := s.Sync(); err != nil {
				t.Fatal(err)
			}
		}
	}
	if err := s.Sync(); err != nil {
		t.Fatal(err)
	}
	segs := s.log.Segments()
	if len(segs) < 20 {
		t.Fatalf("%d segments, want many", len(segs))
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if err := fsys.Remove(summaryName(segs[len(segs)/2].Path)); err != nil {
		t.Fatal(err)
	}
	s, ld := reopen(t, fsys, nil)
	defer s.Close()
	if ld.Summarised != len(segs)-2 || ld.Read != 2 {
		t.Fatalf("restart took %d segments from summaries and read %d, want %d and 2", ld.Summarised, ld.Read, len(segs)-2)
	}
	recs, err := s.Records()
	if err != nil {
		t.Fatal(err)
	}
	for i, r := range recs {
		if r.Event == nil {
			continue
		}
		for _, lo := range []tick.Tick{r.Event.Tick, r.Event.Tick - 1} {
			if from := ld.Tracker.FetchStart(r.Pubend, lo); from > ld.First+uint64(i) {
				t.Fatalf("pubend %s from tick %d: read from log index %d, past the event's %d", r.Pubend, lo, from, ld.First+uint64(i))
			}
		}
	}
	if per := float64(len(recs)) / float64(ld.Tracker.Entries()); per < retention.IndexEvery/2 {
		t.Fatalf("%d index entries for %d records: one per %.0f", ld.Tracker.Entries(), len(recs), per)
	}
}

// TestSummaryOfAnOlderFormat: a summary of the first format, whole and
// checked, does not hold: its segment is read and its summary written
// again.
func TestSummaryOfAnOlderFormat(t *testing.T) {
	fsys := vfs.NewMem()
	s, _ := reopen(t, fsys, nil)
	writeLog(t, s, rand.New(rand.NewPCG(1, 2)), 1000, map[msg.PubendID]tick.Tick{}, map[string]uint64{})
	segs := s.log.Segments()
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	b, _ := readSummary(fsys, segs[0].Path)
	old := append([]byte("aerie-sum-1\n"), b[len(summaryMagic):len(b)-4]...)
	old = binary.LittleEndian.AppendUint32(old, crc32.Checksum(old, summaryCRC))
	f, err := fsys.Create(summaryName(segs[0].Path))
	if err != nil {
		t.Fatal(err)
	}
	f.Write(old)
	f.Close()
	s, ld := reopen(t, fsys, nil)
	defer s.Close()
	if ld.Read != 2 {
		t.Fatalf("read %d segments whole, want 2", ld.Read)
	}
	if again, _ := readSummary(fsys, segs[0].Path); string(again[:len(summaryMagic)]) != summaryMagic {
		t.Fatalf("the summary was not written again")
	}
}

// FuzzDecodeSummary: whatever a summary holds past its header and
// checksum, reading and taking it neither panics nor runs away: it is
// taken or refused.
func FuzzDecodeSummary(f *testing.F) {
	id := summaryID{base: 10, next: 30, size: 1000, frameLen: 20, frameCRC: 7}
	var entries []sumEntry
	for i := range 20 {
		if i%7 == 3 {
			raw, _ := msg.EncodeRecord(nil, msg.Record{Pubend: "P1", HWM: tick.Tick(i)})
			entries = append(entries, sumEntry{raw: raw})
			continue
		}
		entries = append(entries, sumEntry{pubend: msg.PubendID(fmt.Sprint("P", i%2)), t: tick.Tick(100 + i), size: int64(i), publisher: fmt.Sprint("w", i%3), seq: uint64(i)})
	}
	good, err := encodeSummary(id, entries)
	if err != nil {
		f.Fatal(err)
	}
	head := len(summaryMagic)
	for range 6 {
		_, k := binary.Uvarint(good[head:])
		head += k
	}
	f.Add(good[head : len(good)-4])
	f.Fuzz(func(t *testing.T, body []byte) {
		b := append([]byte(nil), good[:head]...)
		b = append(b, body...)
		b = binary.LittleEndian.AppendUint32(b, crc32.Checksum(b, summaryCRC))
		sum, err := decodeSummary(b, id)
		if err != nil {
			return
		}
		var ld retention.Loaded
		a := loader{ld: &ld, dedup: map[msg.PubendID]*dedupLog{}, pending: map[*dedupRing][]sumPair{}}
		if err := a.take(sum, "fuzz"); err != nil {
			return
		}
		_ = a.finish()
		for _, p := range ld.Events {
			n := 0
			p.Each(0, func(tick.Tick, int64) bool { n++; return n < 1000 })
		}
	})
}
