package main

import (
	"bytes"
	"regexp"
	"runtime"
	"runtime/debug"
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

// TestVersionOfABuild: the module version, else "(devel)" with the commit,
// its date and "+modified" as the build recorded them.
func TestVersionOfABuild(t *testing.T) {
	vcs := func(kv ...string) []debug.BuildSetting {
		var s []debug.BuildSetting
		for i := 0; i < len(kv); i += 2 {
			s = append(s, debug.BuildSetting{Key: kv[i], Value: kv[i+1]})
		}
		return s
	}
	for _, c := range []struct {
		bi   debug.BuildInfo
		want string
	}{
		{debug.BuildInfo{Main: debug.Module{Version: "v1.4.0"}}, "v1.4.0"},
		{debug.BuildInfo{}, "(devel)"},
		{debug.BuildInfo{Main: debug.Module{Version: "(devel)"}, Settings: vcs("vcs.revision", "c9390f7a1b2c3d4e5f60718293a4b5c6d7e8f901", "vcs.time", "2026-11-29T14:00:00Z")},
			"(devel) c9390f7a1b2c 2026-11-29T14:00:00Z"},
		{debug.BuildInfo{Settings: vcs("vcs.revision", "c9390f7a1b2c3d4e5f60718293a4b5c6d7e8f901", "vcs.modified", "true")},
			"(devel) c9390f7a1b2c +modified"},
	} {
		if got := versionOf(&c.bi); got != c.want {
			t.Errorf("versionOf(%+v) = %q, want %q", c.bi, got, c.want)
		}
	}
}
