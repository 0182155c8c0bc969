package gd

import (
	"math/rand/v2"
	"testing"

	"github.com/aerie-mq/aerie/internal/match"
	"github.com/aerie-mq/aerie/internal/msg"
)

// TestCmpClauseOrdersByKey: the allocation-free comparison orders clauses
// exactly as their keys do, prefixes of patterns and empty selectors
// included.
func TestCmpClauseOrdersByKey(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	words := []string{"", "a", "a.b", "a.b.c", "a.>", "b", "*", ">", "a\x00"}
	sels := []string{"", "x = 1", "x = 2", "\x00", "y > 3"}
	draw := func() msg.Clause {
		return msg.Clause{Pattern: words[r.IntN(len(words))], Selector: sels[r.IntN(len(sels))]}
	}
	for range 20000 {
		a, b := draw(), draw()
		want := cmpStr(match.ClauseKey(a.Pattern, a.Selector), match.ClauseKey(b.Pattern, b.Selector))
		if got := cmpClause(a, b); got != want {
			t.Fatalf("cmpClause(%q, %q) = %d, keys say %d", a, b, got, want)
		}
	}
}
