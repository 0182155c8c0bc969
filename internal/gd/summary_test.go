package gd

import (
	"strings"
	"testing"

	"github.com/aerie-mq/aerie/internal/msg"
	"github.com/aerie-mq/aerie/internal/tick"
)

// TestRestoreDeltaVersions: a pubend that logged its filter versions as
// changes renders every old tick after a restart as before, and so does
// one restored from its own snapshot of those versions (the first version
// held is written whole, the later ones as changes).
func TestRestoreDeltaVersions(t *testing.T) {
	routes := []Route{{Pubend: "P1", Down: []msg.NodeID{"b1"}}}
	cfg := DefaultConfig()
	cfg.SummaryDeltaMin = 0
	recs := []msg.Record{
		{Pubend: "P1", Filter: &msg.FilterVersion{Down: "b1", From: 1, Seq: 1, Patterns: []string{"a.*", "b"}, Selectors: []string{"k = 1", ""}}},
		{Pubend: "P1", Filter: &msg.FilterVersion{Down: "b1", From: 5, Seq: 2, Delta: true, Patterns: []string{"a.*"}, Selectors: []string{"k = 2"}}},
		{Pubend: "P1", Filter: &msg.FilterVersion{Down: "b1", From: 9, Seq: 3, Delta: true, Remove: []msg.Clause{{Pattern: "a.*", Selector: "k = 1"}}}},
		{Pubend: "P1", HWM: 20},
	}
	want := map[tick.Tick]string{1: "b k1", 5: "b k1 k2", 9: "b k2"}
	check := func(e *Engine) {
		t.Helper()
		for at, w := range want {
			f := e.FilterAt("P1", "b1", at)
			var got []string
			if f.Match("b", msg.Props{}) {
				got = append(got, "b")
			}
			for _, k := range []int64{1, 2} {
				if f.Match("a.x", msg.MustProps(map[string]any{"k": k})) {
					got = append(got, "k"+string(rune('0'+k)))
				}
			}
			if g := strings.Join(got, " "); g != w {
				t.Fatalf("tick %d passes %q, want %q", at, g, w)
			}
		}
	}
	e, err := New("p1", cfg, routes)
	if err != nil {
		t.Fatal(err)
	}
	if err := e.Restore(recs); err != nil {
		t.Fatal(err)
	}
	check(e)
	snap, mark := e.Snapshot()
	if !e.PersistedThrough(mark) {
		t.Fatal("snapshot waits for a batch after a restore")
	}
	var kinds []string
	for _, r := range snap {
		if r.Filter != nil {
			kinds = append(kinds, map[bool]string{true: "change", false: "whole"}[r.Filter.Delta])
		}
	}
	if strings.Join(kinds, " ") != "whole change change" {
		t.Fatalf("snapshot versions %v, want the first whole and the others as changes", kinds)
	}
	e2, _ := New("p1", cfg, routes)
	if err := e2.Restore(snap); err != nil {
		t.Fatal(err)
	}
	check(e2)

	// A change whose base is not in the log is refused, not guessed.
	e3, _ := New("p1", cfg, routes)
	if err := e3.Restore(recs[1:]); err == nil || !strings.Contains(err.Error(), "not in the log") {
		t.Fatalf("Restore of a change without its base: %v", err)
	}
}
