package zap_test

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/aerie-mq/aerie/internal/zap"
)

var start = time.Date(2026, 1, 1, 18, 0, 0, 0, time.UTC)

func gen(t testing.TB, boxes, pubs int, seed uint64) *zap.Generator {
	t.Helper()
	g, err := zap.NewGenerator(zap.Config{Boxes: boxes, Publishers: pubs, Channels: 60, Start: start}, rand.NewPCG(seed, 0))
	if err != nil {
		t.Fatal(err)
	}
	return g
}

func take(g *zap.Generator, n int) []zap.Published {
	out := make([]zap.Published, n)
	for i := range out {
		out[i] = g.Next()
	}
	return out
}

func TestEncodeParseRoundTrip(t *testing.T) {
	for _, p := range take(gen(t, 300, 3, 1), 5000) {
		b := p.Event.Encode()
		if len(b) > 60 {
			t.Fatalf("%q: %d bytes, P2S says typically less than 60", b, len(b))
		}
		e, err := zap.Parse(b)
		if err != nil {
			t.Fatal(err)
		}
		if e != p.Event {
			t.Fatalf("round trip of %q: got %+v, want %+v", b, e, p.Event)
		}
	}
	e, err := zap.Parse([]byte("2026-01-01,18:00:03.250,10.0.1.17,ch004,ch012"))
	if err != nil || e.Kind != zap.Change || e.To != "ch004" || e.From != "ch012" || e.Box != "10.0.1.17" ||
		!e.Time.Equal(start.Add(3250*time.Millisecond)) {
		t.Fatalf("parse: %+v, %v", e, err)
	}
}

func TestParseRejects(t *testing.T) {
	for _, s := range []string{
		"",
		"2026-01-01,18:00:03.250,10.0.1.17",
		"2026-01-01,18:00:03.250,10.0.1.17,ch1,ch2,ch3",
		"2026-13-01,18:00:03.250,10.0.1.17,on",
		"2026-01-01,18:00:03.250,,on",
		"2026-01-01,18:00:03.250,10.0.1.17,sleep",
		"2026-01-01,18:00:03.250,10.0.1.17,vol=101",
		"2026-01-01,18:00:03.250,10.0.1.17,-,ch2",
	} {
		if _, err := zap.Parse([]byte(s)); err == nil {
			t.Errorf("Parse(%q) accepted", s)
		}
	}
}

func TestGeneratorDeterministic(t *testing.T) {
	a, b, c := take(gen(t, 500, 4, 7), 20000), take(gen(t, 500, 4, 7), 20000), take(gen(t, 500, 4, 8), 20000)
	same := 0
	for i := range a {
		if a[i] != b[i] {
			t.Fatalf("event %d differs with the same seed: %+v vs %+v", i, a[i], b[i])
		}
		if a[i] == c[i] {
			same++
		}
	}
	if same > len(a)/10 {
		t.Fatalf("seeds 7 and 8 agree on %d of %d events", same, len(a))
	}
}

// TestGeneratorShape checks the model's rules on a long stream: each box
// goes to one publisher; its events are in time order; a change starts from
// the box's previously reported channel; a reported channel was kept at
// least the retention time; channel popularity follows the Zipf law; dwell
// times are heavy-tailed.
func TestGeneratorShape(t *testing.T) {
	const boxes, pubs = 2000, 3
	type boxSeen struct {
		pub      int
		last     time.Time
		lastCh   string
		lastTune time.Time
		seen     bool
	}
	seen := map[string]*boxSeen{}
	to := map[string]int{}
	var gaps []time.Duration
	status := map[string]int{}
	for i, p := range take(gen(t, boxes, pubs, 3), 150000) {
		e := p.Event
		b := seen[e.Box]
		if b == nil {
			b = &boxSeen{pub: p.Publisher, lastCh: zap.NoChannel}
			seen[e.Box] = b
			var x, y, z int
			fmt.Sscanf(e.Box, "10.%d.%d.%d", &x, &y, &z)
			if idx := x<<16 | y<<8 | z; idx%pubs != p.Publisher {
				t.Fatalf("box %s (index %d) published by %d, want %d", e.Box, idx, p.Publisher, idx%pubs)
			}
		}
		if b.pub != p.Publisher {
			t.Fatalf("event %d: box %s moved from publisher %d to %d", i, e.Box, b.pub, p.Publisher)
		}
		if b.seen && e.Time.Before(b.last) {
			t.Fatalf("event %d: box %s goes back in time: %v after %v", i, e.Box, e.Time, b.last)
		}
		b.last, b.seen = e.Time, true
		if e.Kind == zap.Status {
			status[strings.SplitN(e.Status, "=", 2)[0]]++
			continue
		}
		if e.From != b.lastCh {
			t.Fatalf("event %d: box %s changes from %s, but was last reported on %s", i, e.Box, e.From, b.lastCh)
		}
		if e.To == e.From {
			t.Fatalf("event %d: a change from %s to itself", i, e.To)
		}
		if b.lastCh != zap.NoChannel {
			gap := e.Time.Sub(b.lastTune)
			if gap < zap.Retention {
				t.Fatalf("event %d: box %s reported %s after %v on %s, below the retention time", i, e.Box, e.To, gap, b.lastCh)
			}
			gaps = append(gaps, gap)
		}
		b.lastCh, b.lastTune = e.To, e.Time
		to[e.To]++
	}
	if len(seen) != boxes {
		t.Fatalf("%d of %d boxes sent events", len(seen), boxes)
	}
	// Zipf: the most popular channel is reached far more often than one in the tail.
	if to["ch000"] < 5*to["ch050"] {
		t.Fatalf("changes to ch000: %d, to ch050: %d: popularity is not skewed", to["ch000"], to["ch050"])
	}
	// Heavy tail: the mean time between reported changes is well above the median.
	var sum time.Duration
	for _, g := range gaps {
		sum += g
	}
	mean := sum / time.Duration(len(gaps))
	med := median(gaps)
	if mean < 2*med {
		t.Fatalf("time between reported changes: mean %v, median %v: not heavy-tailed", mean, med)
	}
	for _, k := range []string{zap.PowerOn, zap.PowerOff, zap.Mute, zap.Unmute, "vol"} {
		if status[k] == 0 {
			t.Fatalf("no %s status in the stream: %v", k, status)
		}
	}
	t.Logf("%d changes; between a box's changes: median %v, mean %v; statuses %v", len(gaps), med, mean, status)
}

func median(ds []time.Duration) time.Duration {
	c := slices.Clone(ds)
	slices.Sort(c)
	return c[len(c)/2]
}

func TestNewGeneratorRejects(t *testing.T) {
	for _, c := range []zap.Config{{Boxes: 0, Publishers: 1, Channels: 10}, {Boxes: 5, Publishers: 6, Channels: 10},
		{Boxes: 5, Publishers: 0, Channels: 10}, {Boxes: 5, Publishers: 1, Channels: 1}} {
		if _, err := zap.NewGenerator(c, rand.NewPCG(1, 0)); err == nil {
			t.Errorf("%+v accepted", c)
		}
	}
}

func ev(box, s string) zap.Event {
	if to, from, ok := strings.Cut(s, "<"); ok {
		return zap.Event{Kind: zap.Change, Time: start, Box: box, To: to, From: from}
	}
	return zap.Event{Kind: zap.Status, Time: start, Box: box, Status: s}
}

func TestStateCountsViewers(t *testing.T) {
	s := zap.NewState()
	check := func(step string, want map[string]int) {
		t.Helper()
		for _, ch := range []string{"a", "b", "c"} {
			if got := s.NumViewers(ch); got != want[ch] {
				t.Fatalf("after %s: %s has %d viewers, want %d", step, ch, got, want[ch])
			}
		}
	}
	s.Apply(ev("x", zap.PowerOn)) // channel not known yet: not counted
	check("on, channel unknown", nil)
	s.Apply(ev("x", "a<-"))
	s.Apply(ev("y", "a<-"))
	check("two on a", map[string]int{"a": 2})
	s.Apply(ev("x", "b<a"))
	check("x to b", map[string]int{"a": 1, "b": 1})
	s.Apply(ev("x", zap.PowerOff))
	s.Apply(ev("x", zap.PowerOff))
	check("x off (twice)", map[string]int{"a": 1})
	s.Apply(ev("x", zap.Volume(30)))
	s.Apply(ev("x", zap.PowerOn))
	s.Apply(ev("x", zap.PowerOn))
	check("x on again (twice): back on b", map[string]int{"a": 1, "b": 1})
	s.Apply(ev("y", zap.PowerOff))
	s.Apply(ev("y", "c<a")) // a change turns a box on
	check("y changes while off", map[string]int{"b": 1, "c": 1})
	if s.Events != 11 || s.Changes != 4 || s.Statuses != 7 {
		t.Fatalf("counters: %+v", *s)
	}
	if err := s.ApplyPayload([]byte("garbage")); err == nil || s.Malformed != 1 || s.Events != 12 {
		t.Fatalf("a malformed payload: err %v, counters %+v", err, *s)
	}
	if seen, watching := s.Boxes(); seen != 2 || watching != 2 {
		t.Fatalf("boxes: %d seen, %d watching", seen, watching)
	}
}

func TestTopListOrderAndTies(t *testing.T) {
	s := zap.NewState()
	for i, ch := range []string{"d", "b", "b", "c", "a", "c", "e", "e", "e"} {
		s.Apply(ev(fmt.Sprint(i), ch+"<-"))
	}
	got := fmt.Sprint(s.TopList(0))
	if want := "[{e 3} {b 2} {c 2} {a 1} {d 1}]"; got != want {
		t.Fatalf("TopList(0) = %s, want %s", got, want)
	}
	if got := fmt.Sprint(s.TopList(3)); got != "[{e 3} {b 2} {c 2}]" {
		t.Fatalf("TopList(3) = %s", got)
	}
	if got := len(s.TopList(10)); got != 5 {
		t.Fatalf("TopList(10) has %d entries", got)
	}
}

// TestSnapshotRestoreResumes: applying a prefix, marshalling, restoring and
// applying the rest gives exactly the state of applying everything, at
// every cut; the token travels with the state.
func TestSnapshotRestoreResumes(t *testing.T) {
	stream := take(gen(t, 400, 2, 11), 6000)
	all := zap.NewState()
	for _, p := range stream {
		if err := all.ApplyPayload(p.Event.Encode()); err != nil {
			t.Fatal(err)
		}
	}
	want := all.Marshal("P1:9")
	for _, cut := range []int{0, 1, 777, 3000, 5999, 6000} {
		s := zap.NewState()
		for _, p := range stream[:cut] {
			s.ApplyPayload(p.Event.Encode())
		}
		tok := fmt.Sprintf("P1:%d,P2:%d", cut, cut+1)
		r, gotTok, err := zap.Unmarshal(s.Marshal(tok))
		if err != nil {
			t.Fatalf("cut %d: %v", cut, err)
		}
		if gotTok != tok {
			t.Fatalf("cut %d: token %q, want %q", cut, gotTok, tok)
		}
		if !bytes.Equal(r.Marshal(tok), s.Marshal(tok)) {
			t.Fatalf("cut %d: restored state differs", cut)
		}
		for _, p := range stream[cut:] {
			r.ApplyPayload(p.Event.Encode())
		}
		if got := r.Marshal("P1:9"); !bytes.Equal(got, want) {
			t.Fatalf("cut %d: restored and resumed state differs from applying all", cut)
		}
		if fmt.Sprint(r.TopList(0)) != fmt.Sprint(all.TopList(0)) {
			t.Fatalf("cut %d: top lists differ", cut)
		}
	}
	// A redelivered event (resuming from an older token) would count twice:
	// the restore is exact only with the token saved with the state.
	dup := zap.NewState()
	for _, p := range append(stream[:10:10], stream...) {
		dup.ApplyPayload(p.Event.Encode())
	}
	if bytes.Equal(dup.Marshal("P1:9"), want) {
		t.Fatal("applying ten events twice left the same state: the check cannot fail")
	}
}

// TestInterleavingDoesNotMatter: each box is sent by one publisher, so any
// interleaving of the publishers' streams (the subscriber's order across
// pubends) gives the same state.
func TestInterleavingDoesNotMatter(t *testing.T) {
	stream := take(gen(t, 300, 3, 5), 5000)
	inOrder := zap.NewState()
	per := make([][]zap.Event, 3)
	for _, p := range stream {
		inOrder.Apply(p.Event)
		per[p.Publisher] = append(per[p.Publisher], p.Event)
	}
	byPub := zap.NewState()
	for _, evs := range [][]zap.Event{per[2], per[0], per[1]} {
		for _, e := range evs {
			byPub.Apply(e)
		}
	}
	if !bytes.Equal(inOrder.Marshal(""), byPub.Marshal("")) {
		t.Fatal("publisher interleaving changed the state")
	}
}

func TestUnmarshalRejects(t *testing.T) {
	s := zap.NewState()
	s.Apply(ev("10.0.0.1", "a<-"))
	s.Apply(ev("10.0.0.2", "b<-"))
	good := string(s.Marshal("P1:5"))
	for name, bad := range map[string]string{
		"empty":       "",
		"header":      strings.Replace(good, "state 1", "state 9", 1),
		"truncated":   good[:strings.Index(good, "end")],
		"count":       strings.Replace(good, "end 2", "end 3", 1),
		"box line":    strings.Replace(good, " on\n", " maybe\n", 1),
		"duplicate":   strings.Replace(good, "10.0.0.2", "10.0.0.1", 1),
		"after end":   good + "box 10.0.0.3 a on\n",
		"counts line": strings.Replace(good, "events=", "evts=", 1),
	} {
		if _, _, err := zap.Unmarshal([]byte(bad)); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
	if _, tok, err := zap.Unmarshal([]byte(good)); err != nil || tok != "P1:5" {
		t.Fatalf("good snapshot: %q, %v", tok, err)
	}
}

func BenchmarkMarshal180k(b *testing.B) {
	g := gen(b, 180000, 1, 1)
	s := zap.NewState()
	for range 400000 {
		s.Apply(g.Next().Event)
	}
	b.ResetTimer()
	for range b.N {
		s.Marshal("P1:1")
	}
}
