package arch

import (
	"bufio"
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// The repository stands alone: its docs, Go comments and golden-file
// comments cite only documents it contains. A citation of a document kept
// outside it would leave a reader of a clone with nothing to read.

// outside are citations of working notes that are not part of the
// repository; the concepts and contracts they held live in docs/CONCEPTS.md,
// docs/CONFIG.md and docs/GUIDE.md.
var outside = regexp.MustCompile(`\b(DESIGN|MODEL)\.md\b|\.\./shared\b|\bseeds/0\d\d_`)

// mdCitation is a path or file name ending in .md.
var mdCitation = regexp.MustCompile(`[A-Za-z0-9_./-]*[A-Za-z0-9_-]\.md\b`)

// mdLink is the target of a Markdown link or image: [text](target).
var mdLink = regexp.MustCompile(`\]\(([^)\s]+)\)`)

var url = regexp.MustCompile(`[a-z]+://\S+`)

// citingText is one piece of text that may cite files: a doc's line, a Go
// comment, a golden file's comment line.
type citingText struct {
	file string // relative to the repository root
	line int
	text string
	// fenced is a line inside a Markdown code block: commands there may
	// name files they write, so only the outside-notes rule applies.
	fenced bool
	// markdown: links are checked too.
	markdown bool
}

func TestCitationsResolveInRepository(t *testing.T) {
	root := repoRoot(t)
	texts, mdNames := collectCitingTexts(t, root)
	if len(texts) == 0 {
		t.Fatal("no docs or comments found")
	}
	for _, c := range texts {
		if m := outside.FindString(c.text); m != "" {
			t.Errorf("%s:%d cites %q, which is not in the repository: cite docs/CONCEPTS.md, docs/CONFIG.md, docs/GUIDE.md or a paper by its short name (docs/PAPERS.md)", c.file, c.line, m)
		}
		if c.fenced {
			continue
		}
		text := url.ReplaceAllString(c.text, "")
		for _, m := range mdCitation.FindAllString(text, -1) {
			if !resolves(root, c.file, m, mdNames) {
				t.Errorf("%s:%d cites %s, which is not in the repository", c.file, c.line, m)
			}
		}
		if !c.markdown {
			continue
		}
		for _, m := range mdLink.FindAllStringSubmatch(text, -1) {
			target, _, _ := strings.Cut(m[1], "#")
			if target == "" || strings.Contains(target, ":") {
				continue // an anchor in the same file, or mailto: and the like
			}
			if !exists(filepath.Join(root, filepath.Dir(c.file), target)) {
				t.Errorf("%s:%d links to %s, which is not in the repository", c.file, c.line, m[1])
			}
		}
	}
}

// resolves reports whether the cited .md file exists: a path relative to
// the citing file or to the repository root, or a bare name that some
// document of the repository has.
func resolves(root, from, cited string, mdNames map[string]bool) bool {
	cited = strings.TrimPrefix(cited, "./")
	if !strings.Contains(cited, "/") {
		return mdNames[cited]
	}
	return exists(filepath.Join(root, filepath.Dir(from), cited)) || exists(filepath.Join(root, cited))
}

func exists(path string) bool {
	_, err := os.Stat(path)
	return err == nil
}

// collectCitingTexts walks the repository: every Markdown line, every Go
// comment, and the comment lines of every testdata file.
func collectCitingTexts(t *testing.T, root string) ([]citingText, map[string]bool) {
	t.Helper()
	var texts []citingText
	mdNames := map[string]bool{}
	err := walkRepo(root, func(path, rel, name string) error {
		switch {
		case strings.HasSuffix(name, ".md"):
			mdNames[name] = true
			lines, err := markdownLines(path, rel)
			texts = append(texts, lines...)
			return err
		case strings.HasSuffix(name, ".go"):
			lines, err := goComments(path, rel)
			texts = append(texts, lines...)
			return err
		case strings.HasSuffix(name, ".txt") && strings.Contains(rel, "testdata"):
			lines, err := hashComments(path, rel)
			texts = append(texts, lines...)
			return err
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return texts, mdNames
}

// walkRepo calls fn for every file of the repository under root, with its
// path relative to root and its name, skipping hidden directories and
// vendored code.
func walkRepo(root string, fn func(path, rel, name string) error) error {
	return filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		name := d.Name()
		if d.IsDir() {
			if path != root && (strings.HasPrefix(name, ".") || name == "node_modules" || name == "vendor") {
				return filepath.SkipDir
			}
			return nil
		}
		rel, err := filepath.Rel(root, path)
		if err != nil {
			return err
		}
		return fn(path, rel, name)
	})
}

func markdownLines(path, rel string) ([]citingText, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var out []citingText
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 0, 64*1024), 1<<20)
	fenced := false
	for n := 1; sc.Scan(); n++ {
		line := sc.Text()
		if strings.HasPrefix(strings.TrimSpace(line), "```") {
			fenced = !fenced
			continue
		}
		out = append(out, citingText{file: rel, line: n, text: line, fenced: fenced, markdown: true})
	}
	return out, sc.Err()
}

func goComments(path, rel string) ([]citingText, error) {
	fset := token.NewFileSet()
	f, err := parser.ParseFile(fset, path, nil, parser.ParseComments|parser.SkipObjectResolution)
	if err != nil {
		return nil, err
	}
	var out []citingText
	for _, g := range f.Comments {
		for _, c := range g.List {
			out = append(out, commentLines(fset, rel, c)...)
		}
	}
	return out, nil
}

func commentLines(fset *token.FileSet, rel string, c *ast.Comment) []citingText {
	line := fset.Position(c.Slash).Line
	var out []citingText
	for i, l := range strings.Split(c.Text, "\n") {
		out = append(out, citingText{file: rel, line: line + i, text: l})
	}
	return out
}

// hashComment returns a testdata line's comment: the whole line when it
// starts with #, else what follows " # " (a seed list's note).
func hashComment(line string) (string, bool) {
	if t := strings.TrimSpace(line); strings.HasPrefix(t, "#") {
		return strings.TrimSpace(strings.TrimLeft(t, "#")), true
	}
	if _, c, ok := strings.Cut(line, " # "); ok {
		return strings.TrimSpace(c), true
	}
	return "", false
}

func hashComments(path, rel string) ([]citingText, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var out []citingText
	for i, l := range strings.Split(string(data), "\n") {
		if c, ok := hashComment(l); ok {
			out = append(out, citingText{file: rel, line: i + 1, text: c})
		}
	}
	return out, nil
}
