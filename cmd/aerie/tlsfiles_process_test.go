package main

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestBrokerWithMissingTLSFilesDoesNotStart: a broker whose [tls] files
// are missing (the CA, then its key) exits at start with status 2 and an
// error naming the file, and never listens: it does not run without TLS
// when the config asks for it.
func TestBrokerWithMissingTLSFilesDoesNotStart(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs processes")
	}
	f := newProcFixture(t)
	listen, clients := f.addr(), f.addr()
	cfgPath := f.writeConfig(fmt.Sprintf(`[tls]
ca = "certs/ca.pem"

[[broker]]
id = "p1"
listen = %q
clients = %q
pubends = ["P1"]
data = "data/p1"
tls_cert = "certs/p1.pem"
tls_key = "certs/p1-key.pem"
`, listen, clients))
	start := func() (int, string) {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		out, err := exec.CommandContext(ctx, f.bin, "broker", "--config", cfgPath, "--id", "p1").CombinedOutput()
		var exit *exec.ExitError
		if !errors.As(err, &exit) {
			t.Fatalf("the broker ran (%v):\n%s", err, out)
		}
		for _, a := range []string{listen, clients} {
			if c, err := net.Dial("tcp", a); err == nil {
				c.Close()
				t.Errorf("something listens on %s", a)
			}
		}
		return exit.ExitCode(), string(out)
	}
	certs := filepath.Join(f.dir, "certs")
	if code, out := start(); code != 2 || !strings.Contains(out, "[tls] ca: open "+filepath.Join(certs, "ca.pem")) {
		t.Errorf("no CA file: exit %d\n%s", code, out)
	}
	if out, err := exec.Command(f.bin, "certs", "--config", cfgPath, "--out", certs).CombinedOutput(); err != nil {
		t.Fatalf("aerie certs: %v\n%s", err, out)
	}
	if err := os.Remove(filepath.Join(certs, "p1-key.pem")); err != nil {
		t.Fatal(err)
	}
	if code, out := start(); code != 2 || !strings.Contains(out, "p1-key.pem: no such file") {
		t.Errorf("no key file: exit %d\n%s", code, out)
	}
}
