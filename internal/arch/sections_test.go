package arch

import (
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// A citation of a section must name one the cited document has, so that
// renaming or removing a section fails here rather than leaving readers of
// the code with a dead reference:
//
//	docs/CONCEPTS.md "Doubt horizon"   a heading, or a bold paragraph lead
//	BENCHMARKS.md §11f                 a numbered heading (## 11f. …)

// quotedSection is a Markdown file's name followed by one quoted section
// name. A citation of a file at a git revision (rev:path) names history,
// not the file as it is.
var quotedSection = regexp.MustCompile("(^|[^:A-Za-z0-9_./-])([A-Za-z0-9_./-]*[A-Z][A-Za-z0-9_-]*\\.md)`?,?\\s+\"([^\"]+)\"")

// numberedSection is a document's upper-case name, with or without .md,
// and a section number.
var numberedSection = regexp.MustCompile("\\b([A-Z][A-Z]+)(\\.md)?`?\\s*§\\s?([0-9]+[a-z]?)")

func TestCitedSectionsExist(t *testing.T) {
	root := repoRoot(t)
	docs := map[string][]string{} // path → heading and bold-lead texts, lower case
	headingsOf := func(path string) []string {
		if h, ok := docs[path]; ok {
			return h
		}
		h := sectionNames(path)
		docs[path] = h
		return h
	}
	_, mdNames := collectCitingTexts(t, root)
	for _, p := range citingParagraphs(t, root) {
		for _, m := range quotedSection.FindAllStringSubmatch(p.text, -1) {
			path := resolvePath(root, p.file, m[2], mdNames)
			if path == "" {
				continue // TestCitationsResolveInRepository reports it
			}
			if !hasSection(headingsOf(path), m[3]) {
				t.Errorf("%s cites %s %q: %s has no such section", p.file, m[2], m[3], m[2])
			}
		}
		for _, m := range numberedSection.FindAllStringSubmatch(p.text, -1) {
			path := resolvePath(root, p.file, m[1]+".md", mdNames)
			if path == "" {
				continue // not a document of the repository (a paper's name)
			}
			if !hasNumbered(headingsOf(path), m[3]) {
				t.Errorf("%s cites %s §%s: %s has no section %s", p.file, m[1], m[3], m[1]+".md", m[3])
			}
		}
	}
}

// resolvePath is resolves' answer as a path: "" when the document is not
// in the repository. A bare name is looked up under docs/ first.
func resolvePath(root, from, cited string, mdNames map[string]bool) string {
	cited = strings.TrimPrefix(cited, "./")
	candidates := []string{filepath.Join(root, filepath.Dir(from), cited), filepath.Join(root, cited)}
	if !strings.Contains(cited, "/") {
		candidates = append(candidates, filepath.Join(root, "docs", cited), filepath.Join(root, "docs", "known-issues", cited))
	}
	for _, c := range candidates {
		if exists(c) {
			return c
		}
	}
	return ""
}

var boldLead = regexp.MustCompile(`\*\*([^*]+)\*\*`)

// sectionNames lists a Markdown file's headings and the bold leads of its
// paragraphs and list items, lower case, markup removed.
func sectionNames(path string) []string {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil
	}
	var out []string
	for _, line := range strings.Split(string(data), "\n") {
		trimmed := strings.TrimSpace(line)
		switch {
		case strings.HasPrefix(trimmed, "#"):
			out = append(out, clean(strings.TrimLeft(trimmed, "#")))
		case strings.HasPrefix(trimmed, "**"), strings.HasPrefix(trimmed, "- **"), strings.HasPrefix(trimmed, "| "):
			if m := boldLead.FindStringSubmatch(trimmed); m != nil {
				out = append(out, clean(m[1]))
			}
			if strings.HasPrefix(trimmed, "| ") { // a table row's first cell
				out = append(out, clean(strings.Split(trimmed, "|")[1]))
			}
		}
	}
	return out
}

func clean(s string) string {
	s = strings.NewReplacer("`", "", "*", "").Replace(s)
	return strings.ToLower(strings.TrimRight(strings.TrimSpace(s), ".:"))
}

// hasSection: a section whose name starts with the cited one (a citation
// may shorten "Where each concern lives" to its first words, never change
// them).
func hasSection(names []string, cited string) bool {
	c := clean(cited)
	for _, n := range names {
		if strings.HasPrefix(n, c) {
			return true
		}
	}
	return false
}

func hasNumbered(names []string, num string) bool {
	for _, n := range names {
		if strings.HasPrefix(n, num+". ") || n == num {
			return true
		}
	}
	return false
}

// citingParagraph is a piece of text a citation may span: a Markdown
// paragraph, a Go comment group, a golden file's comment block.
type citingParagraph struct {
	file string
	text string
}

func citingParagraphs(t *testing.T, root string) []citingParagraph {
	t.Helper()
	var out []citingParagraph
	err := walkRepo(root, func(path, rel, name string) error {
		switch {
		case strings.HasSuffix(name, ".md"):
			out = append(out, markdownParagraphs(path, rel)...)
		case strings.HasSuffix(name, ".go"):
			fset := token.NewFileSet()
			f, err := parser.ParseFile(fset, path, nil, parser.ParseComments|parser.SkipObjectResolution)
			if err != nil {
				return err
			}
			for _, g := range f.Comments {
				out = append(out, citingParagraph{rel, strings.Join(strings.Fields(g.Text()), " ")})
			}
		case strings.HasSuffix(name, ".txt") && strings.Contains(rel, "testdata"):
			out = append(out, hashParagraphs(path, rel)...)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func markdownParagraphs(path, rel string) []citingParagraph {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil
	}
	var out []citingParagraph
	var cur []string
	fenced := false
	flush := func() {
		if len(cur) > 0 {
			out = append(out, citingParagraph{rel, strings.Join(cur, " ")})
			cur = nil
		}
	}
	for _, line := range strings.Split(string(data), "\n") {
		trimmed := strings.TrimSpace(line)
		if strings.HasPrefix(trimmed, "```") {
			fenced = !fenced
			flush()
			continue
		}
		if fenced || trimmed == "" {
			flush()
			continue
		}
		cur = append(cur, trimmed)
	}
	flush()
	return out
}

func hashParagraphs(path, rel string) []citingParagraph {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil
	}
	var out []citingParagraph
	var cur []string
	for _, line := range strings.Split(string(data), "\n") {
		if strings.HasPrefix(strings.TrimSpace(line), "#") {
			c, _ := hashComment(line)
			cur = append(cur, c)
			continue
		}
		if len(cur) > 0 {
			out = append(out, citingParagraph{rel, strings.Join(cur, " ")})
			cur = nil
		}
		if c, ok := hashComment(line); ok { // a note after data: a paragraph of its own
			out = append(out, citingParagraph{rel, c})
		}
	}
	if len(cur) > 0 {
		out = append(out, citingParagraph{rel, strings.Join(cur, " ")})
	}
	return out
}
