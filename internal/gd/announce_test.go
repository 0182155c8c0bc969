package gd

import (
	"fmt"
	"slices"
	"testing"

	"github.com/aerie-mq/aerie/internal/msg"
	"github.com/aerie-mq/aerie/internal/tick"
)

// TestAnnounceDurableBatchAsOneByOne: a PHB whose group commits carry many
// events (announceDurable's one pass) tells each downstream what one whose
// commits carry one event each tells it — the same events at the same
// ticks, and every tick up to the last one it passes decided, with no tick
// twice — for a downstream that takes everything and one whose filter
// passes only some events, and acks every publish with the same tick. (The
// frames may cut the same knowledge differently: a flush over several
// events renders a filtered tick with the event before it rather than the
// one after.)
func TestAnnounceDurableBatchAsOneByOne(t *testing.T) {
	one := runAnnounce(t, 1)
	if len(one["d1"]) != 200 || len(one["d2"]) != 67 {
		t.Fatalf("one by one: %d events to d1, %d to d2, want 200 and 67", len(one["d1"]), len(one["d2"]))
	}
	for _, batch := range []int{2, 7, 64} {
		got := runAnnounce(t, batch)
		for _, d := range []msg.NodeID{"d1", "d2", "client"} {
			if !slices.Equal(got[d], one[d]) {
				t.Errorf("commits of %d events: to %s\n%q\nwant (one event per commit)\n%q", batch, d, got[d], one[d])
			}
		}
	}
}

// runAnnounce publishes 200 events at a PHB, batch per group commit, and
// returns the events each downstream was told of, as text (KnowledgeRuns
// split into their pieces), after checking that the pieces decide every
// tick from 1 up to the last event once; and the acks to the client.
func runAnnounce(t *testing.T, batch int) map[msg.NodeID][]string {
	t.Helper()
	now := tick.Time(1767225600 * 1e9)
	e, err := New("p1", DefaultConfig(), []Route{{Pubend: "P1", Down: []msg.NodeID{"d1", "d2"}}})
	if err != nil {
		t.Fatal(err)
	}
	out := map[msg.NodeID][]string{}
	next := map[msg.NodeID]tick.Tick{"d1": 1, "d2": 1} // the first tick not yet decided downstream
	piece := func(to msg.NodeID, k msg.Knowledge) {
		if k.End < k.Start {
			return // a final prefix alone
		}
		if k.Start > next[to] || k.End < next[to] {
			t.Fatalf("commits of %d events: %s to %s leaves a gap or repeats: %d is the first tick not yet decided", batch, k, to, next[to])
		}
		next[to] = k.End + 1
		if k.Event != nil {
			out[to] = append(out[to], fmt.Sprintf("D@%d %s", k.VTick, k.Event.Topic))
		}
	}
	step := func(in Input) {
		if err := e.Step(now, in); err != nil {
			t.Fatal(err)
		}
	}
	drain := func() {
		for e.HasReady() {
			rd := e.Ready()
			for _, env := range rd.Send {
				switch m := env.Msg.(type) {
				case *msg.KnowledgeRun:
					m.Split(func(k msg.Knowledge) { piece(env.To, k) })
				case msg.KnowledgeRun:
					m.Split(func(k msg.Knowledge) { piece(env.To, k) })
				case *msg.Knowledge:
					piece(env.To, *m)
				case msg.Knowledge:
					piece(env.To, m)
				}
			}
			for _, m := range rd.ToClientsAfterPersist {
				out["client"] = append(out["client"], fmt.Sprint(m))
			}
			if len(rd.Persist) > 0 {
				e.Advance(rd)
			}
		}
	}
	step(LinkUp{Peer: "d1", Incarnation: 1})
	step(LinkUp{Peer: "d2", Incarnation: 1})
	step(Recv{From: "d1", Msg: msg.Summary{Patterns: []string{">"}}})
	step(Recv{From: "d2", Msg: msg.Summary{Patterns: []string{"a.even"}}})
	drain()
	for i := range 200 {
		if i%batch == 0 {
			drain() // the same clock throughout, so the ticks are the same too
		}
		topic := "a.odd"
		if i%3 == 0 {
			topic = "a.even"
		}
		step(Local{Msg: msg.Publish{Pubend: "P1", Publisher: "pub", Seq: uint64(i + 1), Topic: topic, Payload: []byte{byte(i)}}})
	}
	drain()
	return out
}
