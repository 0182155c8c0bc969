// Package match decides which events a subscription wants. This version knows
// topic patterns; SQL-92 selectors and the indexed matching engine come with
// the content-based-subscription issue, behind the same Filter interface.
//
// Pure: no I/O.
package match

import (
	"errors"
	"fmt"
	"sort"
	"strings"
)

// ErrBadPattern is returned for a malformed topic pattern.
var ErrBadPattern = errors.New("match: bad topic pattern")

// Filter decides whether an event passes.
type Filter interface {
	Match(topic string, props map[string]any) bool
}

// Pattern is a compiled topic pattern: dot-separated words, where "*" matches
// exactly one word and ">" (only as the last word) matches one or more.
type Pattern struct {
	src   string
	words []string
}

// ParsePattern compiles a topic pattern, refusing empty words and a ">" that
// is not last, with the position of the fault.
func ParsePattern(s string) (Pattern, error) {
	if s == "" {
		return Pattern{}, fmt.Errorf("%w: empty pattern", ErrBadPattern)
	}
	words := strings.Split(s, ".")
	pos := 0
	for i, w := range words {
		switch {
		case w == "":
			return Pattern{}, fmt.Errorf("%w %q: empty word at offset %d", ErrBadPattern, s, pos)
		case w == ">" && i != len(words)-1:
			return Pattern{}, fmt.Errorf("%w %q: '>' must be the last word (offset %d)", ErrBadPattern, s, pos)
		case w != "*" && w != ">" && strings.ContainsAny(w, "*> \t"):
			return Pattern{}, fmt.Errorf("%w %q: wildcard or space inside word %q at offset %d", ErrBadPattern, s, w, pos)
		}
		pos += len(w) + 1
	}
	return Pattern{src: s, words: words}, nil
}

// MustPattern is ParsePattern for constants in tests and defaults.
func MustPattern(s string) Pattern {
	p, err := ParsePattern(s)
	if err != nil {
		panic(err)
	}
	return p
}

func (p Pattern) String() string { return p.src }

// MatchTopic reports whether topic matches the pattern.
func (p Pattern) MatchTopic(topic string) bool {
	i := 0
	for len(topic) > 0 || i < len(p.words) {
		if i == len(p.words) {
			return false
		}
		w := p.words[i]
		if w == ">" {
			return len(topic) > 0
		}
		if len(topic) == 0 {
			return false
		}
		word := topic
		rest := ""
		if j := strings.IndexByte(topic, '.'); j >= 0 {
			word, rest = topic[:j], topic[j+1:]
			if rest == "" {
				return false // trailing dot: malformed topic matches nothing
			}
		}
		if w != "*" && w != word {
			return false
		}
		topic = rest
		i++
	}
	return true
}

// Match implements Filter.
func (p Pattern) Match(topic string, _ map[string]any) bool { return p.MatchTopic(topic) }

// Union is the filter of a filter edge: the union of the subscriptions
// reachable through it (MODEL.md §4). The zero value matches nothing; All
// matches everything.
type Union struct {
	all  bool
	pats map[string]Pattern
}

// All returns a union that passes every event.
func All() *Union { return &Union{all: true} }

// IsAll reports whether the union passes everything.
func (u *Union) IsAll() bool { return u.all }

// Add widens the union by p and reports whether it changed.
func (u *Union) Add(p Pattern) bool {
	if u.all {
		return false
	}
	if p.src == ">" {
		u.all = true
		u.pats = nil
		return true
	}
	if _, ok := u.pats[p.src]; ok {
		return false
	}
	if u.pats == nil {
		u.pats = map[string]Pattern{}
	}
	u.pats[p.src] = p
	return true
}

// AddAll widens the union to pass everything and reports whether it changed.
func (u *Union) AddAll() bool {
	if u.all {
		return false
	}
	u.all, u.pats = true, nil
	return true
}

// Match implements Filter.
func (u *Union) Match(topic string, _ map[string]any) bool {
	if u.all {
		return true
	}
	for _, p := range u.pats {
		if p.MatchTopic(topic) {
			return true
		}
	}
	return false
}

// Patterns returns the union's patterns in sorted order (nil when All).
func (u *Union) Patterns() []string {
	if u.all {
		return nil
	}
	out := make([]string, 0, len(u.pats))
	for s := range u.pats {
		out = append(out, s)
	}
	sort.Strings(out)
	return out
}

// Merge widens u by every pattern of o and reports whether u changed.
func (u *Union) Merge(o *Union) bool {
	if o.all {
		return u.AddAll()
	}
	changed := false
	for _, p := range o.pats {
		if u.Add(p) {
			changed = true
		}
	}
	return changed
}
