package arch

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

const module = "github.com/aerie-mq/aerie"

// purePackages are the protocol cores — inputs in, outputs out, nothing
// else (docs/ARCHITECTURE.md) — and what the simulator shares with the broker
// beside them: the wire codec, log retention's bookkeeping and the runtime
// shell, which reach time and I/O only through the interfaces they are
// given.
var purePackages = []string{"tick", "match", "msg", "stream", "gd", "member", "wire", "retention", "shell", "raftphb", "raftphb/forward", "congestion", "zap", "group"}

// forbiddenDirect may not be imported by a pure package: clocks are passed
// in, randomness is seeded by the caller, there is no I/O and no locking.
var forbiddenDirect = map[string]bool{
	"net": true, "os": true, "os/exec": true, "sync": true, "sync/atomic": true,
	"math/rand": true, "math/rand/v2": true, "crypto/rand": true, "io/ioutil": true, "syscall": true,
}

// forbiddenAnywhere may not be reached even indirectly: the runtime shell
// and the test harnesses depend on the cores, never the reverse.
var forbiddenAnywhere = []string{"/internal/broker", "/internal/transport", "/internal/eventlog",
	"/internal/vfs", "/internal/storage", "/internal/sim", "/internal/oracle", "/cmd/"}

var clockCall = regexp.MustCompile(`\btime\.(Now|Since|Until|After|AfterFunc|NewTimer|NewTicker|Sleep|Tick)\(`)

type listed struct {
	ImportPath string
	Dir        string
	Imports    []string
	Deps       []string
	GoFiles    []string
}

func TestPurePackagesStayPure(t *testing.T) {
	args := []string{"list", "-json", "-deps=false"}
	for _, p := range purePackages {
		args = append(args, module+"/internal/"+p)
	}
	cmd := exec.Command("go", args...)
	cmd.Dir = repoRoot(t)
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	dec := json.NewDecoder(strings.NewReader(string(out)))
	seen := 0
	for dec.More() {
		var p listed
		if err := dec.Decode(&p); err != nil {
			t.Fatal(err)
		}
		seen++
		for _, imp := range p.Imports {
			if forbiddenDirect[imp] {
				t.Errorf("%s imports %s: pure packages take time, randomness and I/O from their caller", p.ImportPath, imp)
			}
		}
		for _, dep := range append(p.Imports, p.Deps...) {
			for _, bad := range forbiddenAnywhere {
				if strings.HasPrefix(dep, module) && strings.Contains(dep, bad) {
					t.Errorf("%s depends on %s: the cores must not depend on the runtime or test harnesses", p.ImportPath, dep)
				}
			}
		}
		for _, f := range p.GoFiles {
			src, err := os.ReadFile(filepath.Join(p.Dir, f))
			if err != nil {
				t.Fatal(err)
			}
			if m := clockCall.Find(src); m != nil {
				t.Errorf("%s/%s calls %s: pure packages receive the time as an input", p.ImportPath, f, m)
			}
		}
	}
	if seen != len(purePackages) {
		t.Fatalf("go list returned %d packages, want %d", seen, len(purePackages))
	}
}

// TestPurityCheckBites makes sure the checker recognises what it forbids.
func TestPurityCheckBites(t *testing.T) {
	if !clockCall.MatchString("x := time.Now()") || clockCall.MatchString("d := time.Second") {
		t.Fatal("clock-call pattern is wrong")
	}
	if !forbiddenDirect["sync"] || !forbiddenDirect["math/rand/v2"] {
		t.Fatal("forbidden imports list lost entries")
	}
}

func repoRoot(t *testing.T) string {
	t.Helper()
	dir, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			t.Fatal("go.mod not found")
		}
		dir = parent
	}
}
