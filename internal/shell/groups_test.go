package shell_test

import (
	"slices"
	"strings"
	"testing"

	"github.com/aerie-mq/aerie/internal/gd"
	"github.com/aerie-mq/aerie/internal/msg"
	"github.com/aerie-mq/aerie/internal/retention"
	"github.com/aerie-mq/aerie/internal/shell"
	"github.com/aerie-mq/aerie/internal/tick"
)

// groupEvents are the events delivered to subscription sub of connection
// c, in order, taking them out of what f holds for c.
func groupEvents(f *fake, c shell.ClientID, sub msg.SubID) []*msg.Event {
	var out []*msg.Event
	for _, d := range deliveries(f.clients[c]) {
		if d.Sub == sub {
			out = append(out, d.Event)
		}
	}
	f.clients[c] = nil
	return out
}

// Each event of a group goes to exactly one member; a member that leaves
// with events unacknowledged has them given to another; the group's
// checkpoint is the acknowledged prefix, persisted, and a restart resumes
// from it without delivering an acknowledged event again.
func TestGroupEachEventToOneMember(t *testing.T) {
	b, f := phb(t)
	var next uint64 = 1
	b.ClientUp(1) // publisher
	b.ClientUp(2)
	b.ClientUp(3)
	b.ClientRequest(2, msg.Subscribe{Sub: "m", Pattern: "a.>", Group: "billing"})
	b.ClientRequest(3, msg.Subscribe{Sub: "m", Pattern: "a.>", Group: "billing"})
	b.Drain()
	persistAll(t, b, f, &next)
	if st := ofType[msg.SubStarted](f.clients[2]); len(st) != 1 {
		t.Fatalf("member 2 not started: %v", f.clients[2])
	}
	if st := ofType[msg.SubStarted](f.clients[3]); len(st) != 1 {
		t.Fatalf("member 3 not started: %v", f.clients[3])
	}
	// Another filter under the same group name is refused, naming both.
	b.ClientUp(4)
	b.ClientRequest(4, msg.Subscribe{Sub: "m", Pattern: "b.>", Group: "billing"})
	b.Drain()
	if rej := ofType[msg.SubRejected](f.clients[4]); len(rej) != 1 || !strings.Contains(rej[0].Reason, `"a.>"`) || !strings.Contains(rej[0].Reason, `"b.>"`) {
		t.Fatalf("a member with another filter: %v", f.clients[4])
	}
	f.clients[2], f.clients[3] = nil, nil
	for seq := uint64(1); seq <= 10; seq++ {
		b.ClientRequest(1, publish(seq))
	}
	b.Drain()
	persistAll(t, b, f, &next)
	got2, got3 := groupEvents(f, 2, "m"), groupEvents(f, 3, "m")
	if len(got2)+len(got3) != 10 || len(got2) != 5 {
		t.Fatalf("10 events shared as %d and %d", len(got2), len(got3))
	}
	seen := map[tick.Tick]bool{}
	for _, ev := range append(append([]*msg.Event{}, got2...), got3...) {
		if seen[ev.Tick] {
			t.Fatalf("tick %d delivered to two members", ev.Tick)
		}
		seen[ev.Tick] = true
	}
	// Member 2 acknowledges all it got; member 3 only its first, and
	// leaves: its four others go to member 2.
	for _, ev := range got2 {
		b.ClientRequest(2, msg.SubAck{Sub: "m", Token: msg.Token{ev.Pubend: ev.Tick}})
	}
	b.ClientRequest(3, msg.SubAck{Sub: "m", Token: msg.Token{got3[0].Pubend: got3[0].Tick}})
	b.Drain()
	persistAll(t, b, f, &next)
	b.ClientDown(3)
	b.Drain()
	again := groupEvents(f, 2, "m")
	if len(again) != 4 {
		t.Fatalf("member 2 got %d of the departed member's 4 unacknowledged events", len(again))
	}
	for i, ev := range again {
		if ev.Tick != got3[i+1].Tick {
			t.Fatalf("reassigned event %d at tick %d, want %d", i, ev.Tick, got3[i+1].Tick)
		}
	}
	// The checkpoint is the acked prefix: up to got3[1] exclusive.
	persistAll(t, b, f, &next)
	var last *msg.DurableSub
	for _, recs := range f.appendsSeen {
		for _, r := range recs {
			if r.Durable != nil && r.Durable.Name == shell.GroupPrefix+"billing" {
				last = r.Durable
			}
		}
	}
	if last == nil || last.Released["P1"] != got3[1].Tick-1 {
		t.Fatalf("persisted checkpoint %v, want P1:%d", last, got3[1].Tick-1)
	}
	// A restart resumes from the checkpoint: the events above it come
	// again, the four unacknowledged and the three acknowledged above the
	// first of those (the at-least-once window of a crash of the home,
	// docs/CONCEPTS.md "Consumer groups"), and nothing at or below it.
	var want []tick.Tick
	for _, ev := range append(append([]*msg.Event{}, got2...), got3...) {
		if ev.Tick >= got3[1].Tick {
			want = append(want, ev.Tick)
		}
	}
	slices.Sort(want)
	var log []msg.Record
	for _, recs := range f.appendsSeen {
		log = append(log, recs...)
	}
	b2, f2 := phb(t)
	if err := b2.Restore(retention.Loaded{Records: log, First: 1, Next: next}); err != nil {
		t.Fatal(err)
	}
	if fl, ok := floor(b2); !ok || fl != got3[1].Tick-1 {
		t.Fatalf("floor after restart %d,%v, want %d", fl, ok, got3[1].Tick-1)
	}
	b2.ClientUp(5)
	b2.ClientRequest(5, msg.Subscribe{Sub: "w", Pattern: "a.>", Group: "billing"})
	b2.Drain()
	next2 := next
	persistAll(t, b2, f2, &next2)
	for range 10 { // the catch-up is read back from the log
		for len(f2.fetches) > 0 {
			fe := f2.fetches[0]
			f2.fetches = f2.fetches[1:]
			b2.Fetched(fetchFrom(log, fe))
			b2.Drain()
		}
		persistAll(t, b2, f2, &next2)
	}
	resumed := groupEvents(f2, 5, "w")
	var gotTicks []tick.Tick
	for _, ev := range resumed {
		gotTicks = append(gotTicks, ev.Tick)
	}
	if !slices.Equal(gotTicks, want) || len(want) != 7 {
		t.Fatalf("after a restart the member got ticks %v, want %v", gotTicks, want)
	}
}

// fetchFrom answers fe from log, as the event log would.
func fetchFrom(log []msg.Record, fe gd.Fetch) gd.Fetched {
	out := gd.Fetched{Pubend: fe.Pubend}
	for _, r := range log {
		if r.Event == nil || r.Event.Pubend != fe.Pubend {
			continue
		}
		for _, rg := range fe.Ranges {
			if r.Event.Tick >= rg.Lo && r.Event.Tick <= rg.Hi {
				out.Events = append(out.Events, r.Event)
				break
			}
		}
	}
	return out
}

// A member slower than the publishers: past the backlog bound the group's
// subscription is put away and its waiting events dropped; once the member
// has room again it is attached from the checkpoint and catches up from
// the log at the member's pace. Every event still reaches the member once.
func TestGroupBacklog(t *testing.T) {
	b, f := phb(t)
	var next uint64 = 1
	b.ClientUp(1)
	b.ClientUp(2)
	b.ClientRequest(2, msg.Subscribe{Sub: "m", Pattern: "a.>", Group: "slow"})
	b.Drain()
	persistAll(t, b, f, &next)
	const events = 13000
	for seq := uint64(1); seq <= events; seq++ {
		b.ClientRequest(1, publish(seq))
		if seq%500 == 0 {
			b.Drain()
			persistAll(t, b, f, &next)
		}
	}
	b.Drain()
	persistAll(t, b, f, &next)
	var log []msg.Record
	for _, recs := range f.appendsSeen {
		log = append(log, recs...)
	}
	got := map[tick.Tick]bool{}
	for round := 0; len(got) < events && round < 1000; round++ {
		evs := groupEvents(f, 2, "m")
		if len(evs) == 0 && len(f.fetches) == 0 && round > 0 {
			b.Tick() // the catch-up repeats a request that found no room
			b.Drain()
		}
		for _, ev := range evs {
			if got[ev.Tick] {
				t.Fatalf("tick %d delivered twice", ev.Tick)
			}
			got[ev.Tick] = true
			b.ClientRequest(2, msg.SubAck{Sub: "m", Token: msg.Token{ev.Pubend: ev.Tick}})
		}
		b.Drain()
		for len(f.fetches) > 0 {
			fe := f.fetches[0]
			f.fetches = f.fetches[1:]
			b.Fetched(fetchFrom(log, fe))
			b.Drain()
		}
		persistAll(t, b, f, &next)
	}
	if len(got) != events {
		t.Fatalf("the member got %d of %d events", len(got), events)
	}
	if n := b.GroupAttachments("slow"); n < 2 {
		t.Fatalf("attached %d times: the backlog bound never put the subscription away", n)
	}
}
