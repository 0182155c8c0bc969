package arch

import (
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// TestArchitectureNamesEveryPackage: docs/ARCHITECTURE.md is the map of the
// code, so every package of the module appears in it, in its diagram or as a
// backquoted name (`gd`, `raftphb/node`, `client`). A new package without
// its line there fails here.
func TestArchitectureNamesEveryPackage(t *testing.T) {
	root := repoRoot(t)
	data, err := os.ReadFile(filepath.Join(root, "docs", "ARCHITECTURE.md"))
	if err != nil {
		t.Fatal(err)
	}
	named := namesInMap(string(data))
	cmd := exec.Command("go", "list", "./...")
	cmd.Dir = root
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	pkgs := strings.Fields(string(out))
	if len(pkgs) < 10 {
		t.Fatalf("go list found only %d packages", len(pkgs))
	}
	for _, p := range pkgs {
		short := strings.TrimPrefix(strings.TrimPrefix(p, module), "/")
		short = strings.TrimPrefix(short, "internal/")
		if !named[short] {
			t.Errorf("package %s is not in docs/ARCHITECTURE.md: add it to the diagram and the table of packages", p)
		}
	}
}

var backquoted = regexp.MustCompile("`([a-z0-9_/]+)`")
var pathWord = regexp.MustCompile(`[a-z0-9_]+(/[a-z0-9_]+)*`)

// namesInMap collects the words of the fenced diagrams and every
// backquoted name.
func namesInMap(doc string) map[string]bool {
	named := map[string]bool{}
	for _, m := range backquoted.FindAllStringSubmatch(doc, -1) {
		named[m[1]] = true
	}
	fenced := false
	for _, line := range strings.Split(doc, "\n") {
		if strings.HasPrefix(strings.TrimSpace(line), "```") {
			fenced = !fenced
			continue
		}
		if fenced {
			for _, w := range pathWord.FindAllString(line, -1) {
				named[w] = true
			}
		}
	}
	return named
}
