package forward

import (
	"slices"
	"testing"

	"github.com/aerie-mq/aerie/internal/shell"
)

// TestForwardedPublishesStayAPrefix: what a leader takes of one forwarded
// client, as the broker's forwardMsg decides it (Refusals.Take: of each stream a
// prefix, nothing more once one publish of it was refused), is always the
// client's publishes in the order it sent them, whatever the member that
// forwards resends in its next streams.
func TestForwardedPublishesStayAPrefix(t *testing.T) {
	type pub struct {
		stream  uint64
		seq     uint64
		serving bool
	}
	run := func(r Refusals, stream []pub, bySeq bool) []uint64 {
		var logged []uint64
		for _, p := range stream {
			if !r.Take(Key{Peer: "p2", Stream: p.stream}, "c", p.seq, p.serving, bySeq) {
				continue
			}
			if !slices.Contains(logged, p.seq) { // the pubend's deduplication
				logged = append(logged, p.seq)
			}
		}
		return logged
	}
	// TestKill9ReplicatedPHBEachMember's first catch: a member forwards
	// 1–3 to a member elected but not serving yet, which refuses them; it
	// serves before 4 and 5 arrive (sent before the member heard of the
	// refusal). Then the member's resend.
	stream := []pub{{1, 1, false}, {1, 2, false}, {1, 3, false}, {1, 4, true}, {1, 5, true},
		{2, 1, true}, {2, 2, true}, {2, 3, true}, {2, 4, true}, {2, 5, true}, {2, 6, true}}
	if got := run(Refusals{}, stream, false); !slices.Equal(got, []uint64{1, 2, 3, 4, 5, 6}) {
		t.Fatalf("logged %v, want 1–6 in order", got)
	}
	// A member of version 13 resends in the same stream: taken back from
	// the resend, a seq at or below the highest refused.
	for i := range stream {
		stream[i].stream = 1
	}
	if got := run(Refusals{}, stream, true); !slices.Equal(got, []uint64{1, 2, 3, 4, 5, 6}) {
		t.Fatalf("from a member of version 13: logged %v, want 1–6 in order", got)
	}
	if got := run(Refusals{}, stream, false); len(got) != 0 {
		t.Fatalf("a refused stream taken back by seq from a member of version 14: logged %v", got)
	}

	// The lost-member scenario's catch (docs/known-issues/forward-reorder.md,
	// third cause): the resend itself is refused in part, the leader
	// starting to serve in its middle. Up to 2026-11 the leader took 3–5
	// of the second stream as the start of a resend (at or below the
	// highest seq refused), and the third stream's 1–2 after them.
	stream = []pub{{1, 1, false}, {1, 2, false}, {1, 3, false}, {1, 4, false}, {1, 5, false},
		{2, 1, false}, {2, 2, false}, {2, 3, true}, {2, 4, true}, {2, 5, true},
		{3, 1, true}, {3, 2, true}, {3, 3, true}, {3, 4, true}, {3, 5, true}}
	if got := run(Refusals{}, stream, false); !slices.Equal(got, []uint64{1, 2, 3, 4, 5}) {
		t.Fatalf("a resend refused in part: logged %v, want 1–5 in order", got)
	}

	// A lost shell held 1–3 (unacked): the member serves again before the
	// forwarding member heard, and 4 arrives first in the old stream.
	r := Refusals{}
	RefuseAll(r, map[Key]shell.ClientID{{Peer: "p2", Stream: 1}: 1})
	stream = []pub{{1, 4, true}, {2, 1, true}, {2, 2, true}, {2, 3, true}, {2, 4, true}, {2, 5, true}}
	if got := run(r, stream, false); !slices.Equal(got, []uint64{1, 2, 3, 4, 5}) {
		t.Fatalf("after a lost shell: logged %v, want 1–5 in order", got)
	}

	// Another stream of the same member, and another member, are not held
	// back by this one's refusal; a new incarnation of the member forgets
	// its refusals.
	r = Refusals{}
	k := Key{Peer: "p2", Stream: 7}
	r.Take(k, "c", 3, false, false)
	if !r.Take(Key{Peer: "p2", Stream: 8}, "d", 10, true, false) || !r.Take(Key{Peer: "p3", Stream: 7}, "c", 10, true, false) {
		t.Fatal("a refusal held back another stream")
	}
	if r.Take(k, "c", 4, true, false) {
		t.Fatal("a publish after a refused one of its stream was taken")
	}
	r.ForgetPeer("p2")
	if !r.Take(k, "c", 5, true, false) {
		t.Fatal("a refusal outlived the incarnation of its member")
	}
}
