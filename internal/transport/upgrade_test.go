package transport

import (
	"context"
	"net"
	"testing"
	"time"

	"github.com/aerie-mq/aerie/internal/msg"
	"github.com/aerie-mq/aerie/internal/wire"
)

// shake runs Handshake with dialer on one end of a pipe and Accept as
// listener (with opts) on the other.
func shake(t *testing.T, dialer, listener msg.Hello, opts Options) (dialed, accepted *Conn, derr, aerr error) {
	t.Helper()
	a, b := net.Pipe()
	t.Cleanup(func() { a.Close(); b.Close() })
	done := make(chan struct{})
	go func() {
		defer close(done)
		accepted, _, aerr = Accept(context.Background(), a, listener, opts)
		if aerr != nil {
			a.Close()
		}
	}()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	dialed, _, derr = Handshake(ctx, b, dialer, Options{})
	<-done
	return dialed, accepted, derr, aerr
}

// TestAcceptAnswersNewerPeersInItsVersion: a peer announcing a later
// version than the listener's is answered in the listener's, and both
// sides then speak it (the newer side sends nothing the older lacks).
func TestAcceptAnswersNewerPeersInItsVersion(t *testing.T) {
	for _, role := range []msg.Role{msg.RoleBroker, msg.RoleClient} {
		own := wire.MinBrokerVersion
		listener := msg.Hello{Version: own, Role: msg.RoleBroker, ID: "b1"}
		dialed, accepted, derr, aerr := shake(t, msg.Hello{Version: wire.Version + 3, Role: role, ID: "s1"}, listener, Options{})
		if derr != nil || aerr != nil {
			t.Fatalf("role %d: dialer %v, listener %v", role, derr, aerr)
		}
		if dialed.Peer.Version != own || accepted.Peer.Version != own {
			t.Fatalf("role %d: the dialer speaks %d and the listener %d with each other, want both %d", role, dialed.Peer.Version, accepted.Peer.Version, own)
		}
	}
}

// TestRefusalByAnOlderListenerNamesItsVersion: a listener of version 12
// or earlier (stood in for by Options.AsOlder) refused a later version in
// words the dialer reads its version from; OlderPeer then says to dial
// again in it, but not below the versions the dialer speaks.
func TestRefusalByAnOlderListenerNamesItsVersion(t *testing.T) {
	old := wire.MinBrokerVersion
	listener := msg.Hello{Version: old, Role: msg.RoleBroker, ID: "b1"}
	_, _, derr, aerr := shake(t, msg.Hello{Version: wire.Version + 1, Role: msg.RoleBroker, ID: "s1"}, listener, Options{AsOlder: old})
	if aerr == nil || derr == nil {
		t.Fatalf("an older listener took a newer peer: dialer %v, listener %v", derr, aerr)
	}
	if got := OlderPeer(derr, old, wire.Version+1); got != old {
		t.Fatalf("OlderPeer(%v) = %d, want %d", derr, got, old)
	}
	if got := OlderPeer(derr, old+1, wire.Version+1); got != 0 {
		t.Fatalf("OlderPeer below the dialer's oldest version = %d, want 0", got)
	}
	// Dialed again in its version, the older listener takes the peer.
	dialed, _, derr, aerr := shake(t, msg.Hello{Version: old, Role: msg.RoleBroker, ID: "s1"}, listener, Options{AsOlder: old})
	if derr != nil || aerr != nil || dialed.Peer.Version != old {
		t.Fatalf("dialed again in version %d: dialer %v, listener %v", old, derr, aerr)
	}
}

// TestHandshakeRefusesAnAnswerAboveItsHello: a listener must not answer
// in a later version than the dialer announced.
func TestHandshakeRefusesAnAnswerAboveItsHello(t *testing.T) {
	a, b := net.Pipe()
	defer a.Close()
	defer b.Close()
	go func() { // a listener that answers in too late a version, by hand
		wire.NewReader(a, 0).Next()
		f, _ := wire.AppendFrame(nil, msg.Hello{Version: wire.Version, Role: msg.RoleBroker, ID: "b1"})
		a.Write(f)
		wire.NewReader(a, 0).Next() // the Goodbye
	}()
	_, _, err := Handshake(context.Background(), b, msg.Hello{Version: wire.MinBrokerVersion, Role: msg.RoleBroker, ID: "s1"}, Options{})
	if err == nil {
		t.Fatal("an answer in a later version than asked was taken")
	}
}
