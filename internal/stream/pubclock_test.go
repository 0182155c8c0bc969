package stream

import (
	"testing"
	"time"

	"github.com/aerie-mq/aerie/internal/msg"
	"github.com/aerie-mq/aerie/internal/tick"
)

func msAt(v int64) tick.Time { return tick.Time(v * int64(time.Millisecond)) }

// TestPubClockWindowedMinimum: the estimate is the smallest offset of the
// last PubClockWindow. A path whose delay grows (a queue filling) does not
// move it, so the present it gives runs ahead of what arrives; an offset
// smaller than the minimum replaces it at once; and once the minimum's
// sample is older than the window, the estimate moves up to the best of
// the later samples, so a clock that stepped skews it for a window at most.
func TestPubClockWindowedMinimum(t *testing.T) {
	var c PubClock
	if _, ok := c.Present(msAt(0), 0); ok {
		t.Fatal("an estimate before any sample")
	}
	const pub = -1_000_000 // the pubend's clock runs 1 000 000 ms ahead of ours
	sample := func(local, delay int64) { c.Sample(msAt(local), tick.FromMillis(local-pub-delay)) }
	off := func() int64 { o, _ := c.Offset(); return o }
	sample(10_000, 40)
	sample(11_000, 5)
	sample(12_000, 30)
	if off() != pub+5 {
		t.Fatalf("offset %d, want the least delay's %d", off(), pub+5)
	}
	// The path slows down: 1 s, 2 s, ... 7 s of queue.
	for i := int64(1); i <= 7; i++ {
		sample(12_000+i*1000, i*1000)
	}
	if now, _ := c.Present(msAt(19_000), 0); now != tick.FromMillis(19_000-pub-5) {
		t.Fatalf("present %v, want our time less the least offset", now)
	}
	if now, _ := c.Present(msAt(19_000), 5*time.Second); now != tick.FromMillis(19_000-pub-5-5000) {
		t.Fatalf("present less 5 s %v", now)
	}
	// A window and more after the 5 ms sample, the later ones decide.
	for i := int64(0); i <= 70; i++ {
		sample(20_000+i*1000, 3000)
	}
	if off() != pub+3000 {
		t.Fatalf("offset %d after the window, want %d", off(), pub+3000)
	}
	sample(91_000, 2000) // a better one replaces it at once
	if off() != pub+2000 {
		t.Fatalf("offset %d, want %d", off(), pub+2000)
	}
	c.Sample(msAt(92_000), tick.Max) // never a tick of the pubend's time
	if off() != pub+2000 {
		t.Fatalf("tick.Max taken as a sample: offset %d", off())
	}
	// A DCT nack filled first-time: the estimate restarts from that
	// message, and a better sample lowers it again at once.
	c.Rebase(msAt(93_000), tick.FromMillis(93_000-pub-6000))
	if off() != pub+6000 {
		t.Fatalf("offset %d after Rebase, want %d", off(), pub+6000)
	}
	sample(94_000, 5500)
	if off() != pub+5500 {
		t.Fatalf("offset %d, want %d", off(), pub+5500)
	}
}

// TestDelayCuriousBackedOff: a subend whose doubt horizon trails its target
// (the estimated present less DCT) makes the ticks above everything known
// a gap, nacked at once; while it keeps trailing the horizon moves again
// only after the NRT, doubled each time, and the gap grows into one range
// repeated at its own NRT, never one nack per timer tick. Ticks that
// arrive first-time in that gap give no round-trip sample (they were on
// their way, not the nack's answer).
func TestDelayCuriousBackedOff(t *testing.T) {
	l := Liveness{GCT: 200 * time.Millisecond, NRTMin: 600 * time.Millisecond, NRTMax: 60 * time.Second}
	var k tick.Knowledge[*msg.Event]
	k.AddSilence(tick.Range{Lo: 1, Hi: 100}, nil)
	var s Subend
	s.FloorSet = true
	target := func(now int64) tick.Tick { return tick.Tick(100 + now/10) } // 1 tick per 10 ms
	var moved []int64
	nacks := 0
	for now := int64(0); now <= 5000; now += 10 {
		if s.DelayCurious(target(now), k.DoubtHorizon(), k.KnownHi(), msAt(now), l) {
			moved = append(moved, now)
		}
		got := s.Scan(&k, msAt(now), l)
		nacks += len(got)
		if now == 0 && (len(got) != 0) {
			t.Fatalf("nacked %v with the horizon on target", got)
		}
		if now == 10 && (len(got) != 1 || got[0] != (tick.Range{Lo: 101, Hi: 101})) {
			t.Fatalf("first nack %v, want [101]", got)
		}
	}
	if want := []int64{10, 610, 1810, 4210}; len(moved) != len(want) || moved[1] != want[1] || moved[2] != want[2] || moved[3] != want[3] {
		t.Fatalf("horizon moved at %v ms, want %v", moved, want)
	}
	if s.Gaps() != 1 || nacks > 8 {
		t.Fatalf("%d gaps, %d nacks in 5 s: %s", s.Gaps(), nacks, s.Describe())
	}
	k.AddSilence(tick.Range{Lo: 101, Hi: 700}, nil)
	s.Scan(&k, msAt(5010), l)
	// Within target for as long as the backoff (4.8 s): the doubling
	// restarts, and the next trailing moves the horizon at once.
	for now := int64(5010); now <= 10_000; now += 10 {
		s.DelayCurious(tick.Tick(600), k.DoubtHorizon(), k.KnownHi(), msAt(now), l)
	}
	if !s.DelayCurious(tick.Tick(800), k.DoubtHorizon(), k.KnownHi(), msAt(10_010), l) {
		t.Fatal("the horizon did not move at once after the stream kept up")
	}
	// A gap nacked once and filled: by what was on its way, no round-trip
	// sample; by the nack's answer, one. DelayFilled tells the filling once
	// (the caller restarts the pubend clock's estimate if it came
	// first-time).
	for _, retrans := range []bool{false, true} {
		var k tick.Knowledge[*msg.Event]
		k.AddSilence(tick.Range{Lo: 1, Hi: 100}, nil)
		var s Subend
		s.FloorSet = true
		s.DelayCurious(200, k.DoubtHorizon(), k.KnownHi(), msAt(0), l)
		if got := s.Scan(&k, msAt(0), l); len(got) != 1 {
			t.Fatalf("nacked %v", got)
		}
		k.AddSilence(tick.Range{Lo: 101, Hi: 150}, nil)
		if s.DelayFilled(&k) {
			t.Fatal("a nacked gap half known counted as filled")
		}
		k.AddSilence(tick.Range{Lo: 151, Hi: 250}, nil)
		s.Answered(tick.Range{Lo: 101, Hi: 250}, msAt(300), retrans)
		if !s.DelayFilled(&k) || s.DelayFilled(&k) {
			t.Fatal("a filled gap DCT nacked counts once")
		}
		s.Scan(&k, msAt(300), l)
		if _, n := s.SRTT(); (n == 1) != retrans {
			t.Fatalf("retransmission %v: %d round-trip samples", retrans, n)
		}
	}
}
