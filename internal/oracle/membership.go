package oracle

import (
	"slices"
	"strings"

	"github.com/aerie-mq/aerie/internal/member"
)

// Membership invariants (seed 001's needs, docs/MEMBERSHIP.md), checked on
// every view a simulated member installs and once the run has quiesced:
//
//	M1  view ids increase at every member (incarnation): an install never
//	    has an id at or below the one it replaces
//	M2  every installed view contains the member that installs it
//	M3  after healing, every live member has installed one and the same
//	    view, whose members are exactly the live incarnations

// ViewInstalled checks view v, just installed at member self (M1, M2).
func (o *Oracle) ViewInstalled(self member.ID, v member.View) {
	if o.viewAt == nil {
		o.viewAt = map[member.ID]uint64{}
	}
	if last, ok := o.viewAt[self]; ok && v.ID <= last {
		verb := "went back"
		if v.ID == last {
			verb = "did not increase"
		}
		o.fail("M1", "view id %s at %s: %d → %d (%s)", verb, self, last, v.ID, v)
	}
	o.viewAt[self] = v.ID
	if !v.Contains(self) {
		o.fail("M2", "%s installed %s, which does not contain it", self, v)
	}
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
