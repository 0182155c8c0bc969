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
	})
}
