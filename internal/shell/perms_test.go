package shell_test

import (
	"testing"

	"github.com/aerie-mq/aerie/internal/auth"
	"github.com/aerie-mq/aerie/internal/msg"
)

// TestPermissions: a client session of a user publishes and subscribes
// only within its patterns; a refused request never reaches the engine
// (nothing is logged, no subscription is made) and its refusal names the
// topic or the pattern.
func TestPermissions(t *testing.T) {
	b, f := phb(t)
	perms, err := auth.NewPerms("bob", []string{"status.>"}, []string{"status.*"})
	if err != nil {
		t.Fatal(err)
	}
	b.ClientUpAs(1, perms)
	b.ClientUp(2) // no users: everything
	b.ClientRequest(1, msg.Publish{Publisher: "bob", Seq: 1, Topic: "orders.eu"})
	b.ClientRequest(1, msg.Subscribe{Sub: "s1", Pattern: "status.>"})
	b.ClientRequest(1, msg.Subscribe{Sub: "s2", Pattern: ">"})
	b.Drain()
	if len(f.appends) != 0 {
		t.Fatalf("a refused publish was logged: %v", f.appends)
	}
	got := f.clients[1]
	want := []msg.Msg{
		msg.PubReject{Publisher: "bob", Seq: 1, Reason: "not authorized to publish to orders.eu"},
		msg.SubRejected{Sub: "s1", Reason: "not authorized to subscribe to status.>"},
		msg.SubRejected{Sub: "s2", Reason: "not authorized to subscribe to >"},
	}
	if len(got) != len(want) {
		t.Fatalf("client got %v, want %v", got, want)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("answer %d: %v, want %v", i, got[i], want[i])
		}
	}
	// Allowed requests go through, for the user and for a client without one.
	f.clients[1] = nil
	b.ClientRequest(1, msg.Subscribe{Sub: "s3", Pattern: "status.eu"})
	b.ClientRequest(1, msg.Publish{Publisher: "bob", Seq: 2, Topic: "status.eu.x"})
	b.ClientRequest(2, msg.Publish{Publisher: "other", Seq: 1, Topic: "orders.eu"})
	b.Drain()
	if started := ofType[msg.SubStarted](f.clients[1]); len(started) != 1 || started[0].Sub != "s3" {
		t.Fatalf("allowed subscription: %v", f.clients[1])
	}
	if len(f.appends) != 1 || len(f.appends[0]) != 2 {
		t.Fatalf("allowed publishes: %v", f.appends)
	}
}
