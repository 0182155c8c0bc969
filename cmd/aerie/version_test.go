package main

import (
	"bytes"
	"regexp"
	"runtime"
	"strings"
	"testing"
)

// TestVersion: `aerie version` names aerie, its build and the Go version.
func TestVersion(t *testing.T) {
	var out, errOut bytes.Buffer
	if code := run([]string{"version"}, &out, &errOut); code != 0 {
		t.Fatalf("exit %d: %s", code, errOut.String())
	}
	line := strings.TrimSpace(out.String())
	if !regexp.MustCompile(`^aerie \S+( [0-9a-f]{12}( \S+)?( \+modified)?)? go\S+ \S+/\S+$`).MatchString(line) || !strings.Contains(line, runtime.Version()) {
		t.Fatalf("aerie version printed %q", line)
	}
}
