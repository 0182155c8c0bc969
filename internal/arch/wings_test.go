package arch

import (
	"encoding/json"
	"os/exec"
	"strings"
	"testing"
)

// The wings of the repository (docs/ARCHITECTURE.md "Packages and the
// direction of imports"): the experiments live under internal/lab, the
// simulator in internal/sim with its checker internal/oracle. The command
// (cmd/aerie) runs all of them; the product — the broker, the client, the
// protocol cores, the harnesses chaos and bench — depends on none of them,
// and the simulator does not depend on the lab. Test files may import
// anything.

const (
	labPrefix = module + "/internal/lab/"
	cmdPrefix = module + "/cmd/"
)

var simulator = []string{module + "/internal/sim", module + "/internal/oracle"}

func inLab(p string) bool { return strings.HasPrefix(p, labPrefix) }

func inSimulator(p string) bool {
	for _, s := range simulator {
		if p == s || strings.HasPrefix(p, s+"/") {
			return true
		}
	}
	return false
}

// wingViolations is every dependency (direct or not, tests left out) that
// the rules above forbid, one line each.
func wingViolations(pkgs []listed) []string {
	var bad []string
	for _, p := range pkgs {
		var forbidden func(string) bool
		switch {
		case strings.HasPrefix(p.ImportPath, cmdPrefix), inLab(p.ImportPath):
			continue
		case inSimulator(p.ImportPath):
			forbidden = inLab
		default:
			forbidden = func(d string) bool { return inLab(d) || inSimulator(d) }
		}
		for _, d := range append(p.Imports, p.Deps...) {
			if forbidden(d) {
				bad = append(bad, p.ImportPath+" depends on "+d)
			}
		}
	}
	return bad
}

func TestProductDependsOnNoLabNorSimulator(t *testing.T) {
	cmd := exec.Command("go", "list", "-json", "./...")
	cmd.Dir = repoRoot(t)
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	var pkgs []listed
	dec := json.NewDecoder(strings.NewReader(string(out)))
	labs := 0
	for dec.More() {
		var p listed
		if err := dec.Decode(&p); err != nil {
			t.Fatal(err)
		}
		if inLab(p.ImportPath) {
			labs++
		}
		pkgs = append(pkgs, p)
	}
	if labs == 0 || len(pkgs) < 20 {
		t.Fatalf("go list found %d packages, %d of them in the lab", len(pkgs), labs)
	}
	for _, v := range wingViolations(pkgs) {
		t.Errorf("%s: only cmd/aerie, the lab and tests may use the lab; only they and the simulator's own packages the simulator", v)
	}
}

// TestWingRulesBite: the rules find what they forbid, and let through
// what they allow.
func TestWingRulesBite(t *testing.T) {
	pkgs := []listed{
		{ImportPath: module + "/internal/broker", Deps: []string{module + "/internal/lab/plotpng"}},
		{ImportPath: module + "/internal/chaos", Imports: []string{module + "/internal/sim"}},
		{ImportPath: module + "/client", Deps: []string{module + "/internal/oracle"}},
		{ImportPath: module + "/internal/sim", Imports: []string{module + "/internal/lab/ccexp"}},
		{ImportPath: module + "/cmd/aerie", Imports: []string{module + "/internal/lab/failover", module + "/internal/sim"}},
		{ImportPath: module + "/internal/lab/ccexp", Imports: []string{module + "/internal/sim"}},
		{ImportPath: module + "/internal/sim", Imports: []string{module + "/internal/oracle", module + "/internal/gd"}},
		{ImportPath: module + "/internal/labels", Imports: []string{module + "/internal/simple"}}, // no prefix match
	}
	got := wingViolations(pkgs)
	if len(got) != 4 {
		t.Fatalf("violations %q, want the first four packages' only", got)
	}
}
