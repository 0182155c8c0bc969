package config

import (
	"cmp"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/BurntSushi/toml"
)

// ErrInvalid is wrapped by every problem Parse, Load and Validate report, so
// callers can tell a bad config (errors.Is(err, ErrInvalid)) from an
// unreadable file.
var ErrInvalid = errors.New("config: invalid network config")

// Error is one problem in a network config. Line and Col (1-based, Col in
// characters) are 0 when unknown.
type Error struct {
	File      string
	Line, Col int
	Msg       string
}

func (e *Error) Error() string {
	switch {
	case e.File == "":
		return "config: " + e.Msg
	case e.Line > 0 && e.Col > 0:
		return fmt.Sprintf("%s:%d:%d: %s", e.File, e.Line, e.Col, e.Msg)
	case e.Line > 0:
		return fmt.Sprintf("%s:%d: %s", e.File, e.Line, e.Msg)
	}
	return fmt.Sprintf("%s: %s", e.File, e.Msg)
}

func (e *Error) Unwrap() error { return ErrInvalid }

// problems collects every problem of one config, so that a user fixes them
// all in one round.
type problems struct {
	file string
	loc  *locator // nil when there is no source (Validate)
	errs []*Error
}

func (p *problems) at(line, col int, format string, args ...any) {
	p.errs = append(p.errs, &Error{File: p.file, Line: line, Col: col, Msg: fmt.Sprintf(format, args...)})
}

// field reports a problem at key of element i of [[table]], or at the
// element itself when the key is absent.
func (p *problems) field(table string, i int, key string, format string, args ...any) {
	if p.loc != nil {
		if line, col, ok := p.loc.field(table, i, key); ok {
			p.at(line, col, format, args...)
			return
		}
	}
	p.elem(table, i, format, args...)
}

// top reports a problem at the top-level key (seeds).
func (p *problems) top(key string, format string, args ...any) {
	var line, col int
	if p.loc != nil {
		line, col, _, _ = p.loc.nth([]string{key}, 0)
	}
	p.at(line, col, format, args...)
}

// elem reports a problem at element i of [[table]].
func (p *problems) elem(table string, i int, format string, args ...any) {
	var line, col int
	if p.loc != nil {
		line, col, _ = p.loc.elem(table, i)
	}
	p.at(line, col, format, args...)
}

// where names element i of [[table]] for a cross-reference in a message.
func (p *problems) where(table string, i int) string {
	if p.loc != nil {
		if line, _, ok := p.loc.elem(table, i); ok {
			return fmt.Sprintf("line %d", line)
		}
	}
	return fmt.Sprintf("[[%s]] #%d", table, i+1)
}

// err returns every problem, ordered by position (positionless last), or nil.
func (p *problems) err() error {
	if len(p.errs) == 0 {
		return nil
	}
	slices.SortStableFunc(p.errs, func(a, b *Error) int {
		if (a.Line == 0) != (b.Line == 0) {
			return cmp.Compare(b.Line, a.Line) // positionless last
		}
		return cmp.Or(cmp.Compare(a.Line, b.Line), cmp.Compare(a.Col, b.Col))
	})
	errs := make([]error, len(p.errs))
	for i, e := range p.errs {
		errs[i] = e
	}
	return errors.Join(errs...)
}

// syntax reports a decoder error, with line and column when it has them.
func (p *problems) syntax(src []byte, err error) {
	var pe toml.ParseError
	if !errors.As(err, &pe) {
		p.at(0, 0, "%s", strings.TrimPrefix(err.Error(), "toml: "))
		return
	}
	line, col := pe.Position.Line, 0
	if start := pe.Position.Start; start >= 0 && start <= len(src) {
		l := newLineIndex(src)
		if sl, sc := l.pos(start); sl == line || line == 0 {
			line, col = sl, sc
		}
	}
	p.at(line, col, "%s", pe.Message)
}

func newLineIndex(src []byte) *locator {
	l := &locator{src: src, lineStarts: []int{0}}
	for i, c := range src {
		if c == '\n' {
			l.lineStarts = append(l.lineStarts, i+1)
		}
	}
	return l
}

// suggest returns ` (did you mean "x"?)` for the known key closest to key,
// or "" when none is close.
func suggest(key string, known []string) string {
	best, bestD := "", 3 // at most two edits away
	for _, k := range known {
		if d := editDistance(strings.ToLower(key), k); d < bestD && d < len(key) {
			best, bestD = k, d
		}
	}
	if best == "" {
		return ""
	}
	return fmt.Sprintf(" (did you mean %q?)", best)
}

// editDistance is the Levenshtein distance between a and b, in bytes.
func editDistance(a, b string) int {
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev, cur = cur, prev
	}
	return prev[len(b)]
}
