package gd

import (
	"fmt"
	"strings"
	"testing"

	"github.com/aerie-mq/aerie/internal/msg"
	"github.com/aerie-mq/aerie/internal/tick"
)

func dataTo(to msg.NodeID, p msg.PubendID, final, lo, hi, v tick.Tick) msg.Envelope {
	k := &msg.Knowledge{Pubend: p, Final: final, Start: lo, End: hi}
	if v != 0 {
		k.VTick, k.Event = v, &msg.Event{Pubend: p, Tick: v, Topic: "a"}
	}
	return msg.Envelope{From: "b1", To: to, Msg: k}
}

func describeSend(send []msg.Envelope) string {
	var b strings.Builder
	for _, env := range send {
		fmt.Fprintf(&b, "%s %v\n", env.To, env.Msg)
	}
	return b.String()
}

// coalesce joins consecutive knowledge of one pubend to one neighbour and
// nothing else: a message to the same neighbour in between, another
// pubend, another final prefix, a gap or a retransmission ends a run;
// messages to other neighbours do not.
func TestCoalesce(t *testing.T) {
	nack := msg.Envelope{From: "b1", To: "s1", Msg: msg.Nack{Pubend: "P", Start: 1, End: 2}}
	retrans := dataTo("s1", "P", 0, 31, 31, 31)
	retrans.Msg.(*msg.Knowledge).Retrans = true
	send := []msg.Envelope{
		dataTo("s1", "P", 0, 1, 4, 2),
		dataTo("s2", "P", 0, 1, 4, 3),
		dataTo("s1", "P", 0, 5, 5, 5), // joins s1's run across s2's message
		dataTo("s2", "P", 0, 5, 9, 0), // silence joins s2's run
		dataTo("s1", "P", 0, 6, 8, 0),
		nack,                             // ends s1's run
		dataTo("s1", "P", 0, 9, 9, 9),    // a new run
		dataTo("s1", "Q", 0, 10, 10, 10), // another pubend
		dataTo("s1", "P", 0, 10, 10, 10), // ends Q's run: not after it
		dataTo("s1", "P", 1, 11, 11, 11), // another final prefix
		dataTo("s1", "P", 1, 13, 13, 13), // a gap
		retrans,
		dataTo("s2", "P", 0, 10, 12, 12),
	}
	got := describeSend((&Engine{}).coalesce(send))
	want := `s1 Run{P L≤0 S[1,8] D@2 a D@5 a}
s2 Run{P L≤0 S[1,12] D@3 a D@12 a}
s1 Nack{P [1,2]}
s1 Data{P L≤0 S[9] D@9 a}
s1 Data{Q L≤0 S[10] D@10 a}
s1 Data{P L≤0 S[10] D@10 a}
s1 Data{P L≤1 S[11] D@11 a}
s1 Data{P L≤1 S[13] D@13 a}
s1 Data{P L≤0 S[31] D@31 a retrans}
`
	if got != want {
		t.Fatalf("coalesced:\n%s\nwant:\n%s", got, want)
	}
}

// A run holds at most RunEventsMax events; the next piece starts another.
func TestCoalesceBounded(t *testing.T) {
	var send []msg.Envelope
	for i := range RunEventsMax + 3 {
		v := tick.Tick(i + 1)
		send = append(send, dataTo("s1", "P", 0, v, v, v))
	}
	out := (&Engine{}).coalesce(send)
	if len(out) != 2 {
		t.Fatalf("%d messages, want 2:\n%s", len(out), describeSend(out))
	}
	a, b := out[0].Msg.(*msg.KnowledgeRun), out[1].Msg.(*msg.KnowledgeRun)
	if len(a.Events) != RunEventsMax || len(b.Events) != 3 || a.End+1 != b.Start || b.End != RunEventsMax+3 {
		t.Fatalf("runs %v and %v", a, b)
	}
}

// A run's pieces (Split) say what the coalesced messages said: the same
// silence and the same events at the same ticks.
func TestCoalesceSplitsBack(t *testing.T) {
	send := []msg.Envelope{
		dataTo("s1", "P", 3, 4, 6, 6),
		dataTo("s1", "P", 3, 7, 9, 0),
		dataTo("s1", "P", 3, 10, 12, 11),
		dataTo("s1", "P", 3, 13, 13, 13),
	}
	known := func(ks []msg.Knowledge) string {
		var b strings.Builder
		for _, k := range ks {
			for t := k.Start; t <= k.End; t++ {
				if k.Event != nil && t == k.VTick {
					fmt.Fprintf(&b, "D%d ", t)
				} else {
					fmt.Fprintf(&b, "S%d ", t)
				}
			}
		}
		return b.String()
	}
	var in []msg.Knowledge
	for _, env := range send {
		in = append(in, *env.Msg.(*msg.Knowledge))
	}
	out := (&Engine{}).coalesce(send)
	if len(out) != 1 {
		t.Fatalf("%d messages, want one run", len(out))
	}
	var pieces []msg.Knowledge
	out[0].Msg.(*msg.KnowledgeRun).Split(func(k msg.Knowledge) { pieces = append(pieces, k) })
	if g, w := known(pieces), known(in); g != w {
		t.Fatalf("pieces say %s, the messages said %s", g, w)
	}
	for _, k := range pieces {
		if k.Final != 3 || k.Retrans {
			t.Fatalf("piece %v", k)
		}
	}
}
