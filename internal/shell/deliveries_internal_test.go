package shell

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/aerie-mq/aerie/internal/gd"
	"github.com/aerie-mq/aerie/internal/msg"
	"github.com/aerie-mq/aerie/internal/tick"
)

// recorder is a Net that keeps what each client connection was sent.
type recorder struct{ got map[ClientID][]msg.Msg }

func (r *recorder) Send(msg.NodeID, msg.Msg)                    {}
func (r *recorder) ToClient(c ClientID, m msg.Msg)              { r.got[c] = append(r.got[c], m) }
func (r *recorder) CloseClient(c ClientID, err error, _ string) { panic(err) }

type clock struct{}

func (clock) Now() tick.Time { return 1767225600 * 1e9 }

// expand is what a client receives, one line per Delivery a run stands
// for, in the client's names.
func expand(ms []msg.Msg) []string {
	var out []string
	for _, m := range ms {
		switch x := m.(type) {
		case *msg.DeliveryRun:
			x.Split(func(d msg.Delivery) {
				out = append(out, fmt.Sprintf("D %s %s@%d", d.Sub, d.Event.Pubend, d.Event.Tick))
			})
		case *msg.Delivery:
			out = append(out, fmt.Sprintf("D %s %s@%d", x.Sub, x.Event.Pubend, x.Event.Tick))
		case *msg.PubAckRange:
			for i := range x.Len() {
				a := x.Ack(i)
				out = append(out, fmt.Sprintf("A %s#%d@%d", a.Publisher, a.Seq, a.Tick))
			}
		case *msg.PubAck:
			out = append(out, fmt.Sprintf("A %s#%d@%d", x.Publisher, x.Seq, x.Tick))
		default:
			out = append(out, fmt.Sprint(m))
		}
	}
	return out
}

// Whatever mix of deliveries, Gaps, Progress, acks and other answers a
// batch holds, each connection receives exactly what it would receive
// one message at a time, in the same order; a connection that reads runs
// gets its consecutive deliveries to one subscription as one run (within
// the bounds), and a connection that does not gets none.
func TestDeliveryRunsKeepEachConnectionsOrder(t *testing.T) {
	eng, err := gd.New("s1", gd.DefaultConfig(), []gd.Route{{Pubend: "P1", Up: "b1"}})
	if err != nil {
		t.Fatal(err)
	}
	rng := rand.New(rand.NewPCG(1, 2))
	for round := range 200 {
		rec := &recorder{got: map[ClientID][]msg.Msg{}}
		b := New(Config{ID: "s1", Engine: eng, Clock: clock{}, Net: rec, Strict: true})
		reads := map[ClientID]Reads{1: {AckRanges: true, DeliveryRuns: true}, 2: {}, 3: {AckRanges: true, DeliveryRuns: true}, 4: {DeliveryRuns: true}}
		for c, r := range reads {
			b.ClientUpReading(c, nil, r)
			for _, name := range []msg.SubID{"a", "b"} {
				full := b.engineSub(c, name)
				b.sessions[c].subs[full] = name
				b.subOwner.set(full, c)
			}
			b.pubOwner.set(fmt.Sprintf("pub%d", c), c)
		}
		// One batch of engine answers, as a Ready holds them.
		var batch []msg.Msg
		want := map[ClientID][]msg.Msg{}
		var ticks [5]tick.Tick
		seq := map[ClientID]uint64{}
		for range rng.IntN(600) {
			c := ClientID(1 + rng.IntN(4))
			name := []msg.SubID{"a", "b"}[rng.IntN(2)]
			if rng.IntN(8) == 0 { // most deliveries go on to the same subscription
				name = "b"
			} else if rng.IntN(2) == 0 {
				name = "a"
			}
			full := b.engineSub(c, name)
			var m, w msg.Msg
			switch k := rng.IntN(40); {
			case k < 30:
				ticks[c]++
				size := 1 + rng.IntN(3000)
				if rng.IntN(50) == 0 {
					size = RunBytesMax + 1 // travels alone
				}
				ev := msg.NewEvent("P1", ticks[c], "p", uint64(ticks[c]), "a.b", msg.Props{}, make([]byte, size))
				m, w = &msg.Delivery{Sub: full, Event: ev}, &msg.Delivery{Sub: name, Event: ev}
			case k < 32:
				m, w = msg.Gap{Sub: full, Pubend: "P1", From: ticks[c], To: ticks[c] + 3}, msg.Gap{Sub: name, Pubend: "P1", From: ticks[c], To: ticks[c] + 3}
				ticks[c] += 3
			case k < 34:
				m, w = msg.Progress{Sub: full, Token: msg.Token{"P1": ticks[c]}}, msg.Progress{Sub: name, Token: msg.Token{"P1": ticks[c]}}
			case k < 39:
				seq[c]++
				ticks[c]++
				a := &msg.PubAck{Pubend: "P1", Publisher: fmt.Sprintf("pub%d", c), Seq: seq[c], Tick: ticks[c]}
				m, w = a, a
			default:
				m, w = msg.SubRejected{Sub: full, Reason: "x"}, msg.SubRejected{Sub: name, Reason: "x"}
			}
			batch = append(batch, m)
			want[c] = append(want[c], w)
		}
		b.toClients(batch)
		for c := range reads {
			got, exp := expand(rec.got[c]), expand(want[c])
			if !slices.Equal(got, exp) {
				t.Fatalf("round %d, connection %d (%+v):\n got %v\nwant %v", round, c, reads[c], got, exp)
			}
			// Runs only where the connection reads them, within the
			// bounds, never a run of one, and never two runs of one
			// subscription back to back that would have fitted in one.
			var prev *msg.DeliveryRun
			for _, m := range rec.got[c] {
				r, ok := m.(*msg.DeliveryRun)
				if !ok {
					prev = nil
					continue
				}
				if !reads[c].DeliveryRuns {
					t.Fatalf("round %d: connection %d reads no runs and was sent %v", round, c, r)
				}
				bytes := 0
				for _, ev := range r.Events {
					bytes += ev.Size()
				}
				if len(r.Events) < 2 || len(r.Events) > RunEventsMax || bytes > RunBytesMax {
					t.Fatalf("round %d: a run of %d events and %d bytes", round, len(r.Events), bytes)
				}
				if prev != nil && prev.Sub == r.Sub && len(prev.Events) < RunEventsMax && len(r.Events) > 0 {
					pb := 0
					for _, ev := range prev.Events {
						pb += ev.Size()
					}
					if pb+r.Events[0].Size() <= RunBytesMax {
						t.Fatalf("round %d: two runs of %s back to back that fit in one", round, r.Sub)
					}
				}
				prev = r
			}
		}
		if b.deliveries.open != 0 {
			t.Fatalf("round %d: %d runs left open after the batch", round, b.deliveries.open)
		}
		for c, s := range b.sessions {
			if s.drun != 0 {
				t.Fatalf("round %d: connection %d still marks an open run", round, c)
			}
		}
	}
}
