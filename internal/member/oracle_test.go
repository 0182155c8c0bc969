package member_test

import (
	"errors"
	"fmt"
	"reflect"
	"slices"

	"github.com/aerie-mq/aerie/internal/member"
)

// step feeds one input to n and acts on its Ready, checking every installed
// view against the oracle.
func (w *world) step(n *simNode, in member.Input) {
	if err := n.m.Step(w.now, in); err != nil {
		w.t.Fatalf("%s: Step(%T): %v", n.id, in, err)
	}
	if _, ok := n.m.View(); ok && !n.m.Quorate() {
		w.fenced[n.id.Broker]++
	}
	for n.m.HasReady() {
		rd := n.m.Ready()
		for _, c := range rd.Installed {
			w.checkInstall(n, c)
		}
		for _, e := range rd.Send {
			w.deliver(n.id, e.To, e.Msg, false)
		}
		n.m.Advance(rd)
	}
}

func (w *world) errorf(format string, args ...any) {
	w.t.Helper()
	w.t.Errorf("t=%v: "+format, append([]any{w.now.Sub(0)}, args...)...)
}

// checkInstall: the invariants every installed view must keep.
func (w *world) checkInstall(n *simNode, c member.Change) {
	v := c.View
	w.changes = append(w.changes, fmt.Sprintf("t=%v %s installs %s", w.now.Sub(0), n.id, v))
	// Monotonic view ids at every member [001 "monotonically increasing
	// membership view identifiers"].
	if v.ID <= n.lastID {
		w.errorf("%s installed %s after view %d: ids must increase", n.id, v, n.lastID)
	}
	if !v.Contains(n.id) {
		w.errorf("%s installed %s, which does not contain it", n.id, v)
	}
	// One id, one view (unless the scenario heals a split): no two live
	// members have installed different views with one id. Only a view
	// that members now dead alone installed may share its id with another
	// (its issuer died before any announcement arrived): nobody alive knows
	// it. This used to tolerate a live member that installed a dead elder's
	// last view the successor never saw; the successor now waits for every
	// live member's answer to its takeover probe, so it cannot happen.
	for d, installers := range w.installers[v.ID] {
		if d == v.Digest() {
			continue
		}
		for _, o := range installers {
			if o.up {
				w.conflicts++
				if !w.allowConflicts {
					w.errorf("%s installed %s; %s installed a different view %d", n.id, v, o.id, v.ID)
				}
				break
			}
		}
	}
	if w.installers[v.ID] == nil {
		w.installers[v.ID] = map[uint64][]*simNode{}
	}
	if w.issuer[v.ID] == nil {
		w.issuer[v.ID] = map[uint64]member.ID{}
	}
	w.issuer[v.ID][v.Digest()] = v.Elder().ID
	w.installers[v.ID][v.Digest()] = append(w.installers[v.ID][v.Digest()], n)
	// Static metadata in views.
	for _, m := range v.Members {
		if !reflect.DeepEqual(m.Meta, w.metas[m.ID]) {
			w.errorf("%s: view %s carries metadata %+v for %s, want %+v", n.id, v, m.Meta, m.ID, w.metas[m.ID])
		}
		if _, ok := n.firstSeen[m.ID]; !ok {
			n.firstSeen[m.ID] = v.ID
		}
	}
	// Stable order: members common to the previous view keep their order.
	// Tolerated: the previous view came from an elder that died while
	// announcing it, and its successor never installed it (a successor
	// ignores views from elders its detector reports dead, even in a probe
	// answer: it goes above their id but keeps its own order).
	if !w.allowConflicts && n.lastID > 0 && w.nodes[n.prev.Elder().ID].up {
		last := -1
		for _, m := range n.prev.Members {
			if r := v.Rank(m.ID); r >= 0 {
				if r < last {
					w.errorf("%s: %s reorders members of %s", n.id, v, n.prev)
				}
				last = r
			}
		}
	}
	// Crash told apart from leave.
	for _, m := range c.Crashed {
		if got := w.truth[m.ID]; got != "crashed" {
			w.errorf("%s: %s reports %s crashed; it %s", n.id, v, m.ID, orAlive(got))
		}
	}
	for _, m := range c.Left {
		if got := w.truth[m.ID]; got != "left" {
			w.errorf("%s: %s reports %s left; it %s", n.id, v, m.ID, orAlive(got))
		}
	}
	n.lastID, n.prev = v.ID, v
	n.views++
}

func orAlive(s string) string {
	if s == "" {
		return "is alive"
	}
	return s
}

// checkConverged: every running member has installed the same view, whose
// members are exactly the running incarnations, oldest first.
func (w *world) checkConverged() member.View {
	w.t.Helper()
	var want []member.ID
	var first *simNode
	for _, n := range w.sorted() {
		if n.up {
			want = append(want, n.id)
			if first == nil {
				first = n
			}
		}
	}
	if first == nil {
		return member.View{}
	}
	ref, ok := first.m.View()
	if !ok {
		w.errorf("%s has no view\n%s", first.id, w.trace())
		return member.View{}
	}
	var got []member.ID
	for _, m := range ref.Members {
		got = append(got, m.ID)
	}
	slices.SortFunc(got, func(a, b member.ID) int { return cmpName(a, b) })
	if !slices.Equal(got, want) {
		w.errorf("final view %s; running members %v\n%s", ref, want, w.trace())
	}
	for _, n := range w.sorted() {
		if !n.up {
			continue
		}
		v, ok := n.m.View()
		if !ok || v.ID != ref.ID || v.Digest() != ref.Digest() {
			w.errorf("%s has view %s (installed %v), %s has %s\n%s", n.id, v, ok, first.id, ref, w.trace())
		}
		if e, _ := n.m.Elder(); e.ID != ref.Elder().ID {
			w.errorf("%s takes %s for the elder, view %s", n.id, e.ID, ref)
		}
	}
	// The elder is the oldest: the final elder ranks members in the order
	// it first saw them in its views (members first seen together tie).
	if !w.allowConflicts {
		seen := w.cur[ref.Elder().ID.Broker].firstSeen
		for i := 1; i < len(ref.Members); i++ {
			a, b := seen[ref.Members[i-1].ID], seen[ref.Members[i].ID]
			if a > b {
				w.errorf("view %s: %s (first in view %d at the elder) ranks before %s (first in view %d)",
					ref, ref.Members[i-1].ID, a, ref.Members[i].ID, b)
			}
		}
	}
	return ref
}

func cmpName(a, b member.ID) int {
	switch {
	case a.Name() < b.Name():
		return -1
	case a.Name() > b.Name():
		return 1
	}
	return 0
}

func (w *world) trace() string {
	const keep = 40
	lines := w.changes
	if len(lines) > keep {
		lines = lines[len(lines)-keep:]
	}
	s := ""
	for _, l := range lines {
		s += l + "\n"
	}
	return s
}

func isErr(err, target error) bool { return errors.Is(err, target) }

func (w *world) describe() string {
	s := ""
	for _, n := range w.running() {
		s += n.m.Describe() + "\n"
	}
	return s
}
