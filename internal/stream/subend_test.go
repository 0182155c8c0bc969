package stream

import (
	"testing"
	"time"

	"github.com/aerie-mq/aerie/internal/msg"
	"github.com/aerie-mq/aerie/internal/tick"
)

// TestRecoveringRepeatWaitsForAnswers: a recovering subend (NACK window set,
// Gryphon CC §3.2) does not repeat a nack while answers to its earlier nacks
// are still arriving, because on a FIFO link the repeat's answer would queue
// behind the first one's and take the bottleneck's bandwidth twice; once
// answers stop for NRT, it repeats. A subend under congestion control that
// is not recovering (HoldRepeats, no window: an outage shorter than the
// receive window) holds the same way. Without either the repeat goes after
// NRT as before.
func TestRecoveringRepeatWaitsForAnswers(t *testing.T) {
	l := Liveness{GCT: 100 * time.Millisecond, NRTMin: 600 * time.Millisecond, NRTMax: 10 * time.Second}
	ms := func(v int64) tick.Time { return tick.Time(v * int64(time.Millisecond)) }
	for _, c := range []struct{ recovering, hold bool }{{true, false}, {false, true}, {false, false}} {
		holds := c.recovering || c.hold
		var k tick.Knowledge[*msg.Event]
		for _, r := range []tick.Range{{Lo: 1, Hi: 10}, {Lo: 21, Hi: 30}, {Lo: 41, Hi: 50}} {
			k.AddSilence(r, nil)
		}
		var s Subend
		s.FloorSet = true
		if c.recovering {
			s.Window = 100
		}
		s.HoldRepeats = c.hold
		if got := s.Scan(&k, ms(0), l); len(got) != 0 {
			t.Fatalf("gaps nacked before GCT: %v", got)
		}
		if got := s.Scan(&k, ms(100), l); len(got) != 2 {
			t.Fatalf("%+v: nacked %v at GCT, want both gaps", c, got)
		}
		// Part of the first gap is answered 500 ms after the nacks; the
		// second gap's answer is still on its way.
		k.AddSilence(tick.Range{Lo: 11, Hi: 12}, nil)
		s.Answered(tick.Range{Lo: 11, Hi: 12}, ms(600), true)
		got := s.Scan(&k, ms(710), l) // NRT after the nacks: both are due
		if holds && len(got) != 0 {
			t.Fatalf("%+v: repeated %v while answers still arrive", c, got)
		}
		if !holds && len(got) != 2 {
			t.Fatalf("%+v: repeated %v after NRT, want both gaps", c, got)
		}
		if !holds {
			continue
		}
		// No answer for NRT since the last one: the repeats go out.
		if got := s.Scan(&k, ms(1200), l); len(got) != 2 || got[0] != (tick.Range{Lo: 13, Hi: 20}) {
			t.Fatalf("%+v: repeated %v once answers stopped for NRT, want [13,20] and [31,40]", c, got)
		}
	}
}
