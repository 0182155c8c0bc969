package member_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/aerie-mq/aerie/internal/member"
	"github.com/aerie-mq/aerie/internal/tick"
)

// TestChurn: frequent shutdown and startup of members [001 "a membership
// service that can handle frequent shutdown and startup of nodes"]: six
// brokers, a random crash, leave or restart every 100–700 ms for 10 s, with
// message loss; every installed view keeps the invariants. When the churn
// stops, every broker that is down starts again (as the simulator's healing
// does: a majority lost at once keeps the survivors fenced until enough of
// its brokers come back), and all members agree on one view of exactly
// themselves.
func TestChurn(t *testing.T) {
	seeds := simSeeds()
	brokers := []string{"a", "b", "c", "d", "e", "f"}
	for seed := uint64(1); seed <= seeds; seed++ {
		cfg := defaultSim()
		cfg.Loss = 0.05
		cfg.SuspectFirst = seed%2 == 0
		w := newWorld(t, seed, cfg)
		for _, b := range brokers {
			w.at(0, func() { w.start(b, brokers...) })
		}
		at := 2 * time.Second
		for at < 12*time.Second {
			at += time.Duration(100+w.rng.IntN(600)) * time.Millisecond
			b := brokers[w.rng.IntN(len(brokers))]
			kind := w.rng.IntN(3)
			w.at(tick.Time(0).Add(at), func() { w.churn(b, kind, brokers) })
		}
		w.at(tick.Time(0).Add(at+100*time.Millisecond), func() {
			for _, b := range brokers {
				if n := w.cur[b]; n == nil || !n.up {
					w.start(b, brokers...)
				}
			}
		})
		w.runUntil(tick.Time(0).Add(at + 6*time.Second))
		w.checkConverged()
		if t.Failed() {
			t.Fatalf("seed %d: %d faults\n%s%s", seed, w.faults, w.trace(), w.describe())
		}
	}
}

// churn applies one fault to b, keeping at least one member running so the
// cluster is never restarted from nothing.
func (w *world) churn(b string, kind int, seeds []string) {
	n := w.cur[b]
	if n == nil || !n.up {
		w.start(b, seeds...)
		return
	}
	if len(w.running()) == 1 {
		return // never restart the whole cluster: view ids would start over
	}
	switch kind {
	case 0:
		w.crash(b)
	case 1:
		w.leave(b)
	default:
		w.crash(b)
		w.start(b, seeds...)
	}
}

func (w *world) running() []*simNode {
	var out []*simNode
	for _, n := range w.sorted() {
		if n.up {
			out = append(out, n)
		}
	}
	return out
}

// TestNamesAndCodec: node names, message and metadata encodings round-trip;
// bad input is refused with the package's sentinel errors.
func TestNamesAndCodec(t *testing.T) {
	for _, tc := range []struct {
		name string
		want member.ID
		ok   bool
	}{
		{"p1/1f", member.ID{Broker: "p1", BootNonce: 0x1f}, true},
		{"a/b/ff", member.ID{Broker: "a/b", BootNonce: 0xff}, true},
		{"p1", member.ID{}, false},
		{"/1", member.ID{}, false},
		{"p1/", member.ID{}, false},
		{"p1/xyz", member.ID{}, false},
	} {
		got, err := member.ParseName(tc.name)
		if tc.ok != (err == nil) || got != tc.want {
			t.Errorf("ParseName(%q) = %v, %v", tc.name, got, err)
		}
		if tc.ok && got.Name() != tc.name {
			t.Errorf("%v.Name() = %q, want %q", got, got.Name(), tc.name)
		}
		if !tc.ok && !isErr(err, member.ErrBadName) {
			t.Errorf("ParseName(%q): error %v does not wrap ErrBadName", tc.name, err)
		}
	}
	meta := metaFor("p1")
	v := member.View{ID: 7, Members: []member.Member{{ID: member.ID{Broker: "p1", BootNonce: 3}, Meta: meta}},
		Crashed: []member.ID{{Broker: "x", BootNonce: 1}}}
	m, err := member.DecodeMessage(member.Message{Kind: member.Announce, View: &v}.Encode())
	if err != nil || m.View.String() != v.String() || m.View.Crashed[0] != v.Crashed[0] || m.View.Members[0].Meta.Addr("broker") != meta.Addr("broker") {
		t.Errorf("round trip: %+v, %v", m, err)
	}
	for _, bad := range []string{"", "{", `{"k":9}`, `{"k":1}`, `{"k":1,"v":{"id":1}}`} {
		if _, err := member.DecodeMessage([]byte(bad)); !isErr(err, member.ErrBadMessage) {
			t.Errorf("DecodeMessage(%q) = %v, want ErrBadMessage", bad, err)
		}
	}
	got, err := member.DecodeMeta(member.EncodeMeta(meta))
	if err != nil || got.Cell != meta.Cell || got.Addr("broker") != meta.Addr("broker") {
		t.Errorf("meta round trip: %+v, %v", got, err)
	}
	if _, err := member.DecodeMeta([]byte("{")); !isErr(err, member.ErrBadMessage) {
		t.Errorf("DecodeMeta: %v", err)
	}
	mb := member.New(member.Config{})
	if err := mb.Step(0, nil); !isErr(err, member.ErrBadInput) {
		t.Errorf("Step(nil) = %v, want ErrBadInput", err)
	}
	_ = fmt.Sprint()
}
