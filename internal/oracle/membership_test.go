package oracle

import (
	"strings"
	"testing"

	"github.com/aerie-mq/aerie/internal/member"
)

func view(id uint64, names ...string) member.View {
	v := member.View{ID: id}
	for _, n := range names {
		id, err := member.ParseName(n)
		if err != nil {
			panic(err)
		}
		v.Members = append(v.Members, member.Member{ID: id})
	}
	return v
}

func mid(name string) member.ID {
	id, err := member.ParseName(name)
	if err != nil {
		panic(err)
	}
	return id
}

// Each membership invariant is reported under its name, and correct
// histories are not.
func TestMembershipInvariants(t *testing.T) {
	cases := []struct {
		name string
		run  func(o *Oracle)
		want string // "" for none
	}{
		{"ids increase", func(o *Oracle) {
			o.ViewInstalled(mid("b2/1"), view(4, "b1/1", "b2/1", "b3/1"))
			o.ViewInstalled(mid("b2/1"), view(5, "b2/1", "b3/1"))
		}, ""},
		{"a minority issues", func(o *Oracle) {
			o.ViewInstalled(mid("b2/1"), view(4, "b1/1", "b2/1", "b3/1"))
			o.ViewInstalled(mid("b2/1"), view(5, "b2/1"))
		}, "F1: b2/1 made v5[b2/1*] from v4[b1/1* b2/1 b3/1]"},
		{"half without the first member issues", func(o *Oracle) {
			o.ViewInstalled(mid("b2/1"), view(4, "b1/1", "b2/1"))
			o.ViewInstalled(mid("b2/1"), view(5, "b2/1"))
		}, "F1: b2/1 made v5[b2/1*]"},
		{"half with the first member, a restart, a leave", func(o *Oracle) {
			o.ViewInstalled(mid("b1/1"), view(4, "b1/1", "b2/1", "b3/1", "b4/1"))
			o.ViewInstalled(mid("b1/1"), view(5, "b1/1", "b2/1")) // half, with b1
			v := view(6, "b1/1", "b2/2")                          // b2 restarted
			o.ViewInstalled(mid("b1/1"), v)
			o.Left(mid("b2/2"))
			v = view(7, "b1/1")
			v.Left = []member.ID{mid("b2/2")}
			o.ViewInstalled(mid("b1/1"), v)
		}, ""},
		{"a leave recorded as a crash", func(o *Oracle) {
			o.ViewInstalled(mid("b1/1"), view(4, "b1/1", "b2/1", "b3/1"))
			o.Left(mid("b3/1"))
			o.ByeReceived(mid("b3/1"), mid("b1/1"))
			v := view(5, "b1/1", "b2/1")
			v.Crashed = []member.ID{mid("b3/1")}
			o.ViewInstalled(mid("b1/1"), v)
		}, "M4: b1/1 made v5[b1/1* b2/1] recording b3/1 as crashed"},
		{"a leave whose goodbye was lost", func(o *Oracle) {
			o.ViewInstalled(mid("b1/1"), view(4, "b1/1", "b2/1", "b3/1"))
			o.Left(mid("b3/1"))
			v := view(5, "b1/1", "b2/1")
			v.Crashed = []member.ID{mid("b3/1")}
			o.ViewInstalled(mid("b1/1"), v)
		}, ""},
		{"a crash recorded as a leave", func(o *Oracle) {
			o.ViewInstalled(mid("b1/1"), view(4, "b1/1", "b2/1", "b3/1"))
			v := view(5, "b1/1", "b2/1")
			v.Left = []member.ID{mid("b3/1")}
			o.ViewInstalled(mid("b1/1"), v)
		}, "M4: b1/1 made v5[b1/1* b2/1] recording b3/1 as left"},
		{"id goes back", func(o *Oracle) {
			o.ViewInstalled(mid("b2/1"), view(5, "b1/1", "b2/1"))
			o.ViewInstalled(mid("b2/1"), view(4, "b1/1", "b2/1"))
		}, "M1: view id went back at b2/1: 5 → 4"},
		{"id repeats", func(o *Oracle) {
			o.ViewInstalled(mid("b2/1"), view(5, "b1/1", "b2/1"))
			o.ViewInstalled(mid("b2/1"), view(5, "b1/1", "b2/1"))
		}, "M1: view id did not increase"},
		{"a new incarnation starts afresh", func(o *Oracle) {
			o.ViewInstalled(mid("b2/1"), view(5, "b2/1"))
			o.ViewInstalled(mid("b2/2"), view(1, "b2/2"))
		}, ""},
		{"view without its installer", func(o *Oracle) {
			o.ViewInstalled(mid("b2/1"), view(3, "b1/1"))
		}, "M2: b2/1 installed v3[b1/1*]"},
		{"converged", func(o *Oracle) {
			v := view(7, "b1/1", "b2/3")
			o.ViewsConverged([]MemberState{{mid("b1/1"), v, true}, {mid("b2/3"), v, true}})
		}, ""},
		{"disagree", func(o *Oracle) {
			o.ViewsConverged([]MemberState{{mid("b1/1"), view(7, "b1/1", "b2/3"), true}, {mid("b2/3"), view(6, "b1/1", "b2/3"), true}})
		}, "M3: views differ"},
		{"no view", func(o *Oracle) {
			o.ViewsConverged([]MemberState{{mid("b1/1"), view(7, "b1/1"), true}, {mid("b2/3"), member.View{}, false}})
		}, "M3: b2/3 has no view"},
		{"a dead incarnation stays", func(o *Oracle) {
			v := view(7, "b1/1", "b2/2", "b2/3")
			o.ViewsConverged([]MemberState{{mid("b1/1"), v, true}, {mid("b2/3"), v, true}})
		}, "M3: the agreed view v7[b1/1* b2/2 b2/3] is not the live incarnations [b1/1 b2/3]"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			o := New()
			c.run(o)
			vs := o.Violations()
			switch {
			case c.want == "" && len(vs) > 0:
				t.Fatalf("unexpected %v", vs[0])
			case c.want != "" && (len(vs) == 0 || !strings.HasPrefix(vs[0].String(), c.want)):
				t.Fatalf("got %v, want %q", vs, c.want)
			}
		})
	}
}
