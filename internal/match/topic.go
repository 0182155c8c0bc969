// Package match decides which events a subscription wants. This version knows
// topic patterns; SQL-92 selectors and the indexed matching engine come with
// the content-based-subscription issue, behind the same Filter interface.
//
// Pure: no I/O.
package match

import (
	"errors"
	"fmt"
	"github.com/aerie-mq/aerie/internal/msg"
	"strings"
)

// ErrBadPattern is returned for a malformed topic pattern.
var ErrBadPattern = errors.New("match: bad topic pattern")

// Filter decides whether an event passes.
type Filter interface {
	Match(topic string, props msg.Props) bool
}

// Pattern is a compiled topic pattern: dot-separated words, where "*" matches
// exactly one word and ">" (only as the last word) matches one or more.
type Pattern struct {
	src   string
	words []string
}

// PatternRule is the rule ParsePattern enforces, as its errors state it.
const PatternRule = "a pattern is words separated by dots, none empty; '*' is one word, '>' the rest and only last"

// ParsePattern compiles a topic pattern, refusing empty words, a ">" that
// is not last and a word that holds a wildcard or a space (msg.WordReserved,
// the rule topics obey too), with the position of the fault.
func ParsePattern(s string) (Pattern, error) {
	if s == "" {
		return Pattern{}, fmt.Errorf("%w: empty pattern (%s)", ErrBadPattern, PatternRule)
	}
	words := strings.Split(s, ".")
	pos := 0
	for i, w := range words {
		switch {
		case w == "":
			return Pattern{}, fmt.Errorf("%w %q: empty word at offset %d (%s)", ErrBadPattern, s, pos, PatternRule)
		case w == ">" && i != len(words)-1:
			return Pattern{}, fmt.Errorf("%w %q: '>' must be the last word (offset %d)", ErrBadPattern, s, pos)
		case w != "*" && w != ">" && strings.ContainsAny(w, msg.WordReserved):
			return Pattern{}, fmt.Errorf("%w %q: wildcard or space inside word %q at offset %d (%s)", ErrBadPattern, s, w, pos, PatternRule)
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
func (p Pattern) Match(topic string, _ msg.Props) bool { return p.MatchTopic(topic) }
