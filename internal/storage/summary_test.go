package storage

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"reflect"
	"strings"
	"testing"

	"github.com/aerie-mq/aerie/internal/eventlog"
	"github.com/aerie-mq/aerie/internal/msg"
	"github.com/aerie-mq/aerie/internal/retention"
	"github.com/aerie-mq/aerie/internal/tick"
	"github.com/aerie-mq/aerie/internal/vfs"
)

// checkLoaded checks what Open returned against the records it stands for
// (the snapshot's, then the log's, read whole): the records that are not
// events in order, then per pubend the publishers its events remember;
// the events as ticks and sizes.
func checkLoaded(t *testing.T, ld retention.Loaded, snap, logged []msg.Record) {
	t.Helper()
	want := append([]msg.Record(nil), snap...)
	events := map[msg.PubendID][]*msg.Event{}
	var order []msg.PubendID
	for _, r := range logged {
		if r.Event == nil {
			want = append(want, r)
			continue
		}
		if events[r.Pubend] == nil {
			order = append(order, r.Pubend)
		}
		events[r.Pubend] = append(events[r.Pubend], r.Event)
	}
	for _, p := range order {
		var m msg.PubendMeta
		var pubs []string
		by := map[string][]*msg.Event{}
		for _, ev := range events[p] {
			if by[ev.Publisher] == nil {
				pubs = append(pubs, ev.Publisher)
			}
			by[ev.Publisher] = append(by[ev.Publisher], ev)
		}
		for _, pub := range pubs {
			evs := by[pub]
			for _, ev := range evs[max(0, len(evs)-DedupKept):] {
				m.Dedup = append(m.Dedup, msg.DedupEntry{Publisher: pub, Seq: ev.Seq, Tick: ev.Tick})
			}
		}
		want = append(want, msg.Record{Pubend: p, Meta: &m})
	}
	if len(ld.Records) != len(want) {
		t.Fatalf("loaded %d records, want %d", len(ld.Records), len(want))
	}
	for i := range want {
		b1, _ := msg.EncodeRecord(nil, ld.Records[i])
		b2, _ := msg.EncodeRecord(nil, want[i])
		if !reflect.DeepEqual(b1, b2) {
			t.Fatalf("loaded record %d: %+v, want %+v", i, ld.Records[i], want[i])
		}
	}
	if len(ld.Events) != len(events) {
		t.Fatalf("loaded events of %d pubends, want %d", len(ld.Events), len(events))
	}
	for p, evs := range events {
		var got []string
		ld.Events[p].Each(0, func(x tick.Tick, w int64) bool {
			got = append(got, fmt.Sprint(x, "/", w))
			return true
		})
		var w []string
		for _, ev := range evs {
			w = append(w, fmt.Sprint(ev.Tick, "/", msg.EventSize(ev.Topic, ev.Props, ev.Payload)))
		}
		if !reflect.DeepEqual(got, w) {
			t.Fatalf("pubend %s: loaded %d events (%v…), want %d (%v…)", p, len(got), got[:min(3, len(got))], len(w), w[:min(3, len(w))])
		}
	}
}

// writeLog appends n random records of three pubends and two publishers
// each (some of them HWM, filter and durable records), half through
// Append and half through AppendEncoded, syncing now and then.
func writeLog(t *testing.T, s *Store, rng *rand.Rand, n int, ticks map[msg.PubendID]tick.Tick, seqs map[string]uint64) {
	t.Helper()
	for i := 0; i < n; i++ {
		p := msg.PubendID(fmt.Sprint("P", 1+rng.IntN(3)))
		ticks[p] += tick.Tick(1 + rng.IntN(3000))
		var r msg.Record
		switch rng.IntN(20) {
		case 0:
			r = msg.Record{Pubend: p, HWM: ticks[p] + 100}
		case 1:
			r = msg.Record{Durable: &msg.DurableSub{Name: "d", Pattern: ">", Released: msg.Token{p: ticks[p]}}}
		case 2:
			r = msg.Record{Pubend: p, Filter: &msg.FilterVersion{Down: "s1", From: ticks[p], All: true, Seq: uint64(i)}}
		default:
			pub := fmt.Sprint(p, "-pub", rng.IntN(2))
			seqs[pub]++
			r = msg.Record{Pubend: p, Event: msg.NewEvent(p, ticks[p], pub, seqs[pub], "orders.eu",
				msg.MustProps(map[string]any{"qty": rng.IntN(100)}), []byte(strings.Repeat("x", rng.IntN(300))))}
		}
		var err error
		if rng.IntN(2) == 0 {
			_, err = s.Append([]msg.Record{r})
		} else {
			b, _ := msg.EncodeRecord(nil, r)
			_, err = s.AppendEncoded([][]byte{b})
		}
		if err != nil {
			t.Fatal(err)
		}
		if rng.IntN(50) == 0 {
			if err := s.Sync(); err != nil {
				t.Fatal(err)
			}
		}
	}
	if err := s.Sync(); err != nil {
		t.Fatal(err)
	}
}

const (
	sumDir  = "/d/log"
	sumSnap = "/d/snap"
)

var sumOpts = eventlog.Options{SegmentBytes: 16 << 10}

// reopen closes s and opens the store again, checking what it loaded
// against the log read whole.
func reopen(t *testing.T, fsys vfs.FS, s *Store) (*Store, retention.Loaded) {
	t.Helper()
	if s != nil {
		if err := s.Close(); err != nil {
			t.Fatal(err)
		}
	}
	s, ld, _, err := Open(fsys, sumDir, sumSnap, sumOpts)
	if err != nil {
		t.Fatal(err)
	}
	recs, err := s.Records()
	if err != nil {
		t.Fatal(err)
	}
	snap, err := eventlog.ReadSnapshot(fsys, sumSnap)
	if err != nil {
		t.Fatal(err)
	}
	var snapRecs []msg.Record
	for _, p := range snap {
		r, _ := msg.DecodeRecord(p)
		snapRecs = append(snapRecs, r)
	}
	checkLoaded(t, ld, snapRecs, recs)
	return s, ld
}

// summaries returns the names of the summary files in the log's directory.
func summaries(t *testing.T, fsys vfs.FS) []string {
	t.Helper()
	names, err := fsys.ReadDir(sumDir)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, n := range names {
		if strings.HasSuffix(n, summarySuffix) {
			out = append(out, n)
		}
	}
	return out
}

// TestRestartReadsSummariesNotSegments: every sealed segment gets its
// summary, and a restart takes the sealed segments from them: a segment
// damaged after it was sealed is not even read (it would be refused),
// while the same damage without the summary is refused. Trimming removes
// the summaries of the segments it drops.
func TestRestartReadsSummariesNotSegments(t *testing.T) {
	fsys := vfs.NewMem()
	s, _ := reopen(t, fsys, nil)
	rng := rand.New(rand.NewPCG(3, 4))
	ticks, seqs := map[msg.PubendID]tick.Tick{}, map[string]uint64{}
	writeLog(t, s, rng, 3000, ticks, seqs)
	segs := s.log.Segments()
	if len(segs) < 8 || len(summaries(t, fsys)) != len(segs)-1 {
		t.Fatalf("%d segments, %d summaries: want one per sealed segment", len(segs), len(summaries(t, fsys)))
	}
	s, ld := reopen(t, fsys, s)
	if ld.Summarised != len(segs)-1 || ld.Read != 1 {
		t.Fatalf("restart took %d segments from summaries and read %d, want %d and 1", ld.Summarised, ld.Read, len(segs)-1)
	}
	// What it returns costs a few bytes an event, payloads left on disk.
	events, mem := 0, 24*ld.Tracker.Entries()
	for _, p := range ld.Events {
		events += p.Len()
		mem += p.Bytes()
	}
	if per := float64(mem) / float64(events); per > 6 {
		t.Fatalf("the restart's %d events take %d bytes, %.1f an event; want at most 6", events, mem, per)
	}
	// The same after a restart: the restarted store summarises too.
	writeLog(t, s, rng, 1000, ticks, seqs)
	s, _ = reopen(t, fsys, s)
	segs = s.log.Segments()
	if len(summaries(t, fsys)) != len(segs)-1 {
		t.Fatalf("%d segments, %d summaries after a restart", len(segs), len(summaries(t, fsys)))
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	// Damage a payload byte in the middle of the third segment.
	flip := func() {
		f, err := fsys.Open(segs[2].Path)
		if err != nil {
			t.Fatal(err)
		}
		b := make([]byte, 1)
		f.ReadAt(b, segs[2].Size/2)
		b[0] ^= 0xff
		f.Truncate(segs[2].Size / 2)
		f.Write(b)
		rest := make([]byte, segs[2].Size-segs[2].Size/2-1)
		f.Write(rest) // zeroes: damage enough
		f.Sync()
		f.Close()
	}
	flip()
	s, ld, _, err := Open(fsys, sumDir, sumSnap, sumOpts)
	if err != nil {
		t.Fatalf("restart read a sealed segment it has a summary of: %v", err)
	}
	if _, err := s.Records(); !errors.Is(err, eventlog.ErrCorrupt) {
		t.Fatalf("reading the damaged segment: %v, want ErrCorrupt", err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if err := fsys.Remove(summaryName(segs[2].Path)); err != nil {
		t.Fatal(err)
	}
	if _, _, _, err := Open(fsys, sumDir, sumSnap, sumOpts); !errors.Is(err, eventlog.ErrCorrupt) {
		t.Fatalf("restart without the summary of a damaged segment: %v, want ErrCorrupt", err)
	}
	_ = ld
}

// TestSummaryFaultsAreIgnored: a summary torn by a crash, one of another
// segment, one left from a log made again at the same indexes, or one
// whose bytes rotted, is not used: the restart reads the segment, loads
// the same, and writes the summary again.
func TestSummaryFaultsAreIgnored(t *testing.T) {
	for _, fault := range []string{"torn", "empty", "other", "stale", "flipped"} {
		t.Run(fault, func(t *testing.T) {
			fsys := vfs.NewMem()
			s, _ := reopen(t, fsys, nil)
			rng := rand.New(rand.NewPCG(5, 6))
			ticks, seqs := map[msg.PubendID]tick.Tick{}, map[string]uint64{}
			writeLog(t, s, rng, 2000, ticks, seqs)
			segs := s.log.Segments()
			if err := s.Close(); err != nil {
				t.Fatal(err)
			}
			name := summaryName(segs[1].Path)
			b, err := readSummary(fsys, segs[1].Path)
			if err != nil || b == nil {
				t.Fatalf("no summary of %s: %v", segs[1].Path, err)
			}
			switch fault {
			case "torn":
				b = b[:len(b)/2]
			case "empty":
				b = nil
			case "other":
				b, _ = readSummary(fsys, segs[2].Path)
			case "stale":
				// The log written again (a wiped directory) from other
				// records of the same sizes: the same segments, but for
				// their content.
				fs2 := vfs.NewMem()
				s2, _, _, err := Open(fs2, sumDir, sumSnap, sumOpts)
				if err != nil {
					t.Fatal(err)
				}
				writeLog(t, s2, rand.New(rand.NewPCG(5, 6)), 2000, map[msg.PubendID]tick.Tick{"P1": 1, "P2": 1, "P3": 1}, map[string]uint64{})
				other := s2.log.Segments()
				s2.Close()
				var ok bool
				for _, o := range other {
					if o.Base == segs[1].Base && o.Next == segs[1].Next && o.Size == segs[1].Size {
						b, _ = readSummary(fs2, o.Path)
						ok = true
					}
				}
				if !ok {
					t.Skip("no segment at the same index in the other log")
				}
			case "flipped":
				b[len(b)/2] ^= 1
			}
			f, err := fsys.Create(name)
			if err != nil {
				t.Fatal(err)
			}
			f.Write(b)
			f.Close()
			s, _ = reopen(t, fsys, nil)
			defer s.Close()
			again, _ := readSummary(fsys, segs[1].Path)
			id, err := idOf(s.log, s.log.Segments()[1])
			if err != nil || checkSummary(again, id) != nil {
				t.Fatalf("the summary was not written again: %v %v", err, checkSummary(again, id))
			}
		})
	}
}

// TestTrimRemovesSummaries: the summaries of the segments a trim drops go
// with them.
func TestTrimRemovesSummaries(t *testing.T) {
	fsys := vfs.NewMem()
	s, _ := reopen(t, fsys, nil)
	rng := rand.New(rand.NewPCG(9, 10))
	writeLog(t, s, rng, 2000, map[msg.PubendID]tick.Tick{}, map[string]uint64{})
	segs := s.log.Segments()
	first, _, err := s.Trim(segs[3].Base, nil)
	if err != nil || first != segs[3].Base {
		t.Fatalf("trim: first %d, %v; want %d", first, err, segs[3].Base)
	}
	if got := len(summaries(t, fsys)); got != len(segs)-4 {
		t.Fatalf("%d summaries after dropping 3 of %d segments", got, len(segs))
	}
	reopen(t, fsys, s)
}
