package gd

import (
	"testing"
	"time"

	"github.com/aerie-mq/aerie/internal/msg"
	"github.com/aerie-mq/aerie/internal/tick"
)

// TestReleasedIsWhatTheRuleAllows: Engine.Released, what log retention trims
// up to, and the snapshot's release point follow the release protocol
// (Gryphon DS, DSN 2003 §3): an SHB's release floor holds them below the ack
// prefix, and clearing it lets them catch up. A restarted pubend starts from
// the snapshot's release point with T_r = T_d = it.
func TestReleasedIsWhatTheRuleAllows(t *testing.T) {
	cfg := DefaultConfig()
	p1, err := New("p1", cfg, []Route{{Pubend: "P1", Down: []msg.NodeID{"s1"}}})
	if err != nil {
		t.Fatal(err)
	}
	s1, err := New("s1", cfg, []Route{{Pubend: "P1", Up: "p1"}})
	if err != nil {
		t.Fatal(err)
	}
	engines := map[msg.NodeID]*Engine{"p1": p1, "s1": s1}
	now := tick.Time(1767225600 * 1e9)
	var log []msg.Record
	step := func(id msg.NodeID, in Input) {
		if err := engines[id].Step(now, in); err != nil {
			t.Fatal(err)
		}
	}
	pump := func() {
		for busy := true; busy; {
			busy = false
			for _, id := range []msg.NodeID{"p1", "s1"} {
				e := engines[id]
				for e.HasReady() {
					busy = true
					rd := e.Ready()
					if id == "p1" {
						log = append(log, rd.Persist...)
					}
					if len(rd.Persist) > 0 {
						e.Advance(rd)
					}
					for _, env := range rd.Send {
						step(env.To, Recv{From: env.From, Msg: env.Msg})
					}
				}
			}
		}
	}
	run := func(d time.Duration) { // timers every TickInterval
		for end := now.Add(d); now < end; {
			now = now.Add(cfg.TickInterval)
			step("p1", Tick{})
			step("s1", Tick{})
			pump()
		}
	}
	publish := func(seq uint64) {
		step("p1", Local{Msg: msg.Publish{Pubend: "P1", Publisher: "app", Seq: seq, Topic: "a"}})
		pump()
	}
	state := func(e *Engine) ReleaseState { return e.ReleaseStates()[0] }

	run(time.Second)
	floor := state(s1).Delivered
	step("s1", ReleaseFloor{Pubend: "P1", T: floor})
	publish(1)
	publish(2)
	run(2 * time.Second)
	var first tick.Tick
	for _, r := range log {
		if r.Event != nil && first == 0 {
			first = r.Event.Tick
		}
	}
	// The events above the floor stay (the silence before them, which no
	// durable subscriber needs, may go).
	st := state(p1)
	if got := p1.Released("P1"); got != st.Final || got >= first || st.AckPrefix <= first {
		t.Fatalf("with a floor at %d: Released %d, first event %d, state %+v", floor, got, first, st)
	}
	snap, mark := p1.Snapshot()
	if !p1.PersistedThrough(mark) || snap[0].Meta == nil || snap[0].Meta.Final != st.Final {
		t.Fatalf("snapshot release point: %v (mark %d persisted %v), want %d", snap, mark, p1.PersistedThrough(mark), st.Final)
	}

	step("s1", ReleaseFloor{Pubend: "P1", Clear: true})
	run(time.Second)
	st = state(p1)
	if got := p1.Released("P1"); got != st.AckPrefix || st.Released != st.AckPrefix || st.Delivered != st.AckPrefix {
		t.Fatalf("floor cleared: Released %d, state %+v", got, st)
	}

	// Restart the pubend from its snapshot and log.
	snap, _ = p1.Snapshot()
	r, err := New("p1", cfg, []Route{{Pubend: "P1", Down: []msg.NodeID{"s1"}}})
	if err != nil {
		t.Fatal(err)
	}
	if err := r.Restore(append(snap, log...)); err != nil {
		t.Fatal(err)
	}
	if rs := state(r); rs.Final != st.Final || rs.Released != rs.Final || rs.Delivered != rs.Final {
		t.Fatalf("restored: %+v, want T_r = T_d = L = %d", rs, st.Final)
	}
}
