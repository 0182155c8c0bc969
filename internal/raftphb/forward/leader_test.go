package forward

import (
	"slices"
	"testing"

	"github.com/aerie-mq/aerie/internal/shell"
)

// A Leader opens a session for a stream at its first publish taken, ends
// it at the member's Goodbye, drops a member's sessions with its link,
// and, when it loses its shell, refuses the rest of every stream it took
// and names them; a stream refused once stays refused.
func TestLeaderStreams(t *testing.T) {
	l := NewLeader(0)
	next := shell.ClientID(0)
	newID := func() shell.ClientID { next++; return next }
	a1, a2, b1 := Key{Peer: "a", Stream: 1}, Key{Peer: "a", Stream: 2}, Key{Peer: "b", Stream: 1}
	if _, _, ok := l.Publish(a1, "c", 1, false, false, newID); ok {
		t.Fatal("took a publish while not serving")
	}
	if _, _, ok := l.Publish(a1, "c", 2, true, false, newID); ok {
		t.Fatal("took the rest of a stream it refused")
	}
	l.Serve()
	c, open, ok := l.Publish(a2, "c", 1, true, false, newID)
	if !ok || !open || c != 1 {
		t.Fatalf("first publish of a new stream: session %d, open %v, taken %v", c, open, ok)
	}
	if c2, open, ok := l.Publish(a2, "c", 2, true, false, newID); !ok || open || c2 != c {
		t.Fatalf("second publish: session %d, open %v, taken %v; want session %d", c2, open, ok, c)
	}
	if k, ok := l.Stream(c); !ok || k != a2 {
		t.Fatalf("session %d answers stream %v (%v), want %v", c, k, ok, a2)
	}
	d, _, _ := l.Publish(b1, "d", 1, true, false, newID)
	if gone := l.PeerDown("a"); !slices.Equal(gone, []shell.ClientID{c}) {
		t.Fatalf("a's link down closes sessions %v, want [%d]", gone, c)
	}
	if lost := l.Lost(); !slices.Equal(lost, []Key{b1}) || l.Len() != 0 {
		t.Fatalf("losing the shell names streams %v (%d sessions left), want [%v]", lost, l.Len(), b1)
	}
	l.Serve()
	if _, _, ok := l.Publish(b1, "d", 2, true, false, newID); ok {
		t.Fatal("took more of a stream whose publishes a lost shell held")
	}
	if _, ok := l.End(b1); ok {
		t.Fatalf("ended stream %v had a session after the shell was lost (was %d)", b1, d)
	}
	if _, _, ok := l.Publish(b1, "d", 3, true, false, newID); !ok {
		t.Fatal("a stream number used again after its end is refused")
	}
}

// The refusals of a member's streams do not outlive the link they came
// on: a member whose link keeps failing before its streams' ends
// (ClientGone) arrive leaves none behind once the link is gone, however
// many it had; the streams of another member keep theirs, and so do the
// streams of a member of protocol version 13, which outlive a link.
func TestLeaderRefusalsFreedWithTheirLink(t *testing.T) {
	l := NewLeader(0)
	next := shell.ClientID(0)
	newID := func() shell.ClientID { next++; return next }
	const links, streams = 50, 40
	for link := range links {
		for s := range streams {
			k := Key{Peer: "a", Stream: uint64(link*streams + s + 1)}
			if _, _, ok := l.Publish(k, "c", 1, false, false, newID); ok {
				t.Fatal("took a publish while not serving")
			}
		}
		if got := l.Refused(); got != streams {
			t.Fatalf("link %d: %d streams refused, want %d", link, got, streams)
		}
		l.PeerDown("a") // the ends of those streams were lost with it
		if got := l.Refused(); got != 0 {
			t.Fatalf("link %d gone: %d refusals left, want none", link, got)
		}
	}
	old, other := Key{Peer: "v13", Stream: 1}, Key{Peer: "b", Stream: 1}
	l.Publish(old, "c", 5, false, true, newID)
	l.Publish(other, "d", 1, false, false, newID)
	l.PeerDown("v13")
	l.PeerDown("a")
	if got := l.Refused(); got != 2 {
		t.Fatalf("%d refusals left, want b's and the version 13 member's", got)
	}
	l.Serve()
	if _, _, ok := l.Publish(old, "c", 6, true, true, newID); ok {
		t.Fatal("a version 13 member's stream taken past its refusal after its link went")
	}
	if _, _, ok := l.Publish(other, "d", 2, true, false, newID); ok {
		t.Fatal("another member's refused stream taken after a link it did not use went")
	}
	l.PeerRestarted("v13")
	l.PeerDown("b")
	if got := l.Refused(); got != 0 {
		t.Fatalf("%d refusals left after every member's link went or it restarted, want none", got)
	}
}

// The refusals of a member of protocol version 13 outlive its link, as
// its streams do, but not by more than the Leader's linger: counted in
// ticks while the link stays down, restarted by a link up or a publish
// from it, they go at linger ticks; however many links come and go with
// streams refused on each, the count left stays at those of the last.
func TestLeaderVersion13RefusalsLinger(t *testing.T) {
	const linger = 10
	l := NewLeader(linger)
	newID := func() shell.ClientID { return 1 }
	refuse := func(stream uint64) {
		if _, _, ok := l.Publish(Key{Peer: "v13", Stream: stream}, "c", 1, false, true, newID); ok {
			t.Fatal("took a publish while not serving")
		}
	}
	tick := func(n int) {
		for range n {
			l.Tick()
		}
	}
	refuse(1)
	l.PeerDown("v13")
	tick(linger - 1)
	if got := l.Refused(); got != 1 {
		t.Fatalf("%d ticks after the link went: %d refusals, want 1 (it lingers %d)", linger-1, got, linger)
	}
	l.PeerUp("v13") // back before linger: kept, and the count starts again
	tick(5 * linger)
	if got := l.Refused(); got != 1 {
		t.Fatalf("while its link is up: %d refusals, want 1", got)
	}
	l.PeerDown("v13")
	tick(linger / 2)
	refuse(2) // a publish came: a link is up
	tick(linger)
	if got := l.Refused(); got != 2 {
		t.Fatalf("after a publish on a new link: %d refusals, want 2", got)
	}
	l.PeerDown("v13")
	tick(linger)
	if got := l.Refused(); got != 0 {
		t.Fatalf("%d ticks after the link went: %d refusals left, want none", linger, got)
	}

	// Links that each carry streams refused and lose their ends: at most
	// one link's worth is kept, and none once the last is down for linger.
	const links, streams = 200, 30
	for link := range links {
		for s := range streams {
			refuse(uint64(1000 + link*streams + s))
		}
		if got := l.Refused(); got > 2*streams {
			t.Fatalf("link %d: %d refusals kept, want at most %d", link, got, 2*streams)
		}
		l.PeerDown("v13")
		tick(linger)
	}
	if got := l.Refused(); got != 0 {
		t.Fatalf("after %d links: %d refusals left, want none", links, got)
	}
	if len(l.bySeq) != 0 || len(l.unlinked) != 0 {
		t.Fatalf("per-member state left: bySeq %v, unlinked %v", l.bySeq, l.unlinked)
	}

	// Linger 0 keeps them until the member's next incarnation.
	l = NewLeader(0)
	refuse(1)
	l.PeerDown("v13")
	tick(1000)
	if got := l.Refused(); got != 1 {
		t.Fatalf("linger 0: %d refusals after 1000 ticks, want 1", got)
	}
	l.PeerRestarted("v13")
	if got := l.Refused(); got != 0 {
		t.Fatalf("after a restart: %d refusals, want none", got)
	}
}
