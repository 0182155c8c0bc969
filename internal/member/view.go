package member

import (
	"hash/fnv"
	"strconv"
	"strings"
)

// View is one installed membership view. Members are in rank order: a
// member keeps its rank while it stays, newcomers are appended, so
// Members[0] is the elder, the oldest member [001 "stable ordering of node
// IDs ... the left-most node as its Elder"].
type View struct {
	ID      uint64   `json:"id"`
	Members []Member `json:"m"`
	// Joined, Crashed and Left say why the view differs from the issuing
	// elder's previous view.
	Joined  []ID `json:"j,omitempty"`
	Crashed []ID `json:"c,omitempty"`
	Left    []ID `json:"l,omitempty"`
}

// Elder is the view's first member. It panics on an empty view; installed
// views are never empty (they contain the member that installed them).
func (v View) Elder() Member { return v.Members[0] }

// Rank is id's position in the view, or -1.
func (v View) Rank(id ID) int {
	for i, m := range v.Members {
		if m.ID == id {
			return i
		}
	}
	return -1
}

// Contains says whether id is a member of the view.
func (v View) Contains(id ID) bool { return v.Rank(id) >= 0 }

// Member returns id's entry in the view.
func (v View) Member(id ID) (Member, bool) {
	if i := v.Rank(id); i >= 0 {
		return v.Members[i], true
	}
	return Member{}, false
}

// Digest identifies the member list (names in order). Two views with one id
// and different digests are a conflict.
func (v View) Digest() uint64 {
	h := fnv.New64a()
	for _, m := range v.Members {
		h.Write([]byte(m.ID.Name()))
		h.Write([]byte{0})
	}
	return h.Sum64()
}

// String is a stable one-line rendering: "v3[a/1* b/2 c/3]" (* = elder).
func (v View) String() string {
	var b strings.Builder
	b.WriteString("v")
	b.WriteString(strconv.FormatUint(v.ID, 10))
	b.WriteString("[")
	for i, m := range v.Members {
		if i > 0 {
			b.WriteString(" ")
		}
		b.WriteString(m.ID.Name())
		if i == 0 {
			b.WriteString("*")
		}
	}
	b.WriteString("]")
	return b.String()
}

// Change is one view installed at this member, with the difference from the
// view this member had installed before (which may be several ids back:
// a member may skip views it never received).
type Change struct {
	View View
	// Previous is the id of the view installed before (0: none).
	Previous uint64
	Joined   []Member
	// Crashed: members that failed without leaving, or were superseded by a
	// newer incarnation of their broker.
	Crashed []Member
	// Left: members that left gracefully.
	Left []Member
	// Dropped: members that are gone from the view for a reason neither the
	// view nor this member's failure detector gives: the view absorbing
	// this member's cluster in a merge has not admitted them yet, or this
	// member skipped the view that removed them. Treat them as unreachable,
	// not as crashed: they may come back with the same incarnation.
	Dropped []Member
}

// diff computes a Change from prev to next. Why a member went is taken from
// next's own lists, else from this member's failure detector (gone says
// whether it reported a leave or a crash), else it is Dropped.
func diff(prev, next View, gone func(ID) (left, crashed bool)) Change {
	c := Change{View: next, Previous: prev.ID}
	for _, m := range next.Members {
		if !prev.Contains(m.ID) {
			c.Joined = append(c.Joined, m)
		}
	}
	for _, m := range prev.Members {
		if next.Contains(m.ID) {
			continue
		}
		switch {
		case hasID(next.Left, m.ID):
			c.Left = append(c.Left, m)
		case hasID(next.Crashed, m.ID):
			c.Crashed = append(c.Crashed, m)
		default:
			switch left, crashed := gone(m.ID); {
			case left:
				c.Left = append(c.Left, m)
			case crashed:
				c.Crashed = append(c.Crashed, m)
			default:
				c.Dropped = append(c.Dropped, m)
			}
		}
	}
	return c
}

func hasID(ids []ID, id ID) bool {
	for _, x := range ids {
		if x == id {
			return true
		}
	}
	return false
}
