package transport

import (
	"context"
	"crypto/tls"
	"errors"
	"io"
	"net"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aerie-mq/aerie/internal/msg"
	"github.com/aerie-mq/aerie/internal/pki"
	"github.com/aerie-mq/aerie/internal/wire"
)

var brokerHello = msg.Hello{Version: wire.Version, Role: msg.RoleBroker, ID: "s1", Incarnation: 7}

// TestAcceptAnswersOlderClientsInTheirVersion: a client of
// wire.MinClientVersion is answered with a Hello of its own version.
func TestAcceptAnswersOlderClientsInTheirVersion(t *testing.T) {
	testAcceptAnswersOlder(t, msg.RoleClient, wire.MinClientVersion)
}

// TestAcceptAnswersOlderBrokersInTheirVersion: a broker of
// wire.MinBrokerVersion (no KnowledgeRun) is answered in its version, so
// both sides know to send it Knowledge frames only.
func TestAcceptAnswersOlderBrokersInTheirVersion(t *testing.T) {
	testAcceptAnswersOlder(t, msg.RoleBroker, wire.MinBrokerVersion)
}

func testAcceptAnswersOlder(t *testing.T, role msg.Role, oldest uint16) {
	for _, v := range []uint16{oldest, wire.Version} {
		a, b := net.Pipe()
		answer := make(chan msg.Msg, 1)
		go func() { // the peer, by hand
			f, _ := wire.AppendFrame(nil, msg.Hello{Version: v, Role: role, ID: "c"})
			b.Write(f)
			m, err := wire.NewReader(b, 0).Next()
			if err != nil {
				m = msg.Goodbye{Reason: err.Error()}
			}
			answer <- m
		}()
		c, _, err := Accept(context.Background(), a, brokerHello, Options{})
		if err != nil {
			t.Fatal(err)
		}
		if c.Peer.Version != v {
			t.Fatalf("peer version %d, want %d", c.Peer.Version, v)
		}
		if h, ok := (<-answer).(msg.Hello); !ok || h.Version != v || h.ID != "s1" {
			t.Fatalf("a peer of role %d and version %d was answered with %v", role, v, h)
		}
		a.Close()
		b.Close()
	}
}

// login runs Handshake and Login on one end and Accept, ReadAuth and then
// decide on the other; it returns what each side saw.
func login(t *testing.T, user, password string, decide func(*Conn, msg.Auth)) (string, error, msg.Auth, error) {
	t.Helper()
	a, b := net.Pipe()
	defer a.Close()
	defer b.Close()
	var got msg.Auth
	var serr error
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		c, r, err := Accept(context.Background(), a, brokerHello, Options{})
		if err != nil {
			serr = err
			return
		}
		got, serr = ReadAuth(context.Background(), c, r)
		if serr == nil {
			decide(c, got)
		}
	}()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	c, r, err := Handshake(ctx, b, msg.Hello{Version: wire.Version, Role: msg.RoleClient, ID: "c"}, Options{})
	if err != nil {
		t.Fatal(err)
	}
	as, lerr := Login(ctx, c, r, user, password)
	wg.Wait()
	return as, lerr, got, serr
}

func TestLogin(t *testing.T) {
	as, err, got, serr := login(t, "alice", "pw", func(c *Conn, a msg.Auth) { c.Welcome(context.Background(), a.User) })
	if err != nil || serr != nil || as != "alice" || got != (msg.Auth{User: "alice", Password: "pw"}) {
		t.Fatalf("login: %q %v; broker saw %v %v", as, err, got, serr)
	}
	_, err, _, _ = login(t, "alice", "bad", func(c *Conn, _ msg.Auth) {
		c.CloseWith(errors.New("bad password"), "authentication failed")
		<-c.Done()
	})
	var ref *RefusedError
	if !errors.As(err, &ref) || ref.Reason != "authentication failed" || !strings.Contains(err.Error(), "refused the connection: authentication failed") {
		t.Fatalf("refused login: %v", err)
	}
}

// TestReadAuthWantsCredentialsFirst: a client whose first frame is not
// an Auth (an older client's request) is told apart.
func TestReadAuthWantsCredentialsFirst(t *testing.T) {
	a, b := net.Pipe()
	defer a.Close()
	defer b.Close()
	go func() { // a client of the version before Auth, by hand
		f, _ := wire.AppendFrame(nil, msg.Hello{Version: wire.MinClientVersion, Role: msg.RoleClient, ID: "old"})
		f, _ = wire.AppendFrame(f, msg.Subscribe{Sub: "s", Pattern: ">"})
		go io.Copy(io.Discard, b)
		b.Write(f)
	}()
	c, r, err := Accept(context.Background(), a, brokerHello, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := ReadAuth(context.Background(), c, r); !errors.Is(err, ErrNoAuth) || !strings.Contains(err.Error(), "Subscribe") {
		t.Fatalf("ReadAuth: %v", err)
	}
}

var fuzzPKI struct {
	once           sync.Once
	server, client *tls.Config
	err            error
}

// tlsPair returns the two ends of a connection that runs TLS, as a broker's
// client port does (the client without a certificate).
func tlsPair(t testing.TB) (server, client net.Conn) {
	fuzzPKI.once.Do(func() {
		dir := filepath.Join(t.TempDir())
		if fuzzPKI.err = pki.WriteDev(dir, []pki.BrokerNames{{ID: "s1"}}, time.Now()); fuzzPKI.err != nil {
			return
		}
		var b *pki.Broker
		if b, fuzzPKI.err = pki.LoadBroker("s1", pki.Files{CA: filepath.Join(dir, "ca.pem"), Cert: filepath.Join(dir, "s1.pem"), Key: filepath.Join(dir, "s1-key.pem")}, time.Now()); fuzzPKI.err != nil {
			return
		}
		fuzzPKI.server = b.Clients()
		if fuzzPKI.client, fuzzPKI.err = pki.Client(pki.ClientFiles{CA: filepath.Join(dir, "ca.pem")}); fuzzPKI.err == nil {
			fuzzPKI.client.ServerName = "s1"
		}
	})
	if fuzzPKI.err != nil {
		t.Fatal(fuzzPKI.err)
	}
	a, b := net.Pipe()
	return tls.Server(a, fuzzPKI.server), tls.Client(b, fuzzPKI.client)
}

// FuzzAcceptAuth: whatever a client sends through TLS after the TLS
// handshake, the broker side's Accept and ReadAuth end promptly with a
// checked Hello and an Auth, or an error, and never panic; a Hello that
// does not check is never accepted.
func FuzzAcceptAuth(f *testing.F) {
	hello, _ := wire.AppendFrame(nil, msg.Hello{Version: wire.Version, Role: msg.RoleClient, ID: "c"})
	auth, _ := wire.AppendFrame(nil, msg.Auth{User: "alice", Password: "pw"})
	old, _ := wire.AppendFrame(nil, msg.Hello{Version: wire.MinClientVersion, Role: msg.RoleClient, ID: "c"})
	sub, _ := wire.AppendFrame(nil, msg.Subscribe{Sub: "s", Pattern: ">"})
	f.Add(append(append([]byte{}, hello...), auth...))
	f.Add(append(append([]byte{}, old...), sub...))
	f.Add(hello)
	f.Add(auth)
	f.Add(append(append([]byte{}, hello...), 0xff, 0xff, 0xff, 0xff))
	f.Fuzz(func(t *testing.T, in []byte) {
		srv, cl := tlsPair(t)
		defer srv.Close()
		go func() {
			defer cl.Close()
			go io.Copy(io.Discard, cl)
			cl.Write(in)
		}()
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		c, r, err := Accept(ctx, srv, brokerHello, Options{})
		if err != nil {
			if c != nil {
				t.Fatalf("Accept returned a connection and %v", err)
			}
			return
		}
		if err := wire.CheckHello(c.Peer); err != nil {
			t.Fatalf("accepted a hello that does not check: %v: %v", c.Peer, err)
		}
		a, err := ReadAuth(ctx, c, r)
		if err == nil && len(in) < len(a.User)+len(a.Password) {
			t.Fatalf("an Auth longer than the input: %v", a)
		}
	})
}
