// Package auth holds the users of a network and what each may do: who a
// client is (a name and a bcrypt-hashed password, checked once when it
// connects) and which topics it may publish to and subscribe to (checked on
// every request, by the runtime shell's client session, at the broker the
// client is connected to: never trusted from another hop).
//
// Topic patterns are those of subscriptions (docs/GUIDE.md): dot-separated
// words, "*" one word, ">" (last only) one or more words.
package auth

import (
	"strings"

	"github.com/aerie-mq/aerie/internal/match"
)

// Covers reports whether granted covers requested: every topic requested
// matches is matched by granted too. Both must be valid patterns
// (match.ParsePattern); an invalid one covers and is covered by nothing.
//
// Word by word, from the left:
//
//	granted  requested  covers when
//	">"      any word    always (">" needs one more word, and requested has one)
//	"*"      "*" or w    the rest covers the rest
//	w        w           the rest covers the rest
//	w        "*"         never: "*" also matches other words
//	"*", w   ">"         never: ">" also matches longer topics
//	(end)    (end)       always
//	(end)    more words  never, and the other way round
//
// So "orders.>" covers "orders.eu.*", "orders.*.x" and "orders.>", but not
// "orders" (">" needs at least one word) nor "*.eu"; ">" covers every
// pattern; "a.*" covers "a.b" but not "a.>".
func Covers(granted, requested string) bool {
	if !valid(granted) || !valid(requested) {
		return false
	}
	g, r := strings.Split(granted, "."), strings.Split(requested, ".")
	for i := range g {
		if g[i] == ">" {
			return i < len(r)
		}
		if i == len(r) || r[i] == ">" {
			return false
		}
		if g[i] != "*" && (r[i] == "*" || r[i] != g[i]) {
			return false
		}
	}
	return len(g) == len(r)
}

// Matches reports whether topic matches pattern (false for an invalid
// pattern).
func Matches(pattern, topic string) bool {
	p, err := match.ParsePattern(pattern)
	return err == nil && p.MatchTopic(topic)
}

func valid(pattern string) bool {
	_, err := match.ParsePattern(pattern)
	return err == nil
}

// Perms is what one user may do. A nil *Perms may do everything: the
// network has no users.
type Perms struct {
	User      string
	publish   []match.Pattern
	subscribe []string
}

// NewPerms compiles a user's permissions; every pattern must be valid.
func NewPerms(user string, publish, subscribe []string) (*Perms, error) {
	p := &Perms{User: user}
	for _, s := range publish {
		pat, err := match.ParsePattern(s)
		if err != nil {
			return nil, err
		}
		p.publish = append(p.publish, pat)
	}
	for _, s := range subscribe {
		if _, err := match.ParsePattern(s); err != nil {
			return nil, err
		}
		p.subscribe = append(p.subscribe, s)
	}
	return p, nil
}

// MayPublish reports whether the user may publish to topic: one of its
// publish patterns matches it.
func (p *Perms) MayPublish(topic string) bool {
	if p == nil {
		return true
	}
	for _, pat := range p.publish {
		if pat.MatchTopic(topic) {
			return true
		}
	}
	return false
}

// MaySubscribe reports whether the user may subscribe to pattern: one of
// its subscribe patterns covers it (Covers). One pattern must cover the
// whole subscription: "a.*" and "a.*.>" together match what "a.>" does,
// but a subscription to "a.>" needs a grant that covers it alone.
func (p *Perms) MaySubscribe(pattern string) bool {
	if p == nil {
		return true
	}
	for _, g := range p.subscribe {
		if Covers(g, pattern) {
			return true
		}
	}
	return false
}
