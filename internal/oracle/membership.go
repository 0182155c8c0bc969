package oracle

import (
	"slices"
	"strings"

	"github.com/aerie-mq/aerie/internal/member"
)

// Membership invariants (the Geode notes' needs, docs/MEMBERSHIP.md), checked
// on every view a simulated member installs and once the run has quiesced:
//
//	M1  view ids increase at every member (incarnation): an install never
//	    has an id at or below the one it replaces
//	M2  every installed view contains the member that installs it
//	M3  after healing, every live member has installed one and the same
//	    view, whose members are exactly the live incarnations
//	M4  a view records a graceful leave as a leave: its maker does not
//	    list as crashed an incarnation whose goodbye reached it, nor as
//	    left one that did not leave
//	F1  fencing: a view made by a member (installed by its first member)
//	    keeps a majority of the view that member had before, counted by
//	    broker, members the new view lists as left not counted, exactly
//	    half enough only with the old view's first counted member (the
//	    rule of internal/member's package documentation). Two sides of a
//	    partition can then never both go on from one view.

// ViewInstalled checks view v, just installed at member self (M1, M2, M4,
// F1).
func (o *Oracle) ViewInstalled(self member.ID, v member.View) {
	if o.viewAt == nil {
		o.viewAt = map[member.ID]member.View{}
	}
	prev, had := o.viewAt[self]
	if had && v.ID <= prev.ID {
		verb := "went back"
		if v.ID == prev.ID {
			verb = "did not increase"
		}
		o.fail("M1", "view id %s at %s: %d → %d (%s)", verb, self, prev.ID, v.ID, v)
	}
	o.viewAt[self] = v
	if !v.Contains(self) {
		o.fail("M2", "%s installed %s, which does not contain it", self, v)
		return
	}
	if v.Elder().ID != self {
		return // installed, not made, here
	}
	for _, id := range v.Crashed {
		if o.left[id] && o.byes[[2]member.ID{id, self}] {
			o.fail("M4", "%s made %s recording %s as crashed; it left, and its goodbye reached %s", self, v, id, self)
		}
	}
	for _, id := range v.Left {
		if !o.left[id] {
			o.fail("M4", "%s made %s recording %s as left; it did not leave", self, v, id)
		}
	}
	if had && !keepsMajority(prev, v) {
		o.fail("F1", "%s made %s from %s: it keeps no majority of %s's brokers (a fenced minority acting as the cluster)", self, v, prev, prev)
	}
}

// Left records that incarnation id left gracefully (M4).
func (o *Oracle) Left(id member.ID) {
	if o.left == nil {
		o.left = map[member.ID]bool{}
	}
	o.left[id] = true
}

// ByeReceived records that leaver's goodbye reached member to (M4).
func (o *Oracle) ByeReceived(leaver, to member.ID) {
	if o.byes == nil {
		o.byes = map[[2]member.ID]bool{}
	}
	o.byes[[2]member.ID{leaver, to}] = true
}

// keepsMajority is F1's rule, written apart from internal/member's.
func keepsMajority(prev, next member.View) bool {
	in := map[string]bool{}
	for _, m := range next.Members {
		in[m.ID.Broker] = true
	}
	left := map[member.ID]bool{}
	for _, id := range next.Left {
		left[id] = true
	}
	var counted []string
	kept := 0
	for _, m := range prev.Members {
		if left[m.ID] {
			continue
		}
		counted = append(counted, m.ID.Broker)
		if in[m.ID.Broker] {
			kept++
		}
	}
	switch n := len(counted); {
	case n == 0 || 2*kept > n:
		return true
	case 2*kept == n:
		return in[counted[0]]
	}
	return false
}

// MemberState is one live member's installed view, for ViewsConverged.
type MemberState struct {
	ID        member.ID
	View      member.View
	Installed bool
}

// ViewsConverged checks, after the run quiesced, that the live members
// agree on one view of exactly themselves (M3).
func (o *Oracle) ViewsConverged(live []MemberState) {
	if len(live) == 0 {
		return
	}
	var want []string
	for _, m := range live {
		want = append(want, m.ID.Name())
	}
	slices.Sort(want)
	ref := live[0]
	for _, m := range live {
		if !m.Installed {
			o.fail("M3", "%s has no view after healing", m.ID)
			return
		}
		if m.View.ID != ref.View.ID || m.View.Digest() != ref.View.Digest() {
			o.fail("M3", "views differ after healing: %s has %s, %s has %s", ref.ID, ref.View, m.ID, m.View)
			return
		}
	}
	var got []string
	for _, m := range ref.View.Members {
		got = append(got, m.ID.Name())
	}
	slices.Sort(got)
	if !slices.Equal(got, want) {
		o.fail("M3", "the agreed view %s is not the live incarnations [%s]", ref.View, strings.Join(want, " "))
	}
}
