package transport

import (
	"context"
	"io"
	"net"
	"testing"
	"time"

	"github.com/aerie-mq/aerie/internal/msg"
	"github.com/aerie-mq/aerie/internal/wire"
)

// FuzzHandshake: whatever a peer sends first, Handshake returns a checked
// connection or an error, promptly, and never panics.
func FuzzHandshake(f *testing.F) {
	good, err := wire.AppendFrame(nil, msg.Hello{Version: wire.Version, Role: msg.RoleBroker, ID: "b", Incarnation: 2})
	if err != nil {
		f.Fatal(err)
	}
	f.Add(good)
	old, _ := wire.AppendFrame(nil, msg.Hello{Version: wire.Version - 1, Role: msg.RoleClient, ID: "c"})
	f.Add(old)
	bye, _ := wire.AppendFrame(nil, msg.Goodbye{Reason: "no"})
	f.Add(bye)
	f.Add(good[:len(good)-1])
	f.Add([]byte{0xff, 0xff, 0xff, 0xff})
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, in []byte) {
		ours, theirs := net.Pipe()
		defer ours.Close()
		go func() {
			defer theirs.Close()
			go io.Copy(io.Discard, theirs) // our Hello, and a Goodbye on refusal
			theirs.Write(in)
		}()
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		c, _, err := Handshake(ctx, ours, msg.Hello{Version: wire.Version, Role: msg.RoleBroker, ID: "a", Incarnation: 1}, Options{})
		if err != nil {
			if c != nil {
				t.Fatalf("Handshake returned a connection and %v", err)
			}
			return
		}
		if err := wire.CheckHello(c.Peer); err != nil {
			t.Fatalf("accepted a hello that does not check: %v: %v", c.Peer, err)
		}
		if c.Peer.Version > wire.Version {
			t.Fatalf("took an answer in version %d to a Hello of version %d", c.Peer.Version, wire.Version)
		}
	})
}

// FuzzAccept: whatever a dialer sends first, Accept either refuses it or
// answers with a Hello in the version both then speak — never above its
// own, never above the dialer's.
func FuzzAccept(f *testing.F) {
	for _, h := range []msg.Hello{
		{Version: wire.Version, Role: msg.RoleBroker, ID: "b", Incarnation: 2},
		{Version: wire.Version + 1, Role: msg.RoleBroker, ID: "newer"},
		{Version: 0xffff, Role: msg.RoleClient, ID: "c"},
		{Version: wire.MinClientVersion, Role: msg.RoleClient, ID: "c"},
		{Version: wire.MinBrokerVersion - 1, Role: msg.RoleBroker, ID: "old"},
	} {
		b, _ := wire.AppendFrame(nil, h)
		f.Add(b)
	}
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, in []byte) {
		ours, theirs := net.Pipe()
		defer ours.Close()
		answer := make(chan msg.Msg, 1)
		go func() {
			defer theirs.Close()
			go func() { // the first frame Accept sends, if any
				m, err := wire.NewReader(theirs, 0).Next()
				if err != nil {
					m = nil
				}
				answer <- m
				io.Copy(io.Discard, theirs)
			}()
			theirs.Write(in)
		}()
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		c, _, err := Accept(ctx, ours, msg.Hello{Version: wire.Version, Role: msg.RoleBroker, ID: "a", Incarnation: 1}, Options{})
		if err != nil {
			return
		}
		ours.Close()
		h, ok := (<-answer).(msg.Hello)
		switch {
		case !ok:
			t.Fatal("accepted without answering with a Hello")
		case h.Version != c.Peer.Version:
			t.Fatalf("answered in version %d but speaks %d with the peer", h.Version, c.Peer.Version)
		case c.Peer.Version > wire.Version:
			t.Fatalf("speaks version %d, above its own %d", c.Peer.Version, wire.Version)
		}
		if err := wire.CheckHello(c.Peer); err != nil {
			t.Fatalf("accepted a hello that does not check: %v: %v", c.Peer, err)
		}
	})
}
