package match

import (
	"github.com/aerie-mq/aerie/internal/msg"
	"sort"
	"strings"
)

// MaxUnionClauses bounds a union's clauses with selectors. Past it, the
// union drops every selector and keeps the patterns alone: wider, never
// narrower, so a summary stays small however many subscriptions lie behind
// an edge (seed 000 §3: filters are summaries of what lies downstream).
const MaxUnionClauses = 256

// Union is the filter of a filter edge: the union of the subscriptions
// reachable through it (MODEL.md §4). Each clause is a topic pattern with
// an optional selector; an event passes when some clause's pattern matches
// its topic and that clause's selector (if any) is True. The zero value
// matches nothing; All matches everything.
//
// Unions only widen: Add, AddClause and Merge never make one pass less.
// Covering keeps them small: a pattern without a selector covers every
// clause with the same pattern, and ">" alone passes everything.
type Union struct {
	all     bool
	clauses map[string]clause // by clauseKey
	bare    map[string]bool   // patterns present without a selector
	nsel    int               // clauses with a selector
}

type clause struct {
	pat Pattern
	sel *Selector // nil: the pattern alone
}

func clauseKey(pat string, sel *Selector) string {
	if sel == nil {
		return pat
	}
	return pat + "\x00" + sel.String()
}

// All returns a union that passes every event.
func All() *Union { return &Union{all: true} }

// IsAll reports whether the union passes everything.
func (u *Union) IsAll() bool { return u.all }

// Add widens the union by p (no selector) and reports whether it changed.
func (u *Union) Add(p Pattern) bool { return u.AddClause(p, nil) }

// AddClause widens the union by the events whose topic p matches and for
// which sel (nil: none) is True, and reports whether it changed.
func (u *Union) AddClause(p Pattern, sel *Selector) bool {
	if u.all {
		return false
	}
	if sel == nil && p.src == ">" {
		return u.AddAll()
	}
	if u.clauses == nil {
		u.clauses, u.bare = map[string]clause{}, map[string]bool{}
	}
	if u.bare[p.src] {
		return false // covered
	}
	key := clauseKey(p.src, sel)
	if _, ok := u.clauses[key]; ok {
		return false
	}
	if sel == nil {
		// The bare pattern covers the clauses that refine it.
		for k, c := range u.clauses {
			if c.sel != nil && c.pat.src == p.src {
				delete(u.clauses, k)
				u.nsel--
			}
		}
		u.bare[p.src] = true
	} else {
		u.nsel++
	}
	u.clauses[key] = clause{p, sel}
	if u.nsel > MaxUnionClauses {
		u.dropSelectors()
	}
	return true
}

// dropSelectors widens every clause to its bare pattern.
func (u *Union) dropSelectors() {
	for k, c := range u.clauses {
		if c.sel != nil {
			delete(u.clauses, k)
			u.clauses[c.pat.src] = clause{pat: c.pat}
			u.bare[c.pat.src] = true
		}
	}
	u.nsel = 0
}

// AddAll widens the union to pass everything and reports whether it changed.
func (u *Union) AddAll() bool {
	if u.all {
		return false
	}
	u.all, u.clauses, u.bare, u.nsel = true, nil, nil, 0
	return true
}

// Match implements Filter.
func (u *Union) Match(topic string, props msg.Props) bool {
	if u.all {
		return true
	}
	for _, c := range u.clauses {
		if c.pat.MatchTopic(topic) && (c.sel == nil || c.sel.Match(topic, props)) {
			return true
		}
	}
	return false
}

// Clauses returns the union's clauses sorted by pattern then selector, as
// parallel slices ("" where a clause has no selector); nil when All.
func (u *Union) Clauses() (patterns, selectors []string) {
	if u.all {
		return nil, nil
	}
	keys := make([]string, 0, len(u.clauses))
	for k := range u.clauses {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		c := u.clauses[k]
		patterns = append(patterns, c.pat.src)
		s := ""
		if c.sel != nil {
			s = c.sel.String()
		}
		selectors = append(selectors, s)
	}
	return patterns, selectors
}

// Patterns returns the union's clauses' patterns, sorted (nil when All);
// a pattern with several selectors appears once per selector.
func (u *Union) Patterns() []string {
	p, _ := u.Clauses()
	return p
}

// String renders the union for Describe and logs.
func (u *Union) String() string {
	if u.all {
		return "all"
	}
	ps, ss := u.Clauses()
	parts := make([]string, len(ps))
	for i := range ps {
		parts[i] = ps[i]
		if ss[i] != "" {
			parts[i] += "[" + ss[i] + "]"
		}
	}
	return strings.Join(parts, ",")
}

// Equal reports whether u and o pass exactly the same clauses.
func (u *Union) Equal(o *Union) bool {
	if u.all || o.all {
		return u.all == o.all
	}
	if len(u.clauses) != len(o.clauses) {
		return false
	}
	for k := range u.clauses {
		if _, ok := o.clauses[k]; !ok {
			return false
		}
	}
	return true
}

// Merge widens u by every clause of o and reports whether u changed.
func (u *Union) Merge(o *Union) bool {
	if o.all {
		return u.AddAll()
	}
	// In key order, not map order: past MaxUnionClauses the result depends
	// on the order clauses arrive in, and runs must be deterministic.
	keys := make([]string, 0, len(o.clauses))
	for k := range o.clauses {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	changed := false
	for _, k := range keys {
		c := o.clauses[k]
		if u.AddClause(c.pat, c.sel) {
			changed = true
		}
	}
	return changed
}
