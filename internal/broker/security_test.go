package broker_test

import (
	"bufio"
	"context"
	"crypto/tls"
	"errors"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"golang.org/x/crypto/bcrypt"

	"github.com/aerie-mq/aerie/client"
	"github.com/aerie-mq/aerie/internal/auth"
	"github.com/aerie-mq/aerie/internal/broker"
	"github.com/aerie-mq/aerie/internal/gd"
	"github.com/aerie-mq/aerie/internal/msg"
	"github.com/aerie-mq/aerie/internal/pki"
	"github.com/aerie-mq/aerie/internal/wire"
)

// testUsers: alice (password wonderland) may publish and subscribe within
// orders.>, bob (builder) may only subscribe within status.>.
func testUsers(t *testing.T) *auth.Users {
	t.Helper()
	hash := func(pw string) string {
		h, err := bcrypt.GenerateFromPassword([]byte(pw), bcrypt.MinCost)
		if err != nil {
			t.Fatal(err)
		}
		return string(h)
	}
	users, err := auth.NewUsers([]auth.User{
		{Name: "alice", Hash: hash("wonderland"), Publish: []string{"orders.>"}, Subscribe: []string{"orders.>"}},
		{Name: "bob", Hash: hash("builder"), Subscribe: []string{"status.>"}},
	})
	if err != nil {
		t.Fatal(err)
	}
	return users
}

// securePHB runs p1 (pubend P1, a downstream s1 that may dial it) with TLS
// and two users: alice may publish and subscribe within orders.>, bob may
// only subscribe within status.>. It returns the node, its options and the
// directory of the development PKI.
func securePHB(t *testing.T) (*broker.Node, broker.Options, string) {
	dir := t.TempDir()
	if err := pki.WriteDev(dir, []pki.BrokerNames{{ID: "p1", Addrs: []string{"127.0.0.1:0"}}, {ID: "s1"}}, time.Now()); err != nil {
		t.Fatal(err)
	}
	tb, err := pki.LoadBroker("p1", pki.Files{CA: filepath.Join(dir, "ca.pem"), Cert: filepath.Join(dir, "p1.pem"), Key: filepath.Join(dir, "p1-key.pem")}, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	users := testUsers(t)
	opts := phbOptions(t)
	opts.Listen = freeAddr(t)
	opts.Routes = []gd.Route{{Pubend: "P1", Down: []msg.NodeID{"s1"}}}
	opts.TLS, opts.Users = tb, users
	node, stop := runNode(t, opts)
	t.Cleanup(func() { stop() })
	return node, opts, dir
}

func clientTLS(t *testing.T, dir string, withCert bool) *tls.Config {
	f := pki.ClientFiles{CA: filepath.Join(dir, "ca.pem")}
	if withCert {
		f.Cert, f.Key = filepath.Join(dir, "client.pem"), filepath.Join(dir, "client-key.pem")
	}
	cfg, err := pki.Client(f)
	if err != nil {
		t.Fatal(err)
	}
	return cfg
}

// TestFailedAuthenticationNeverReachesTheEngine: a client with a wrong
// password that sends requests right after its credentials is refused
// with "authentication failed", counted, and none of its requests is
// handed to the engine (nothing logged, no client session).
func TestFailedAuthenticationNeverReachesTheEngine(t *testing.T) {
	node, opts, dir := securePHB(t)
	cfg := clientTLS(t, dir, false)
	cfg.ServerName = "127.0.0.1"
	nc, err := tls.Dial("tcp", opts.Clients, cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	var buf []byte
	buf, _ = wire.AppendFrame(buf, msg.Hello{Version: wire.Version, Role: msg.RoleClient, ID: "guesser"})
	buf, _ = wire.AppendFrame(buf, msg.Auth{User: "alice", Password: "guess"})
	buf, _ = wire.AppendFrame(buf, msg.Publish{Pubend: "P1", Publisher: "guesser", Seq: 1, Topic: "orders.eu"})
	buf, _ = wire.AppendFrame(buf, msg.Subscribe{Sub: "s", Pattern: ">"})
	if _, err := nc.Write(buf); err != nil {
		t.Fatal(err)
	}
	nc.SetReadDeadline(time.Now().Add(10 * time.Second))
	r := wire.NewReader(bufio.NewReader(nc), 0)
	var bye msg.Goodbye
	for {
		m, err := r.Next()
		if err != nil {
			t.Fatalf("no Goodbye: %v", err)
		}
		if g, ok := m.(msg.Goodbye); ok {
			bye = g
			break
		}
		if _, ok := m.(msg.Hello); !ok {
			t.Fatalf("got %v before the refusal", m)
		}
	}
	if bye.Reason != "authentication failed" {
		t.Fatalf("refused with %q", bye.Reason)
	}
	// The refusal comes before the connection is handed over: once the
	// peer has it, the loop can have heard nothing of this client.
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	st, err := node.Status(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if st.AuthFailures != 1 || st.HandshakeFailures != 1 || st.Clients != 0 {
		t.Fatalf("after a failed login: auth failures %d, handshake failures %d, clients %d",
			st.AuthFailures, st.HandshakeFailures, st.Clients)
	}
	// Had the refused publish reached the pubend, the same publisher id and
	// sequence number would now be acked as a duplicate.
	c, err := client.Dial(ctx, opts.Clients, client.Options{ID: "guesser", TLS: clientTLS(t, dir, false), User: "alice", Password: "wonderland", Logger: quietLogger()})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	ack, err := c.Publish(ctx, client.Message{Topic: "orders.eu"})
	if err != nil || ack.Duplicate {
		t.Fatalf("publish (guesser, 1) after the refused one: %+v, %v", ack, err)
	}
}

// TestClientRefusals: each way a client can be turned away names the
// reason in the error the Go client returns; the allowed path works.
func TestClientRefusals(t *testing.T) {
	_, opts, dir := securePHB(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	dial := func(o client.Options) (*client.Client, error) {
		o.Logger = quietLogger()
		o.RetryDial = true // refusals must end Dial anyway
		return client.Dial(ctx, opts.Clients, o)
	}
	for _, c := range []struct {
		name string
		o    client.Options
		want string
	}{
		{"wrong password", client.Options{TLS: clientTLS(t, dir, false), User: "alice", Password: "nope"}, "authentication failed"},
		{"unknown user", client.Options{TLS: clientTLS(t, dir, false), User: "mallory", Password: "wonderland"}, "authentication failed"},
		{"no credentials", client.Options{TLS: clientTLS(t, dir, false)}, "authentication required"},
		{"no TLS", client.Options{User: "alice", Password: "wonderland"}, "this port speaks TLS"},
	} {
		_, err := dial(c.o)
		if !errors.Is(err, client.ErrRefused) || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v, want ErrRefused saying %q", c.name, err, c.want)
		}
	}
	alice, err := dial(client.Options{TLS: clientTLS(t, dir, true), User: "alice", Password: "wonderland"})
	if err != nil {
		t.Fatal(err)
	}
	defer alice.Close()
	sub, err := alice.Subscribe(ctx, "orders.eu.*")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := alice.Publish(ctx, client.Message{Topic: "orders.eu.1"}); err != nil {
		t.Fatal(err)
	}
	if ev := <-sub.Events(); ev.Topic != "orders.eu.1" {
		t.Fatalf("delivered %+v", ev)
	}
	if _, err := alice.Publish(ctx, client.Message{Topic: "status.x"}); !errors.Is(err, client.ErrRejected) || !strings.Contains(err.Error(), "not authorized to publish to status.x") {
		t.Fatalf("forbidden publish: %v", err)
	}
	bob, err := dial(client.Options{TLS: clientTLS(t, dir, false), User: "bob", Password: "builder"})
	if err != nil {
		t.Fatal(err)
	}
	defer bob.Close()
	if _, err := bob.Subscribe(ctx, "orders.>"); !errors.Is(err, client.ErrRejected) || !strings.Contains(err.Error(), "not authorized to subscribe to orders.>") {
		t.Fatalf("forbidden subscription: %v", err)
	}
	if _, err := bob.Subscribe(ctx, "status.eu"); err != nil {
		t.Fatalf("allowed subscription: %v", err)
	}
}

// TestBrokerPortWantsTheBrokersCertificate: on the broker port, a peer
// without a certificate is refused by TLS, and a peer whose certificate
// does not name the broker it claims is refused with that reason.
func TestBrokerPortWantsTheBrokersCertificate(t *testing.T) {
	_, opts, dir := securePHB(t)
	hello := func(cfg *tls.Config) error {
		cfg.ServerName = "p1"
		nc, err := tls.Dial("tcp", opts.Listen, cfg)
		if err != nil {
			return err
		}
		defer nc.Close()
		f, _ := wire.AppendFrame(nil, msg.Hello{Version: wire.Version, Role: msg.RoleBroker, ID: "s1", Incarnation: 1})
		if _, err := nc.Write(f); err != nil {
			return err
		}
		nc.SetReadDeadline(time.Now().Add(10 * time.Second))
		r := wire.NewReader(bufio.NewReader(nc), 0)
		for {
			m, err := r.Next()
			if err != nil {
				return err
			}
			switch m := m.(type) {
			case msg.Goodbye:
				return errors.New(m.Reason)
			case msg.Hello, msg.Heartbeat:
			default:
				return nil // the link is up: GD traffic
			}
		}
	}
	if err := hello(clientTLS(t, dir, false)); err == nil || !strings.Contains(err.Error(), "certificate required") {
		t.Errorf("no certificate: %v", err)
	}
	if err := hello(clientTLS(t, dir, true)); err == nil || !strings.Contains(err.Error(), `certificate names [client], not broker "s1"`) {
		t.Errorf("a client's certificate claiming s1: %v", err)
	}
	s1, err := tls.LoadX509KeyPair(filepath.Join(dir, "s1.pem"), filepath.Join(dir, "s1-key.pem"))
	if err != nil {
		t.Fatal(err)
	}
	cfg := clientTLS(t, dir, false)
	cfg.Certificates = []tls.Certificate{s1}
	if err := hello(cfg); err != nil {
		t.Errorf("s1 with its own certificate: %v", err)
	}
}

// TestBadCertificatesPerConnection: an expired certificate and one from
// another CA are refused at the TLS handshake on the broker port and on
// the client port, each with the reason; a client that trusts another CA
// refuses the broker; and a broker's certificate presented by a client
// grants nothing on the client port: the client must still log in.
func TestBadCertificatesPerConnection(t *testing.T) {
	_, opts, dir := securePHB(t)
	ca, err := pki.LoadCAFiles(filepath.Join(dir, "ca.pem"), filepath.Join(dir, "ca-key.pem"))
	if err != nil {
		t.Fatal(err)
	}
	certPEM, keyPEM, err := ca.IssueExpired("s1", []string{"s1"}, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	expired, err := tls.X509KeyPair(certPEM, keyPEM)
	if err != nil {
		t.Fatal(err)
	}
	other := t.TempDir()
	if err := pki.WriteDev(other, []pki.BrokerNames{{ID: "s1"}}, time.Now()); err != nil {
		t.Fatal(err)
	}
	foreign, err := tls.LoadX509KeyPair(filepath.Join(other, "s1.pem"), filepath.Join(other, "s1-key.pem"))
	if err != nil {
		t.Fatal(err)
	}
	withCert := func(c tls.Certificate) *tls.Config {
		cfg := clientTLS(t, dir, false)
		cfg.Certificates = []tls.Certificate{c}
		return cfg
	}
	for _, c := range []struct {
		name string
		cert tls.Certificate
		want string
	}{
		{"expired", expired, "expired certificate"},
		{"another CA's", foreign, "unknown certificate authority"},
	} {
		if err := brokerHello(opts.Listen, withCert(c.cert)); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("broker port, %s certificate: %v, want %q", c.name, err, c.want)
		}
	}

	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	dial := func(o client.Options) error {
		o.Logger = quietLogger()
		c, err := client.Dial(ctx, opts.Clients, o)
		if err == nil {
			c.Close()
		}
		return err
	}
	for _, c := range []struct {
		name string
		o    client.Options
		want string
	}{
		{"an expired client certificate", client.Options{TLS: withCert(expired), User: "alice", Password: "wonderland"}, "expired certificate"},
		{"another CA's client certificate", client.Options{TLS: withCert(foreign), User: "alice", Password: "wonderland"}, "unknown certificate authority"},
		{"trusting another CA", client.Options{TLS: clientTLS(t, other, false), User: "alice", Password: "wonderland"}, "certificate signed by unknown authority"},
		{"a broker's certificate, no credentials", client.Options{TLS: withCert(brokerCert(t, dir, "s1"))}, "authentication required"},
		{"a broker's certificate, a wrong password", client.Options{TLS: withCert(brokerCert(t, dir, "s1")), User: "alice", Password: "s1"}, "authentication failed"},
	} {
		if err := dial(c.o); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("client port, %s: %v, want %q", c.name, err, c.want)
		}
	}
	if err := dial(client.Options{TLS: withCert(brokerCert(t, dir, "s1")), User: "alice", Password: "wonderland"}); err != nil {
		t.Errorf("a broker's certificate with alice's password: %v", err)
	}
}

func brokerCert(t *testing.T, dir, id string) tls.Certificate {
	t.Helper()
	c, err := tls.LoadX509KeyPair(filepath.Join(dir, id+".pem"), filepath.Join(dir, id+"-key.pem"))
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// brokerHello dials a broker port with cfg and says Hello as s1: nil when
// the link comes up, else how it was refused.
func brokerHello(addr string, cfg *tls.Config) error {
	cfg.ServerName = "p1"
	nc, err := tls.Dial("tcp", addr, cfg)
	if err != nil {
		return err
	}
	defer nc.Close()
	f, _ := wire.AppendFrame(nil, msg.Hello{Version: wire.Version, Role: msg.RoleBroker, ID: "s1", Incarnation: 1})
	if _, err := nc.Write(f); err != nil {
		return err
	}
	nc.SetReadDeadline(time.Now().Add(10 * time.Second))
	r := wire.NewReader(bufio.NewReader(nc), 0)
	for {
		m, err := r.Next()
		if err != nil {
			return err
		}
		switch m := m.(type) {
		case msg.Goodbye:
			return errors.New(m.Reason)
		case msg.Hello, msg.Heartbeat:
		default:
			return nil
		}
	}
}
