package transport

import (
	"context"
	"errors"
	"fmt"
	"net"
	"time"

	"github.com/aerie-mq/aerie/internal/msg"
	"github.com/aerie-mq/aerie/internal/wire"
)

// RefusedError is a handshake the peer ended with a Goodbye: Reason is the
// peer's own words ("authentication failed", "this port speaks TLS", a
// version mismatch), fit to show a user as it is.
type RefusedError struct {
	Addr   string
	Reason string
	// Version is the version the peer speaks when it refused ours as too
	// new (a listener of version 12 or earlier; wire.RefusingVersion), 0
	// for any other refusal: the dialer may dial again in it.
	Version uint16
}

// refused is the RefusedError for a Goodbye during the handshake.
func refused(addr, reason string) *RefusedError {
	e := &RefusedError{Addr: addr, Reason: reason}
	if v, ok := wire.RefusingVersion(reason); ok {
		e.Version = v
	}
	return e
}

func (e *RefusedError) Error() string {
	return fmt.Sprintf("%s refused the connection: %s", e.Addr, e.Reason)
}

// Accept is the listening side's handshake. Unlike Handshake it reads the
// peer's Hello first, checks it, and only then answers with me: an older
// client (wire.MinClientVersion on) or broker (wire.MinBrokerVersion on)
// is answered with its own version, so that it can read the answer, and
// is sent nothing its version lacks (Conn.Peer.Version says which); a
// newer one is answered with me.Version, which it then speaks
// (wire.Spoken). The deadline of ctx bounds the exchange.
func Accept(ctx context.Context, nc net.Conn, me msg.Hello, opts Options) (*Conn, *wire.Reader, error) {
	opts = opts.withDefaults()
	setDeadline(ctx, nc)
	r := newReader(nc, opts)
	m, err := r.Next()
	if err != nil {
		return nil, nil, fmt.Errorf("transport: read hello from %s: %w", nc.RemoteAddr(), err)
	}
	h, ok := m.(msg.Hello)
	if !ok {
		goodbye(nc, fmt.Sprintf("protocol error: the first frame must be a Hello, not %s", typeName(m)))
		return nil, nil, fmt.Errorf("transport: %s sent %v before hello", nc.RemoteAddr(), m)
	}
	if opts.AsOlder != 0 {
		if err := wire.RefusalAsOlder(h, opts.AsOlder); err != nil {
			goodbye(nc, err.Error())
			return nil, nil, err
		}
	}
	// Both sides speak the lower version: an older client or broker
	// (wire.MinClientVersion, wire.MinBrokerVersion) its own, a newer one
	// ours, as it expects.
	h.Version = wire.Spoken(h.Version, me.Version)
	me.Version = h.Version
	if err := wire.CheckHello(h); err != nil {
		goodbye(nc, err.Error())
		return nil, nil, err
	}
	buf, err := wire.AppendFrame(nil, me)
	if err == nil {
		_, err = nc.Write(buf)
	}
	if err != nil {
		return nil, nil, fmt.Errorf("transport: send hello to %s: %w", nc.RemoteAddr(), err)
	}
	nc.SetDeadline(time.Time{})
	return newConn(nc, h, opts), r, nil
}

// Login is the client's authentication step (protocol version 4), right
// after Handshake and before Run: it sends Auth (user "" when the client
// has no credentials) and waits for the broker's AuthOK, whose user it
// returns. A refusal is a *RefusedError with the broker's reason.
func Login(ctx context.Context, c *Conn, r *wire.Reader, user, password string) (string, error) {
	setDeadline(ctx, c.nc)
	defer c.nc.SetDeadline(time.Time{})
	buf, err := wire.AppendFrame(nil, msg.Auth{User: user, Password: password})
	if err == nil {
		_, err = c.nc.Write(buf)
	}
	if err != nil {
		return "", fmt.Errorf("transport: send credentials to %s: %w", c.RemoteAddr(), err)
	}
	for {
		m, err := r.Next()
		if err != nil {
			return "", fmt.Errorf("transport: authenticate at %s: %w", c.RemoteAddr(), err)
		}
		switch m := m.(type) {
		case msg.Heartbeat:
		case msg.AuthOK:
			return m.User, nil
		case msg.Goodbye:
			return "", &RefusedError{Addr: c.RemoteAddr(), Reason: m.Reason}
		default:
			return "", fmt.Errorf("transport: %s sent %s before answering the credentials", c.RemoteAddr(), typeName(m))
		}
	}
}

// ErrNoAuth: the client's first frame after the Hellos was not an Auth.
var ErrNoAuth = errors.New("transport: the client sent no credentials")

// ReadAuth is the broker's side of Login: the client's next frame, which
// must be an Auth (ErrNoAuth otherwise). The broker then answers with
// Welcome or refuses with CloseWith. The deadline of ctx bounds the wait.
func ReadAuth(ctx context.Context, c *Conn, r *wire.Reader) (msg.Auth, error) {
	setDeadline(ctx, c.nc)
	defer c.nc.SetDeadline(time.Time{})
	for {
		m, err := r.Next()
		if err != nil {
			return msg.Auth{}, fmt.Errorf("transport: read credentials from %s: %w", c.RemoteAddr(), err)
		}
		switch m := m.(type) {
		case msg.Heartbeat:
		case msg.Auth:
			return m, nil
		default:
			return msg.Auth{}, fmt.Errorf("%w (its first frame was %s)", ErrNoAuth, typeName(m))
		}
	}
}

// Welcome answers a client's Auth with AuthOK; call it before Run.
func (c *Conn) Welcome(ctx context.Context, user string) error {
	setDeadline(ctx, c.nc)
	defer c.nc.SetDeadline(time.Time{})
	buf, err := wire.AppendFrame(nil, msg.AuthOK{User: user})
	if err == nil {
		_, err = c.nc.Write(buf)
	}
	if err != nil {
		return fmt.Errorf("transport: answer credentials of %s: %w", c.RemoteAddr(), err)
	}
	return nil
}

func setDeadline(ctx context.Context, nc net.Conn) {
	if dl, ok := ctx.Deadline(); ok {
		nc.SetDeadline(dl)
	} else {
		nc.SetDeadline(time.Now().Add(10 * time.Second))
	}
}

// goodbye tells a peer refused during the handshake why, best effort.
func goodbye(nc net.Conn, reason string) {
	if b, err := wire.AppendFrame(nil, msg.Goodbye{Reason: reason}); err == nil {
		nc.Write(b)
	}
}

// Refuse writes Goodbye{reason} on a connection that has not been through
// any handshake (a plain TCP client at a TLS port), best effort, and
// closes it.
func Refuse(nc net.Conn, reason string) {
	nc.SetWriteDeadline(time.Now().Add(time.Second))
	goodbye(nc, reason)
	nc.Close()
}

func typeName(m msg.Msg) string { return fmt.Sprintf("%T", m)[len("msg."):] }
