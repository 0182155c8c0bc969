package stream

import (
	"testing"

	"github.com/aerie-mq/aerie/internal/match"
	"github.com/aerie-mq/aerie/internal/msg"
	"github.com/aerie-mq/aerie/internal/tick"
)

// TestVouchWalksSilenceAndWaitsForPassingEvents: Vouch goes over silence
// and over events the downstream's filter drops, stops at a Q tick and at
// final ticks (their kinds forgotten), and holds before an event that
// passes until the downstream acks it cleanly; what its walk ahead went
// over before it became final is vouched once the clean ack passes the
// highest such event.
func TestVouchWalksSilenceAndWaitsForPassingEvents(t *testing.T) {
	pat, err := match.ParsePattern("a.*")
	if err != nil {
		t.Fatal(err)
	}
	var k tick.Knowledge[*msg.Event]
	k.AddSilence(tick.Range{Lo: 1, Hi: 9}, nil)
	k.AddData(10, &msg.Event{Tick: 10, Topic: "b.x"}) // dropped by a.*
	k.AddSilence(tick.Range{Lo: 11, Hi: 19}, nil)
	k.AddData(20, &msg.Event{Tick: 20, Topic: "a.x"}) // passes
	k.AddSilence(tick.Range{Lo: 21, Hi: 29}, nil)
	k.AddData(30, &msg.Event{Tick: 30, Topic: "a.y"}) // passes
	k.AddSilence(tick.Range{Lo: 31, Hi: 39}, nil)
	// 40..44 unknown (Q)
	k.AddSilence(tick.Range{Lo: 45, Hi: 50}, nil)

	o := &Ostream{}
	o.SetFilter(pat, 1, 0)
	o.Vouch(&k, 0)
	if o.Vouched != 19 {
		t.Fatalf("Vouched = %d, want 19: silence and the dropped event up to the first that passes", o.Vouched)
	}
	o.CleanAck = 25 // past the first passing event, not the second
	o.Vouch(&k, 0)
	if o.Vouched != 29 {
		t.Fatalf("Vouched = %d after a clean ack of 25, want 29 (the event at 30 holds the rest)", o.Vouched)
	}
	// Everything up to the Q gap becomes final before the event at 30 is
	// acked: the walk ahead went over it while its kinds were known.
	k.SetFinal(39)
	o.CleanAck = 30
	o.Vouch(&k, 0)
	if o.Vouched != 39 {
		t.Fatalf("Vouched = %d after a clean ack of 30, want 39 (walked before it became final, up to the Q gap)", o.Vouched)
	}
	// The gap becomes known, then final with what is above it: no walk
	// went over 40..50 before they became final, so only a floor
	// (upstream's vouching, or the clean ack) takes them.
	k.AddSilence(tick.Range{Lo: 40, Hi: 44}, nil)
	k.SetFinal(50)
	o.Vouch(&k, 0)
	if o.Vouched != 39 {
		t.Fatalf("Vouched = %d over final ticks it never walked, want 39", o.Vouched)
	}
	o.Vouch(&k, 50)
	if o.Vouched != 50 {
		t.Fatalf("Vouched = %d with a floor of 50, want 50", o.Vouched)
	}
}
