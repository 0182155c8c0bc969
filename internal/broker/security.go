package broker

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"sync"
	"time"

	"github.com/aerie-mq/aerie/internal/auth"
	"github.com/aerie-mq/aerie/internal/pki"
	"github.com/aerie-mq/aerie/internal/transport"
	"github.com/aerie-mq/aerie/internal/wire"
)

// AuthFailDelay is how long a broker waits before refusing bad
// credentials: a password guesser gets a few tries per second per
// connection, and every failure is counted (Status.AuthFailures).
const AuthFailDelay = 250 * time.Millisecond

// tlsServer runs the server side of the TLS handshake on nc, when TLS is
// on (cfg not nil). A plain client that reached a TLS port is told so in a
// Goodbye it can read, written in clear.
func tlsServer(ctx context.Context, nc net.Conn, cfg *tls.Config) (net.Conn, error) {
	if cfg == nil {
		return nc, nil
	}
	tc := tls.Server(nc, cfg)
	if err := tc.HandshakeContext(ctx); err != nil {
		var rec tls.RecordHeaderError
		if errors.As(err, &rec) && rec.Conn != nil {
			transport.Refuse(rec.Conn, "this port speaks TLS: connect with TLS (--tls-ca)")
			return nil, fmt.Errorf("TLS handshake: the peer does not speak TLS: %w", err)
		}
		nc.Close()
		return nil, fmt.Errorf("TLS handshake: %w", err)
	}
	return tc, nil
}

// tlsClient runs the client side of the TLS handshake towards neighbour
// peer, when TLS is on.
func (n *Node) tlsClient(ctx context.Context, nc net.Conn, peer string) (net.Conn, error) {
	if n.opts.TLS == nil {
		return nc, nil
	}
	tc := tls.Client(nc, n.opts.TLS.Dialer(peer))
	if err := tc.HandshakeContext(ctx); err != nil {
		nc.Close()
		return nil, fmt.Errorf("TLS handshake: %w", err)
	}
	return tc, nil
}

// checkPeerName: over TLS, the certificate of a peer on the broker port
// must name the broker id it claims in its Hello.
func checkPeerName(nc net.Conn, id string) error {
	tc, ok := nc.(*tls.Conn)
	if !ok {
		return nil
	}
	return pki.PeerName(tc.ConnectionState(), id)
}

// authenticate runs the client's authentication step after the Hellos
// and returns the permissions of its user (nil: the network has no
// users), or the reason it was refused, already sent to the client. A
// client of the version before Auth cannot authenticate: it gets in only
// when there are no users.
func (n *Node) authenticate(ctx context.Context, c *transport.Conn, r *wire.Reader) (*auth.Perms, string, error) {
	users := n.opts.Users
	if c.Peer.Version < 4 {
		if users == nil {
			return nil, "", nil
		}
		return nil, "authentication required", fmt.Errorf("client speaks protocol version %d, which has no authentication", c.Peer.Version)
	}
	a, err := transport.ReadAuth(ctx, c, r)
	if err != nil {
		return nil, "protocol error: credentials (Auth) expected after the Hello", err
	}
	if users == nil {
		return nil, "", c.Welcome(ctx, "")
	}
	if a.User == "" {
		if perms := users.Anonymous(); perms != nil { // [anonymous]
			return perms, "", c.Welcome(ctx, "")
		}
		return nil, "authentication required: this broker has users; connect with a user name and password", errors.New("no credentials")
	}
	perms, err := users.Authenticate(a.User, a.Password)
	if err != nil {
		n.authFailures.Add(1)
		select { // slow down a guesser; not synchronisation
		case <-time.After(AuthFailDelay):
		case <-ctx.Done():
		}
		return nil, auth.ErrFailed.Error(), fmt.Errorf("bad user name or password (user %q)", a.User)
	}
	return perms, "", c.Welcome(ctx, a.User)
}

// failLog logs failed handshakes at most once per source address per
// interval: the first failure of a source at once, the ones after it
// within the interval counted and reported, with the last reason, by the
// first failure after the interval. A flood of bad connections costs a
// line per source per interval, never a line per connection.
type failLog struct {
	log      *slog.Logger
	interval time.Duration
	now      func() time.Time

	mu      sync.Mutex
	sources map[string]*failSource
}

type failSource struct {
	since      time.Time // when the current interval began
	suppressed int
}

// maxFailSources bounds the sources remembered: past it, sources whose
// interval is over are forgotten first, then all of them.
const maxFailSources = 4096

func newFailLog(log *slog.Logger, interval time.Duration) *failLog {
	return &failLog{log: log, interval: interval, now: time.Now, sources: map[string]*failSource{}}
}

// fail records one failed handshake from addr (host:port); what is a
// short description ("client handshake failed").
func (f *failLog) fail(addr, what string, err error) {
	host, _, e := net.SplitHostPort(addr)
	if e != nil {
		host = addr
	}
	now := f.now()
	f.mu.Lock()
	s := f.sources[host]
	if s != nil && now.Sub(s.since) < f.interval {
		s.suppressed++
		f.mu.Unlock()
		return
	}
	suppressed := 0
	if s != nil {
		suppressed = s.suppressed
	}
	if len(f.sources) >= maxFailSources {
		for h, old := range f.sources {
			if now.Sub(old.since) >= f.interval {
				delete(f.sources, h)
			}
		}
		if len(f.sources) >= maxFailSources {
			clear(f.sources)
		}
	}
	f.sources[host] = &failSource{since: now}
	f.mu.Unlock()
	if suppressed > 0 {
		f.log.Warn(what, "source", host, "err", err, "failures_not_logged", suppressed, "interval", f.interval)
	} else {
		f.log.Warn(what, "source", host, "err", err)
	}
}
