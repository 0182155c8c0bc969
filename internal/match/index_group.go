package match

import (
	"encoding/binary"
	"math"
	"strings"
)

// accEnt is a group in an access list, with what rejects most candidates
// inline: the pattern and the group's first other predicate (noPred if
// none), so that a rejected candidate costs no access to its group record.
type accEnt struct {
	g, pat, p0 int32
}

const noPred = math.MaxInt32

const groupInline = 4

// group is the hot part of a group of identical subscriptions. p holds the
// predicates other than the access one (equality predicates as ^pid, others
// as pid), the first groupInline of them inline.
type group struct {
	pat int32
	np  int32
	p   [groupInline]int32
	ids []uint64
}

type groupCold struct {
	key     string
	more    []int32 // predicates beyond groupInline
	acc     int32   // access predicate, or -1
	accWord string  // acc < 0: first pattern word ("" = wild list)
}

func removeEnt(l []accEnt, g int32) []accEnt {
	for i := range l {
		if l[i].g == g {
			l[i] = l[len(l)-1]
			return l[:len(l)-1]
		}
	}
	return l
}

func firstWord(s string) string {
	if i := strings.IndexByte(s, '.'); i >= 0 {
		return s[:i]
	}
	return s
}

// chooseAccess picks the predicate a new group is filed under: the equality
// predicate used by the fewest selectors (ties: the shorter access list),
// else a BETWEEN, else a one-sided range; -1 if there is none.
func (ix *Index) chooseAccess(preds []int32) int32 {
	best := int32(-1)
	for _, id := range preds {
		p := &ix.preds[id]
		if p.kind != cjEq {
			continue
		}
		if best < 0 {
			best = id
			continue
		}
		b := &ix.preds[best]
		pr, br := ix.pcold[id].refs, ix.pcold[best].refs
		if pr < br || (pr == br && len(p.acc) < len(b.acc)) {
			best = id
		}
	}
	if best >= 0 {
		return best
	}
	for _, k := range [...]conjKind{cjBetween, cjCmp} {
		for _, id := range preds {
			if ix.preds[id].kind == k {
				return id
			}
		}
	}
	return -1
}

func (ix *Index) groupKey(pat int32, preds []int32) string {
	b := make([]byte, 0, 4+4*len(preds))
	b = binary.LittleEndian.AppendUint32(b, uint32(pat))
	for _, id := range preds {
		b = binary.LittleEndian.AppendUint32(b, uint32(id))
	}
	return string(b)
}

func (ix *Index) newGroup(key string, pat int32, pattern Pattern, preds []int32) int32 {
	var g int32
	if n := len(ix.groupFree); n > 0 {
		g = ix.groupFree[n-1]
		ix.groupFree = ix.groupFree[:n-1]
	} else {
		g = int32(len(ix.groups))
		ix.groups = append(ix.groups, group{})
		ix.gcold = append(ix.gcold, groupCold{})
	}
	acc := ix.chooseAccess(preds)
	gr := group{pat: pat, ids: ix.groups[g].ids[:0]}
	gc := groupCold{key: key, acc: acc}
	for _, id := range preds {
		if id == acc {
			continue
		}
		e := id
		if ix.preds[id].kind == cjEq {
			e = ^id
		}
		if gr.np < groupInline {
			gr.p[gr.np] = e
		} else {
			gc.more = append(gc.more, e)
		}
		gr.np++
	}
	ent := accEnt{g: g, pat: pat, p0: noPred}
	if gr.np > 0 {
		ent.p0 = gr.p[0]
	}
	if acc >= 0 {
		p := &ix.preds[acc]
		p.acc = append(p.acc, ent)
		if len(p.acc) == 1 && p.kind != cjEq {
			ix.addRange(acc)
		}
	} else {
		w := ""
		if len(pattern.words) > 0 {
			w = pattern.words[0]
		}
		if w == "" || w == "*" || w == ">" {
			ix.alwaysWild = append(ix.alwaysWild, ent)
			w = ""
		} else {
			ix.always[w] = append(ix.always[w], ent)
		}
		gc.accWord = w
	}
	ix.groups[g], ix.gcold[g] = gr, gc
	ix.groupByKey[key] = g
	return g
}

func (ix *Index) dropGroup(g int32) {
	gc := &ix.gcold[g]
	if gc.acc >= 0 {
		p := &ix.preds[gc.acc]
		p.acc = removeEnt(p.acc, g)
		if len(p.acc) == 0 && p.kind != cjEq {
			ix.removeRange(gc.acc)
		}
	} else if gc.accWord == "" {
		ix.alwaysWild = removeEnt(ix.alwaysWild, g)
	} else if l := removeEnt(ix.always[gc.accWord], g); len(l) == 0 {
		delete(ix.always, gc.accWord)
	} else {
		ix.always[gc.accWord] = l
	}
	delete(ix.groupByKey, gc.key)
	ix.groups[g] = group{ids: ix.groups[g].ids[:0]}
	ix.gcold[g] = groupCold{}
	ix.groupFree = append(ix.groupFree, g)
}
