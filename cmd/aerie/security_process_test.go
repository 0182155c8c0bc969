package main

import (
	"bufio"
	"bytes"
	"context"
	"crypto/tls"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/aerie-mq/aerie/internal/msg"
	"github.com/aerie-mq/aerie/internal/pki"
	"github.com/aerie-mq/aerie/internal/wire"
)

// TestTLSAndUsersProcesses runs a TLS network of two `aerie broker`
// processes (p1 → s1) with two users, made with `aerie passwd` and
// `aerie certs`: alice may publish and subscribe within orders.>, bob only
// within status.>. Alice's events go through exactly once; every refusal
// — a forbidden publish, a forbidden subscription, a wrong password,
// missing credentials, a client without TLS, a peer without a client
// certificate on a broker port — fails with its reason in the error, and
// /metrics counts the failed logins.
func TestTLSAndUsersProcesses(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs processes")
	}
	f := newProcFixture(t)
	bin, dir, port := f.bin, f.dir, f.port
	p1Listen, p1Clients, s1Listen, s1Clients, httpPort := port(), port(), port(), port(), port()
	hash := func(pw string) string {
		cmd := exec.Command(bin, "passwd")
		cmd.Stdin = strings.NewReader(pw + "\n")
		out, err := cmd.Output()
		if err != nil {
			t.Fatalf("aerie passwd: %v", err)
		}
		return strings.TrimSpace(string(out))
	}
	cfg := fmt.Sprintf(`[tls]
ca = "certs/ca.pem"

[[broker]]
id = "p1"
listen = "127.0.0.1:%d"
clients = "127.0.0.1:%d"
data = "data/p1"
pubends = ["P1"]
tls_cert = "certs/p1.pem"
tls_key = "certs/p1-key.pem"

[[broker]]
id = "s1"
listen = "127.0.0.1:%d"
clients = "127.0.0.1:%d"
tls_cert = "certs/s1.pem"
tls_key = "certs/s1-key.pem"

[[link]]
up = "p1"
down = "s1"

[[user]]
name = "alice"
password = %q
publish = ["orders.>"]
subscribe = ["orders.>"]

[[user]]
name = "bob"
password = %q
publish = ["status.>"]
subscribe = ["status.>"]
`, p1Listen, p1Clients, s1Listen, s1Clients, hash("wonderland"), hash("builder"))
	cfgPath := f.writeConfig(cfg)
	if out, err := exec.Command(bin, "certs", "--config", cfgPath, "--out", filepath.Join(dir, "certs")).CombinedOutput(); err != nil {
		t.Fatalf("aerie certs: %v\n%s", err, out)
	}
	procs := f
	procs.start("p1", "--http", fmt.Sprintf("127.0.0.1:%d", httpPort))
	procs.start("s1")
	ca := filepath.Join(dir, "certs", "ca.pem")
	p1, s1 := fmt.Sprintf("127.0.0.1:%d", p1Clients), fmt.Sprintf("127.0.0.1:%d", s1Clients)

	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	// run runs a client command to its end: its exit error and stderr.
	run := func(env []string, args ...string) (string, string, error) {
		cmd := exec.CommandContext(ctx, bin, args...)
		cmd.Env = append(os.Environ(), env...)
		var out, errOut bytes.Buffer
		cmd.Stdout, cmd.Stderr = &out, &errOut
		err := cmd.Run()
		return out.String(), errOut.String(), err
	}

	// The allowed path: alice subscribes at s1 (her password from the
	// environment) and publishes at p1 with a client certificate.
	sub := exec.CommandContext(ctx, bin, "sub", "--connect", s1, "--wait-for-broker", "60s", "--topic", "orders.>", "--count", "5", "--timeout", "60s", "--json",
		"--tls-ca", ca, "--user", "alice")
	sub.Env = append(os.Environ(), "AERIE_PASSWORD=wonderland")
	var subOut bytes.Buffer
	sub.Stdout = &subOut
	subErr, err := sub.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := sub.Start(); err != nil {
		t.Fatal(err)
	}
	subscribed := make(chan string, 1)
	var subLog bytes.Buffer
	go func() {
		sc := bufio.NewScanner(subErr)
		for sc.Scan() {
			subLog.WriteString(sc.Text() + "\n")
			if strings.HasPrefix(sc.Text(), "subscribed ") {
				subscribed <- sc.Text()
			}
		}
		close(subscribed)
	}()
	if _, ok := <-subscribed; !ok {
		sub.Wait()
		t.Fatalf("the subscriber never subscribed:\n%s", subLog.String())
	}
	out, errOut, err := run(nil, "pub", "--connect", p1, "--wait-for-broker", "60s", "--topic", "orders.eu", "--count", "5", "--id", "alice-1",
		"--tls-ca", ca, "--tls-cert", filepath.Join(dir, "certs", "client.pem"), "--tls-key", filepath.Join(dir, "certs", "client-key.pem"),
		"--user", "alice", "--password", "wonderland")
	if err != nil || !strings.Contains(out, "published 5 acked 5 duplicates 0") {
		t.Fatalf("alice's publish: %v\n%s%s", err, out, errOut)
	}
	if err := sub.Wait(); err != nil {
		t.Fatalf("alice's subscriber: %v\n%s", err, subLog.String())
	}
	seen := map[int64]int{}
	for _, line := range strings.Split(strings.TrimSpace(subOut.String()), "\n") {
		var ev struct {
			Topic string           `json:"topic"`
			Props map[string]int64 `json:"props"`
		}
		if err := json.Unmarshal([]byte(line), &ev); err != nil || ev.Topic != "orders.eu" {
			t.Fatalf("delivered %q: %v", line, err)
		}
		seen[ev.Props["seq"]]++
	}
	for seq := int64(1); seq <= 5; seq++ {
		if seen[seq] != 1 {
			t.Fatalf("event %d delivered %d times: %v", seq, seen[seq], seen)
		}
	}
	if len(seen) != 5 {
		t.Fatalf("delivered %v, want seq 1..5 once each", seen)
	}

	// The refusals, each with its reason.
	for _, c := range []struct {
		name string
		env  []string
		args []string
		want string
	}{
		{"forbidden publish", nil, []string{"pub", "--connect", p1, "--topic", "orders.eu", "--tls-ca", ca, "--user", "bob", "--password", "builder"},
			"not authorized to publish to orders.eu"},
		{"forbidden subscription", []string{"AERIE_PASSWORD=builder"}, []string{"sub", "--connect", s1, "--topic", "orders.>", "--timeout", "30s", "--tls-ca", ca, "--user", "bob"},
			"not authorized to subscribe to orders.>"},
		{"wrong password", nil, []string{"pub", "--connect", p1, "--topic", "orders.eu", "--tls-ca", ca, "--user", "alice", "--password", "builder"},
			"authentication failed"},
		{"missing credentials", nil, []string{"sub", "--connect", s1, "--topic", "orders.>", "--timeout", "30s", "--tls-ca", ca},
			"authentication required"},
		{"no TLS", nil, []string{"pub", "--connect", p1, "--topic", "orders.eu", "--user", "alice", "--password", "wonderland"},
			"this port speaks TLS"},
	} {
		out, errOut, err := run(c.env, c.args...)
		if err == nil || !strings.Contains(errOut, c.want) {
			t.Errorf("%s: exit %v, want a failure saying %q\nstdout: %s\nstderr: %s", c.name, err, c.want, out, errOut)
		}
	}

	// A peer without a client certificate on a broker port.
	tcfg, err := pki.Client(pki.ClientFiles{CA: ca})
	if err != nil {
		t.Fatal(err)
	}
	tcfg.ServerName = "p1"
	if err := helloAsBroker(fmt.Sprintf("127.0.0.1:%d", p1Listen), tcfg); err == nil || !strings.Contains(err.Error(), "certificate required") {
		t.Errorf("a peer without a certificate on the broker port: %v", err)
	}

	// The failed login is counted; with [tls] the http port speaks https,
	// with the broker's certificate.
	if resp, err := http.Get(fmt.Sprintf("http://127.0.0.1:%d/metrics", httpPort)); err == nil {
		resp.Body.Close()
		if resp.StatusCode != http.StatusBadRequest {
			t.Errorf("plain http on the http port of a TLS network: %s, want 400 (an HTTP request to an HTTPS server)", resp.Status)
		}
	}
	pool, err := pki.LoadCA(ca)
	if err != nil {
		t.Fatal(err)
	}
	https := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool}}}
	resp, err := https.Get(fmt.Sprintf("https://127.0.0.1:%d/metrics", httpPort))
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if !strings.Contains(string(body), `aerie_auth_failures_total{broker="p1"} 1`) {
		t.Errorf("/metrics does not count one failed login:\n%s", grepLines(string(body), "aerie_auth"))
	}
}

// helloAsBroker connects to a broker port with cfg and says Hello as s1:
// the error is how the connection was refused (nil: it was not).
func helloAsBroker(addr string, cfg *tls.Config) error {
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
			return fmt.Errorf("goodbye: %s", m.Reason)
		case msg.Hello, msg.Heartbeat:
		default:
			return nil
		}
	}
}

func grepLines(s, sub string) string {
	var out []string
	for _, l := range strings.Split(s, "\n") {
		if strings.Contains(l, sub) {
			out = append(out, l)
		}
	}
	return strings.Join(out, "\n")
}
