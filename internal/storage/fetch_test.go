package storage

import (
	"math/rand/v2"
	"testing"

	"github.com/aerie-mq/aerie/internal/eventlog"
	"github.com/aerie-mq/aerie/internal/msg"
	"github.com/aerie-mq/aerie/internal/retention"
	"github.com/aerie-mq/aerie/internal/tick"
	"github.com/aerie-mq/aerie/internal/vfs"
)

// TestFetchMatchesTheLog: events of three pubends interleaved in one log,
// small segments, retention cutting below the released ticks; every fetch
// of random tick ranges above the release point returns exactly the logged
// events of that pubend in those ranges, in order.
func TestFetchMatchesTheLog(t *testing.T) {
	fsys := vfs.NewMem()
	if err := fsys.MkdirAll("/d"); err != nil {
		t.Fatal(err)
	}
	l, _, err := eventlog.Open(fsys, "/d/log", eventlog.Options{SegmentBytes: 8 << 10})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	rng := rand.New(rand.NewPCG(1, 2))
	pubends := []msg.PubendID{"P1", "P2", "P3"}
	var tr retention.Tracker
	logged := map[msg.PubendID][]*msg.Event{}
	next := map[msg.PubendID]tick.Tick{}
	for i := 0; i < 3000; i++ {
		p := pubends[rng.IntN(len(pubends))]
		next[p] += tick.Tick(1 + rng.IntN(5))
		r := msg.Record{Pubend: p, Event: &msg.Event{Pubend: p, Tick: next[p], Topic: "t", Payload: []byte{byte(i)}}}
		if rng.IntN(10) == 0 {
			r = msg.Record{Pubend: p, HWM: next[p] + 100}
		}
		b, err := msg.EncodeRecord(nil, r)
		if err != nil {
			t.Fatal(err)
		}
		idx, err := l.Append(b)
		if err != nil {
			t.Fatal(err)
		}
		tr.Appended(idx, r)
		if r.Event != nil {
			logged[p] = append(logged[p], r.Event)
		}
	}
	if err := l.Sync(); err != nil {
		t.Fatal(err)
	}
	released := map[msg.PubendID]tick.Tick{}
	check := func(round int) {
		for k := 0; k < 50; k++ {
			p := pubends[rng.IntN(len(pubends))]
			lo := released[p] + 1 + tick.Tick(rng.IntN(int(next[p]-released[p])))
			hi := lo + tick.Tick(rng.IntN(200))
			ranges := []tick.Range{{Lo: lo, Hi: hi}, {Lo: hi + 50, Hi: hi + 60}}
			from := []uint64{tr.FetchStart(p, ranges[0].Lo), tr.FetchStart(p, ranges[1].Lo)}
			got, err := Fetch(l, p, ranges, from)
			if err != nil {
				t.Fatal(err)
			}
			var want []*msg.Event
			for _, ev := range logged[p] {
				for _, r := range ranges {
					if r.Lo <= ev.Tick && ev.Tick <= r.Hi {
						want = append(want, ev)
					}
				}
			}
			if len(got) != len(want) {
				t.Fatalf("round %d: fetch %s %v: %d events, want %d", round, p, ranges, len(got), len(want))
			}
			for i := range got {
				if !got[i].Equal(want[i]) {
					t.Fatalf("round %d: fetch %s %v: event %d is %v, want %v", round, p, ranges, i, got[i], want[i])
				}
			}
		}
	}
	check(0)
	// Release a growing prefix and cut the log below it, as Trim does.
	for round := 1; round <= 3; round++ {
		for _, p := range pubends {
			released[p] = next[p] * tick.Tick(round) / 4
		}
		cut := tr.Cut(l.NextIndex(), func(p msg.PubendID) tick.Tick { return released[p] })
		if err := l.TruncateFront(cut); err != nil {
			t.Fatal(err)
		}
		if l.FirstIndex() == 0 {
			t.Fatalf("round %d: nothing truncated; the test would not cover reads after a cut", round)
		}
		check(round)
	}
}
