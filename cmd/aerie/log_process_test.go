package main

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/aerie-mq/aerie/client"
	"github.com/aerie-mq/aerie/internal/pki"
)

// TestBrokerLogKeepsSecrets runs a TLS broker with users at
// --log-level debug --log-format json, logs a user in, refuses a wrong
// password, and floods its client port with connections that fail the
// TLS handshake. Its real log is then read: every line is a JSON object;
// no line holds a password, a bcrypt hash or a line of a private key; and
// the flood from one source costs one line, while /metrics counts every
// refused connection.
func TestBrokerLogKeepsSecrets(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs processes")
	}
	const good, bad, flood = "wonderland-8f3k", "guessed-q9z2x", 40
	f := newProcFixture(t)
	out, err := hashOf(f.bin, good)
	if err != nil {
		t.Fatal(err)
	}
	hash := out
	listen, clients, httpAddr := f.addr(), f.addr(), f.addr()
	cfgPath := f.writeConfig(fmt.Sprintf(`[tls]
ca = "certs/ca.pem"

[[broker]]
id = "p1"
listen = %q
clients = %q
data = "data/p1"
pubends = ["P1"]
tls_cert = "certs/p1.pem"
tls_key = "certs/p1-key.pem"
http = %q

[[user]]
name = "alice"
password = %q
publish = ["orders.>"]
`, listen, clients, httpAddr, hash))
	certs := filepath.Join(f.dir, "certs")
	if out, err := exec.Command(f.bin, "certs", "--config", cfgPath, "--out", certs).CombinedOutput(); err != nil {
		t.Fatalf("aerie certs: %v\n%s", err, out)
	}
	f.start("p1", "--log-level", "debug", "--log-format", "json")

	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	tcfg, err := pki.Client(pki.ClientFiles{CA: filepath.Join(certs, "ca.pem")})
	if err != nil {
		t.Fatal(err)
	}
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	c, err := client.Dial(ctx, clients, client.Options{ID: "alice-1", TLS: tcfg, User: "alice", Password: good, RetryDial: true, Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.Publish(ctx, client.Message{Topic: "orders.eu"}); err != nil {
		t.Fatal(err)
	}
	c.Close()
	if _, err := client.Dial(ctx, clients, client.Options{ID: "guesser", TLS: tcfg, User: "alice", Password: bad, Logger: quiet}); err == nil {
		t.Fatal("a wrong password was accepted")
	}
	for range flood { // plain TCP at a TLS port: each fails the handshake
		nc, err := net.Dial("tcp", clients)
		if err != nil {
			t.Fatal(err)
		}
		nc.Write([]byte("GET / HTTP/1.0\r\n\r\n"))
		io.Copy(io.Discard, nc) // until the broker closes it
		nc.Close()
	}
	want := fmt.Sprintf(`aerie_handshake_failures_total{broker="p1"} %d`, flood+1)
	pool, err := pki.LoadCA(filepath.Join(certs, "ca.pem"))
	if err != nil {
		t.Fatal(err)
	}
	https := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool}}} // [tls]: the http port is https
	waitMetric(ctx, t, https, "https://"+httpAddr+"/metrics", want)

	logText, err := os.ReadFile(f.logPath("p1"))
	if err != nil {
		t.Fatal(err)
	}
	secrets := []string{good, bad, hash, hash[7:], "PRIVATE KEY"}
	for _, key := range []string{"p1-key.pem", "ca-key.pem", "client-key.pem"} {
		secrets = append(secrets, pemBody(t, filepath.Join(certs, key))...)
	}
	refusals := 0
	for _, line := range strings.Split(strings.TrimSpace(string(logText)), "\n") {
		if strings.HasPrefix(line, "--- start ") { // the test harness's, not the broker's
			continue
		}
		var rec map[string]any
		if err := json.Unmarshal([]byte(line), &rec); err != nil {
			t.Errorf("not a JSON log record: %q", line)
			continue
		}
		for _, s := range secrets {
			if strings.Contains(line, s) {
				t.Errorf("the log holds a secret (%.12q…): %s", s, line)
			}
		}
		if m, _ := rec["msg"].(string); strings.HasPrefix(m, "client refused") && rec["source"] == "127.0.0.1" {
			refusals++
		}
	}
	if refusals != 1 {
		t.Errorf("%d log lines for %d refused connections from one source within the interval, want 1:\n%s",
			refusals, flood+1, grepLines(string(logText), "refused"))
	}
	if !strings.Contains(string(logText), `"msg":"broker running"`) {
		t.Errorf("no start line in the log:\n%s", logText)
	}
}

// hashOf runs `aerie passwd` with pw on stdin: the hash it prints.
func hashOf(bin, pw string) (string, error) {
	cmd := exec.Command(bin, "passwd")
	cmd.Stdin = strings.NewReader(pw + "\n")
	out, err := cmd.Output()
	if err != nil {
		return "", fmt.Errorf("aerie passwd: %w", err)
	}
	return strings.TrimSpace(string(out)), nil
}

// pemBody is the base64 lines of a PEM file: any of them in a log would
// leak part of the key.
func pemBody(t *testing.T, path string) []string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var lines []string
	for _, l := range strings.Split(string(b), "\n") {
		if l != "" && !strings.HasPrefix(l, "-----") {
			lines = append(lines, l)
		}
	}
	if len(lines) == 0 {
		t.Fatalf("%s holds no key", path)
	}
	return lines
}

// waitMetric polls url until its body holds want (or ctx ends).
func waitMetric(ctx context.Context, t *testing.T, hc *http.Client, url, want string) {
	t.Helper()
	var last string
	for ctx.Err() == nil {
		if resp, err := hc.Get(url); err == nil {
			b, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if last = string(b); strings.Contains(last, want) {
				return
			}
		}
		select {
		case <-ctx.Done():
		case <-time.After(50 * time.Millisecond):
		}
	}
	t.Fatalf("%s never showed %q:\n%s", url, want, grepLines(last, "aerie_handshake"))
}
