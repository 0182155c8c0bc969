package shell_test

import (
	"fmt"
	"testing"

	"github.com/aerie-mq/aerie/internal/gd"
	"github.com/aerie-mq/aerie/internal/msg"
	"github.com/aerie-mq/aerie/internal/shell"
	"github.com/aerie-mq/aerie/internal/tick"
)

// ackFrames sorts what a client received into the ack frames (PubAck and
// PubAckRange, in either form) of publisher and returns every publish
// they ack, by seq, failing the test if one is acked twice.
func ackFrames(t *testing.T, ms []msg.Msg, publisher string) (frames, ranges int, acked map[uint64]msg.PubAck) {
	t.Helper()
	acked = map[uint64]msg.PubAck{}
	add := func(a msg.PubAck) {
		if prev, dup := acked[a.Seq]; dup {
			t.Fatalf("publish #%d acked twice: %v and %v", a.Seq, prev, a)
		}
		acked[a.Seq] = a
	}
	for _, m := range ms {
		if a, ok := msg.AsPubAck(m); ok && a.Publisher == publisher {
			frames++
			add(a)
		}
		if r, ok := msg.AsPubAckRange(m); ok && r.Publisher == publisher {
			frames++
			ranges++
			for i := range r.Len() {
				add(r.Ack(i))
			}
		}
	}
	return frames, ranges, acked
}

// logged maps each logged event's seq to its tick.
func logged(batches [][]msg.Record, publisher string) map[uint64]tick.Tick {
	out := map[uint64]tick.Tick{}
	for _, recs := range batches {
		for _, r := range recs {
			if r.Event != nil && r.Event.Publisher == publisher {
				out[r.Event.Seq] = r.Event.Tick
			}
		}
	}
	return out
}

func pub(publisher string, seq uint64) msg.Publish {
	return msg.Publish{Publisher: publisher, Seq: seq, Topic: "a.b", Payload: []byte(fmt.Sprint(seq))}
}

// The publishes of one group commit are acked, to a client that reads
// ranges, by one PubAckRange per publisher, each publish exactly once with
// the tick it was logged at; a client that does not (an older protocol
// version) gets a PubAck per publish from the same batch.
func TestAckRangesPerGroupCommit(t *testing.T) {
	b, f := phb(t)
	b.ClientUpWith(1, nil, true) // version 11 on
	b.ClientUp(2)                // older
	const n = 40
	for seq := uint64(1); seq <= n; seq++ {
		b.ClientRequest(1, pub("new", seq))
		b.ClientRequest(2, pub("old", seq))
	}
	b.Drain()
	if len(f.appends) != 1 {
		t.Fatalf("%d batches, want one group commit", len(f.appends))
	}
	next := uint64(1)
	persistAll(t, b, f, &next)

	frames, ranges, acked := ackFrames(t, f.clients[1], "new")
	if frames != 1 || ranges != 1 {
		t.Fatalf("new client: %d ack frames (%d ranges) for %d publishes of one batch, want one range", frames, ranges, n)
	}
	ticks := logged(f.appendsSeen, "new")
	for seq := uint64(1); seq <= n; seq++ {
		a, ok := acked[seq]
		if !ok || a.Tick != ticks[seq] || a.Pubend != "P1" || a.Publisher != "new" || a.Duplicate {
			t.Fatalf("new client: publish #%d acked as %v (ok %v), logged at %d", seq, a, ok, ticks[seq])
		}
	}
	if len(acked) != n {
		t.Fatalf("new client: %d publishes acked, want %d", len(acked), n)
	}

	frames, ranges, acked = ackFrames(t, f.clients[2], "old")
	if frames != n || ranges != 0 || len(acked) != n {
		t.Fatalf("old client: %d ack frames (%d ranges) for %d publishes, want a PubAck each", frames, ranges, n)
	}
	ticks = logged(f.appendsSeen, "old")
	for seq, a := range acked {
		if a.Tick != ticks[seq] {
			t.Fatalf("old client: #%d acked at %d, logged at %d", seq, a.Tick, ticks[seq])
		}
	}
}

// A publish refused in the middle of a batch is refused on its own (a
// PubReject), and the acks on either side of it are ranges that leave it
// out; a retry of a publish already logged is acked on its own, as a
// duplicate with the original tick.
func TestAckRangesAroundRefusalAndDuplicate(t *testing.T) {
	b, f := phb(t)
	b.ClientUpWith(1, nil, true)
	for seq := uint64(1); seq <= 10; seq++ {
		p := pub("c", seq)
		if seq == 5 {
			p.Pubend = "P9" // not hosted here: refused by the engine
		}
		b.ClientRequest(1, p)
	}
	b.Drain()
	next := uint64(1)
	persistAll(t, b, f, &next)

	rejects := ofType[msg.PubReject](f.clients[1])
	if len(rejects) != 1 || rejects[0].Seq != 5 || rejects[0].Publisher != "c" {
		t.Fatalf("rejects = %v, want #5 alone", rejects)
	}
	frames, ranges, acked := ackFrames(t, f.clients[1], "c")
	if frames != 2 || ranges != 2 {
		t.Fatalf("%d ack frames (%d ranges), want two ranges: 1…4 and 6…10 (%v)", frames, ranges, f.clients[1])
	}
	if _, ok := acked[5]; ok || len(acked) != 9 {
		t.Fatalf("acked %v, want 1…4 and 6…10", acked)
	}
	ticks := logged(f.appendsSeen, "c")
	for seq, a := range acked {
		if a.Tick != ticks[seq] {
			t.Fatalf("#%d acked at %d, logged at %d", seq, a.Tick, ticks[seq])
		}
	}

	// A retry of 2 and 3 (their acks lost) and a new publish 11, together.
	f.clients[1] = nil
	b.ClientRequest(1, pub("c", 2))
	b.ClientRequest(1, pub("c", 3))
	b.ClientRequest(1, pub("c", 11))
	b.Drain()
	persistAll(t, b, f, &next)
	var dups []msg.PubAck
	for _, m := range f.clients[1] {
		if a, ok := msg.AsPubAck(m); ok && a.Duplicate {
			dups = append(dups, a)
		}
		if r, ok := msg.AsPubAckRange(m); ok {
			t.Fatalf("a retry or a lone publish acked by a range: %v", r)
		}
	}
	if len(dups) != 2 || dups[0].Seq != 2 || dups[0].Tick != ticks[2] || dups[1].Seq != 3 || dups[1].Tick != ticks[3] {
		t.Fatalf("duplicates acked %v, want #2 and #3 at their original ticks", dups)
	}
	_, _, acked = ackFrames(t, f.clients[1], "c")
	if a := acked[11]; a.Duplicate || a.Tick != logged(f.appendsSeen, "c")[11] {
		t.Fatalf("#11 acked as %v", a)
	}
}

// Several publishers in one batch, interleaved: a range per publisher.
func TestAckRangesInterleavedPublishers(t *testing.T) {
	b, f := phb(t)
	b.ClientUpWith(1, nil, true)
	b.ClientUpWith(2, nil, true)
	for seq := uint64(1); seq <= 6; seq++ {
		b.ClientRequest(1, pub("a", seq))
		b.ClientRequest(2, pub("b", seq))
		b.ClientRequest(1, pub("a2", seq)) // a second publisher on connection 1
	}
	b.Drain()
	next := uint64(1)
	persistAll(t, b, f, &next)
	for _, c := range []struct {
		c         shell.ClientID
		publisher string
	}{{1, "a"}, {1, "a2"}, {2, "b"}} {
		frames, ranges, acked := ackFrames(t, f.clients[c.c], c.publisher)
		if frames != 1 || ranges != 1 || len(acked) != 6 {
			t.Fatalf("client %d, publisher %s: %d ack frames (%d ranges), %d seqs acked; want one range of 6", c.c, c.publisher, frames, ranges, len(acked))
		}
	}
	if len(f.clients[1]) != 2 || len(f.clients[2]) != 1 {
		t.Fatalf("clients got %d and %d frames, want 2 and 1", len(f.clients[1]), len(f.clients[2]))
	}
}

// Best-effort mode acks on receipt: the publishes of one burst (one Drain)
// are acked by one range.
func TestAckRangesBestEffort(t *testing.T) {
	cfg := gd.DefaultConfig()
	cfg.BestEffort = true
	eng, err := gd.New("p1", cfg, []gd.Route{{Pubend: "P1"}})
	if err != nil {
		t.Fatal(err)
	}
	f := &fake{now: 1767225600 * 1e9, clients: map[shell.ClientID][]msg.Msg{}, closed: map[shell.ClientID]string{}}
	b := shell.New(shell.Config{ID: "p1", Engine: eng, Clock: f, Net: f, Hosted: []msg.PubendID{"P1"}, Strict: true})
	b.ClientUpWith(1, nil, true)
	b.ClientUp(2)
	b.ClientRequest(2, msg.Subscribe{Sub: "s", Pattern: "a.*"})
	b.Drain()
	f.clients[2] = nil
	for burst := range 3 {
		for i := range 32 {
			b.ClientRequest(1, pub("c", uint64(burst*32+i+1)))
		}
		b.Drain()
		f.now += 1e6
	}
	frames, ranges, acked := ackFrames(t, f.clients[1], "c")
	if frames != 3 || ranges != 3 || len(acked) != 96 {
		t.Fatalf("%d ack frames (%d ranges) acking %d publishes, want a range per burst of 32", frames, ranges, len(acked))
	}

	// What one connection receives keeps its order: an answer for it that
	// is not an ack (here its subscription's start) goes after the acks
	// that came before it, and the run starts again after it.
	f.clients[1] = nil
	b.ClientRequest(1, pub("c", 97))
	b.ClientRequest(1, pub("c", 98))
	b.ClientRequest(1, msg.Subscribe{Sub: "s1", Pattern: "z"})
	b.ClientRequest(1, pub("c", 99))
	b.ClientRequest(1, pub("c", 100))
	b.Drain()
	var order []string
	for _, m := range f.clients[1] {
		order = append(order, fmt.Sprint(m))
	}
	if len(order) != 3 {
		t.Fatalf("connection 1 got %v, want the range of #97…98, the start, the range of #99…100", order)
	}
	r1, ok1 := msg.AsPubAckRange(f.clients[1][0])
	_, ok2 := f.clients[1][1].(msg.SubStarted)
	r3, ok3 := msg.AsPubAckRange(f.clients[1][2])
	if !ok1 || !ok2 || !ok3 || r1.Seq != 97 || r1.Len() != 2 || r3.Seq != 99 || r3.Len() != 2 {
		t.Fatalf("connection 1 got %v, want the range of #97…98, the start, the range of #99…100", order)
	}

	var got []tick.Tick
	for _, d := range deliveries(f.clients[2]) {
		got = append(got, d.Event.Tick)
	}
	for seq := uint64(1); seq <= 96; seq++ {
		if acked[seq].Tick != got[seq-1] {
			t.Fatalf("#%d acked at %d, delivered at %d", seq, acked[seq].Tick, got[seq-1])
		}
	}
}
