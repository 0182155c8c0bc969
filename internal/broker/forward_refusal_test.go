package broker

import (
	"slices"
	"testing"

	"github.com/aerie-mq/aerie/internal/shell"
)

// TestForwardedPublishesStayAPrefix: what a leader admits of one
// forwarded client's stream, as forwardMsg decides it (fwdRefusals.take:
// refused while not serving, and then until the member's resend), is
// always the client's publishes in the order it sent them. The stream is the one
// TestKill9ReplicatedPHBEachMember caught out of order: a member forwards
// 1–3 to a member elected but not serving yet, which refuses them; it
// serves before 4 and 5 arrive (sent before the member heard of the
// refusal), which it used to log, and the resent 1–3 after them.
func TestForwardedPublishesStayAPrefix(t *testing.T) {
	k := fwdKey{peer: "p2", client: 7}
	type pub struct {
		seq     uint64
		serving bool
	}
	run := func(r fwdRefusals, stream []pub) []uint64 {
		var logged []uint64
		for _, p := range stream {
			if !r.take(k, "c", p.seq, p.serving) {
				continue
			}
			if !slices.Contains(logged, p.seq) { // the pubend's deduplication
				logged = append(logged, p.seq)
			}
		}
		return logged
	}
	stream := []pub{{1, false}, {2, false}, {3, false}, {4, true}, {5, true}, // refused, then serving
		{1, true}, {2, true}, {3, true}, {4, true}, {5, true}, {6, true}} // the resend, then a new one
	if got := run(fwdRefusals{}, stream); !slices.Equal(got, []uint64{1, 2, 3, 4, 5, 6}) {
		t.Fatalf("logged %v, want 1–6 in order", got)
	}

	// A lost shell held 1–3 (unacked): the member serves again before it
	// heard, and 4 arrives first.
	r := fwdRefusals{}
	r.refuseAll(map[fwdKey]shell.ClientID{k: 1})
	stream = []pub{{4, true}, {1, true}, {2, true}, {3, true}, {4, true}, {5, true}}
	if got := run(r, stream); !slices.Equal(got, []uint64{1, 2, 3, 4, 5}) {
		t.Fatalf("after a lost shell: logged %v, want 1–5 in order", got)
	}
	if len(r) != 0 {
		t.Fatalf("refusals left after the resend: %v", r)
	}

	// Another client of the same member, and another member, are not held
	// back by this one's refusal; a link down forgets the member's.
	r = fwdRefusals{}
	r.refuse(k, "c", 3)
	if !r.admit(fwdKey{peer: "p2", client: 8}, "d", 10) || !r.admit(fwdKey{peer: "p3", client: 7}, "c", 10) {
		t.Fatal("a refusal held back another client")
	}
	if r.admit(k, "c", 4) {
		t.Fatal("a publish after a refused one was admitted before the resend")
	}
	r.forgetPeer("p2")
	if !r.admit(k, "c", 5) {
		t.Fatal("a refusal outlived the link to its member")
	}
}
