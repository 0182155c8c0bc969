package gd

import (
	"math"
	"testing"

	"github.com/aerie-mq/aerie/internal/msg"
	"github.com/aerie-mq/aerie/internal/tick"
)

func ccConfig() Config {
	c := DefaultConfig()
	c.CongestionControl = true
	return c
}

// Congestion control messages from outside a pubend's tree, or with an
// impossible rate, are ignored and counted: they neither stall the pubend
// nor travel on (issue: bad input).
func TestCongestionBadInputIgnored(t *testing.T) {
	now := tick.Time(1767225600 * 1e9)
	pub, err := New("p1", ccConfig(), []Route{{Pubend: "P1", Down: []msg.NodeID{"b1"}}})
	if err != nil {
		t.Fatal(err)
	}
	relay, err := New("b1", ccConfig(), []Route{{Pubend: "P1", Up: "p1", Down: []msg.NodeID{"s1"}}})
	if err != nil {
		t.Fatal(err)
	}
	for _, in := range []struct {
		e    *Engine
		from msg.NodeID
		m    msg.Msg
	}{
		{pub, "x9", msg.UCA{Pubend: "P1", Seq: 5, MinRec: math.Inf(1), MinNonRec: 0.1}}, // not a downstream
		{pub, "b1", msg.UCA{Pubend: "P1", Seq: 5, MinRec: math.NaN(), MinNonRec: 0.1}},  // impossible rate
		{relay, "s1", msg.DCQ{Pubend: "P1", Seq: 5, Position: 9}},                       // from below
		{relay, "b1", msg.UCA{Pubend: "P9", Seq: 5, MinRec: 1, MinNonRec: math.Inf(1)}}, // unknown pubend
	} {
		if err := in.e.Step(now, Recv{From: in.from, Msg: in.m}); err != nil {
			t.Fatalf("%v from %s: %v", in.m, in.from, err)
		}
		if rd := in.e.Ready(); len(rd.Send) > 0 {
			t.Fatalf("%v from %s sent %v", in.m, in.from, rd.Send)
		}
	}
	if got := pub.Stats().CCIgnored + relay.Stats().CCIgnored; got != 4 {
		t.Fatalf("ignored %d, want 4", got)
	}
	if s := pub.CCStates(); len(s) != 1 || s[0].Limit != 0 {
		t.Fatalf("pubend state %+v: the rate must stay unlimited", s)
	}
}

// A pubend whose rate is limited holds publishes beyond it without refusing
// any: each gets its tick (and its ack) as the rate allows, in order, and a
// retry of a waiting publish is not logged twice.
func TestCongestionPacesPublishes(t *testing.T) {
	now := tick.Time(1767225600 * 1e9)
	e, err := New("p1", ccConfig(), []Route{{Pubend: "P1", Down: []msg.NodeID{"b1"}}})
	if err != nil {
		t.Fatal(err)
	}
	step := func(in Input) {
		if err := e.Step(now, in); err != nil {
			t.Fatal(err)
		}
	}
	step(Tick{})
	var log []msg.Record
	persistAll(t, e, &log)
	// An alert answering the first DCQ: nothing was published, so the rate
	// drops to r_min (2/s).
	step(Recv{From: "b1", Msg: msg.UCA{Pubend: "P1", Seq: uint64(now.Millis()) + 1, MinRec: math.Inf(1), MinNonRec: 0.2}})
	if s := e.CCStates(); s[0].Limit != 2 {
		t.Fatalf("limit %v, want r_min", s[0].Limit)
	}
	for seq := uint64(1); seq <= 5; seq++ {
		step(Local{Msg: msg.Publish{Pubend: "P1", Publisher: "app", Seq: seq, Topic: "a"}})
	}
	step(Local{Msg: msg.Publish{Pubend: "P1", Publisher: "app", Seq: 5, Topic: "a"}}) // a retry
	var acks []msg.PubAck
	for i := 0; i < 400; i++ { // 4 s of 10 ms ticks
		now = now.Add(e.cfg.TickInterval)
		step(Tick{})
		acks = append(acks, persistAll(t, e, &log)...)
	}
	if len(acks) != 5 {
		t.Fatalf("%d acks in 4 s at 2/s, want all 5", len(acks))
	}
	for i, a := range acks {
		if a.Seq != uint64(i+1) {
			t.Fatalf("ack %d is seq %d: out of order", i, a.Seq)
		}
	}
	events := 0
	for _, r := range log {
		if r.Event != nil {
			events++
		}
	}
	if events != 5 {
		t.Fatalf("%d events logged, want 5", events)
	}
	if st := e.Stats(); st.PublishesHeld != 5 || st.RateDecreases != 1 {
		t.Fatalf("held %d, decreases %d", st.PublishesHeld, st.RateDecreases)
	}
	// Nothing waits any more: the queue's memory goes with it.
	if c := e.byPubend["P1"].cc; c.admit != nil || c.waiting != nil {
		t.Fatalf("admission queue %d, waiting set %d after the burst: kept", cap(c.admit), len(c.waiting))
	}
}
