package pki

import (
	"crypto/tls"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func devPKI(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	if err := WriteDev(dir, []BrokerNames{{ID: "p1", Addrs: []string{"127.0.0.1:7101", "localhost:7201"}}, {ID: "b1"}}, time.Now()); err != nil {
		t.Fatal(err)
	}
	return dir
}

func files(dir, id string) Files {
	return Files{CA: filepath.Join(dir, "ca.pem"), Cert: filepath.Join(dir, id+".pem"), Key: filepath.Join(dir, id+"-key.pem")}
}

func TestWriteDevAndLoad(t *testing.T) {
	dir := devPKI(t)
	for _, f := range []string{"ca.pem", "ca-key.pem", "p1.pem", "p1-key.pem", "b1.pem", "b1-key.pem", "client.pem", "client-key.pem"} {
		st, err := os.Stat(filepath.Join(dir, f))
		if err != nil {
			t.Fatal(err)
		}
		if strings.HasSuffix(f, "-key.pem") && st.Mode().Perm() != 0o600 {
			t.Errorf("%s has mode %v, want 0600", f, st.Mode().Perm())
		}
	}
	b, err := LoadBroker("p1", files(dir, "p1"), time.Now())
	if err != nil {
		t.Fatal(err)
	}
	leaf := b.cert.Leaf
	if leaf == nil || strings.Join(leaf.DNSNames, ",") != "p1,localhost" || len(leaf.IPAddresses) != 1 || leaf.IPAddresses[0].String() != "127.0.0.1" {
		t.Fatalf("names: %v %v", leaf.DNSNames, leaf.IPAddresses)
	}
	// A second run keeps the CA: certificates issued later are trusted by the earlier ones.
	ca1, _ := os.ReadFile(filepath.Join(dir, "ca.pem"))
	if err := WriteDev(dir, []BrokerNames{{ID: "s9"}}, time.Now()); err != nil {
		t.Fatal(err)
	}
	ca2, _ := os.ReadFile(filepath.Join(dir, "ca.pem"))
	if string(ca1) != string(ca2) {
		t.Fatal("the CA was replaced")
	}
	if _, err := LoadBroker("s9", files(dir, "s9"), time.Now()); err != nil {
		t.Fatal(err)
	}
	if err := WriteDev(dir, []BrokerNames{{ID: "client"}}, time.Now()); err == nil {
		t.Fatal("a broker named client was accepted")
	}
}

func TestLoadBrokerErrors(t *testing.T) {
	dir := devPKI(t)
	other := devPKI(t) // another CA
	ca, err := LoadCAFiles(filepath.Join(dir, "ca.pem"), filepath.Join(dir, "ca-key.pem"))
	if err != nil {
		t.Fatal(err)
	}
	c, k, err := ca.IssueExpired("old", []string{"old"}, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	os.WriteFile(filepath.Join(dir, "old.pem"), c, 0o644)
	os.WriteFile(filepath.Join(dir, "old-key.pem"), k, 0o600)
	os.WriteFile(filepath.Join(dir, "junk.pem"), []byte("not pem"), 0o644)
	for _, c := range []struct {
		id   string
		f    Files
		want string
	}{
		{"p1", Files{CA: filepath.Join(dir, "nope.pem"), Cert: files(dir, "p1").Cert, Key: files(dir, "p1").Key}, "[tls] ca: open"},
		{"p1", Files{CA: filepath.Join(dir, "junk.pem"), Cert: files(dir, "p1").Cert, Key: files(dir, "p1").Key}, "no PEM certificate"},
		{"p1", Files{CA: files(dir, "p1").CA, Cert: filepath.Join(dir, "missing.pem"), Key: files(dir, "p1").Key}, "no such file"},
		{"p1", Files{CA: files(dir, "p1").CA, Cert: files(dir, "p1").Cert, Key: files(dir, "b1").Key}, "private key does not match"},
		{"p1", Files{CA: files(other, "p1").CA, Cert: files(dir, "p1").Cert, Key: files(dir, "p1").Key}, "does not verify against the [tls] ca"},
		{"b1", files(dir, "p1"), `names [p1 localhost 127.0.0.1], not broker "b1"`},
		{"old", files(dir, "old"), "expired"},
	} {
		_, err := LoadBroker(c.id, c.f, time.Now())
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s %+v: %v, want %q", c.id, c.f, err, c.want)
		}
	}
}

// TestMutualTLS: a broker port takes a peer with a certificate of the CA,
// and PeerName tells a certificate of the claimed broker from another.
func TestMutualTLS(t *testing.T) {
	dir := devPKI(t)
	p1, err := LoadBroker("p1", files(dir, "p1"), time.Now())
	if err != nil {
		t.Fatal(err)
	}
	b1, err := LoadBroker("b1", files(dir, "b1"), time.Now())
	if err != nil {
		t.Fatal(err)
	}
	handshake := func(client *tls.Config) (tls.ConnectionState, error, error) {
		a, b := net.Pipe()
		defer a.Close()
		defer b.Close()
		srv := tls.Server(a, p1.Listener())
		errc := make(chan error, 1)
		go func() {
			errc <- srv.Handshake()
			srv.Close()
		}()
		cl := tls.Client(b, client)
		cerr := cl.Handshake()
		if cerr == nil { // TLS 1.3: the client learns of a refusal on its first read
			_, cerr = cl.Read(make([]byte, 1))
		}
		return srv.ConnectionState(), <-errc, cerr
	}
	st, err, _ := handshake(b1.Dialer("p1"))
	if err != nil {
		t.Fatal(err)
	}
	if err := PeerName(st, "b1"); err != nil {
		t.Fatal(err)
	}
	if err := PeerName(st, "s1"); err == nil || !strings.Contains(err.Error(), `names [b1], not broker "s1"`) {
		t.Fatalf("claimed s1 with b1's certificate: %v", err)
	}
	cl, err := Client(ClientFiles{CA: filepath.Join(dir, "ca.pem")})
	if err != nil {
		t.Fatal(err)
	}
	cl.ServerName = "p1"
	_, err, cerr := handshake(cl)
	if err == nil || !strings.Contains(err.Error(), "didn't provide a certificate") || cerr == nil || !strings.Contains(cerr.Error(), "certificate required") {
		t.Fatalf("no client certificate: server %v, client %v", err, cerr)
	}
	if _, err := Client(ClientFiles{Cert: "x"}); err == nil {
		t.Fatal("a client certificate without a CA was accepted")
	}
}
