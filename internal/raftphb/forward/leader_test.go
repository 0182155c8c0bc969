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
	l := NewLeader()
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
