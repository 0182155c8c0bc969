package arch

import (
	"encoding/json"
	"go/ast"
	"go/parser"
	"go/token"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
)

// A product package's mutation switches (its Mut* constants, e.g.
// gd.MutDropNackForward in internal/gd/mutation.go) break one protocol rule
// so that tests can show the oracle catches it. Outside the package itself
// only the simulator (internal/sim) and test files may name them: no
// product code path, flag or command reaches a broken rule.

var mutName = regexp.MustCompile(`^Mut[A-Z]`)

// mutationLeaks returns, one line each, every reference in the non-test
// file src of package pkg to a Mut* identifier of another module package
// that is not the simulator's, unless pkg is the simulator.
func mutationLeaks(fset *token.FileSet, pkg, name string, src any) ([]string, error) {
	if pkg == module+"/internal/sim" || strings.HasPrefix(pkg, module+"/internal/sim/") {
		return nil, nil
	}
	f, err := parser.ParseFile(fset, name, src, parser.SkipObjectResolution)
	if err != nil {
		return nil, err
	}
	imports := map[string]string{} // local name -> import path
	for _, im := range f.Imports {
		p, err := strconv.Unquote(im.Path.Value)
		if err != nil {
			return nil, err
		}
		if !strings.HasPrefix(p, module+"/") || p == pkg {
			continue
		}
		local := p[strings.LastIndex(p, "/")+1:]
		if im.Name != nil {
			local = im.Name.Name
		}
		imports[local] = p
	}
	var bad []string
	ast.Inspect(f, func(n ast.Node) bool {
		sel, ok := n.(*ast.SelectorExpr)
		if !ok || !mutName.MatchString(sel.Sel.Name) {
			return true
		}
		x, ok := sel.X.(*ast.Ident)
		if !ok {
			return true
		}
		if p, ok := imports[x.Name]; ok {
			bad = append(bad, fset.Position(sel.Pos()).String()+": "+p+"."+sel.Sel.Name)
		}
		return true
	})
	return bad, nil
}

func TestMutationsStayInTests(t *testing.T) {
	cmd := exec.Command("go", "list", "-json", "./...")
	cmd.Dir = repoRoot(t)
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	fset := token.NewFileSet()
	dec := json.NewDecoder(strings.NewReader(string(out)))
	files := 0
	for dec.More() {
		var p listed
		if err := dec.Decode(&p); err != nil {
			t.Fatal(err)
		}
		for _, f := range p.GoFiles { // test files are not in GoFiles
			files++
			bad, err := mutationLeaks(fset, p.ImportPath, filepath.Join(p.Dir, f), nil)
			if err != nil {
				t.Fatal(err)
			}
			for _, b := range bad {
				t.Errorf("%s: a mutation switch is named only in its own package, internal/sim and tests", b)
			}
		}
	}
	if files < 100 {
		t.Fatalf("go list found %d non-test files", files)
	}
}

// TestMutationRuleBites: the rule finds a switch named outside its package
// and the simulator, and lets through the package itself and the simulator.
func TestMutationRuleBites(t *testing.T) {
	const src = `package p
import (
	"github.com/aerie-mq/aerie/internal/gd"
	g2 "github.com/aerie-mq/aerie/internal/gd"
)
var a = gd.MutVouchAll | g2.MutNoHold
var b = gd.Mutation(0)
var c = MutLocal
`
	fset := token.NewFileSet()
	for _, c := range []struct {
		pkg  string
		want int
	}{
		{module + "/internal/broker", 2},
		{module + "/cmd/aerie", 2},
		{module + "/internal/simple", 2}, // no prefix match
		{module + "/internal/sim", 0},
		{module + "/internal/gd", 0},
	} {
		got, err := mutationLeaks(fset, c.pkg, "p.go", src)
		if err != nil {
			t.Fatal(err)
		}
		if len(got) != c.want {
			t.Errorf("in %s: %q, want %d", c.pkg, got, c.want)
		}
	}
}
