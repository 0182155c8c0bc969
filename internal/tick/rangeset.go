package tick

import (
	"sort"
	"strings"
)

// RangeSet is a set of ticks held as sorted, disjoint, non-adjacent ranges.
// Curiosity C, pending nacks and similar sets use it. The zero value is empty.
type RangeSet struct {
	rs []Range
}

// Runs returns the number of ranges held (the memory the set costs).
func (s *RangeSet) Runs() int { return len(s.rs) }

// Ranges returns the ranges in ascending order. The slice is shared: callers
// must not modify it and must not keep it across mutations.
func (s *RangeSet) Ranges() []Range { return s.rs }

// IsEmpty reports whether the set holds no tick.
func (s *RangeSet) IsEmpty() bool { return len(s.rs) == 0 }

// Clear empties the set, keeping its storage.
func (s *RangeSet) Clear() { s.rs = s.rs[:0] }

// first returns the index of the first range whose Hi >= t.
func (s *RangeSet) first(t Tick) int {
	return sort.Search(len(s.rs), func(i int) bool { return s.rs[i].Hi >= t })
}

// Contains reports whether t is in the set.
func (s *RangeSet) Contains(t Tick) bool {
	i := s.first(t)
	return i < len(s.rs) && s.rs[i].Lo <= t
}

// Add inserts every tick of r.
func (s *RangeSet) Add(r Range) {
	if r.Empty() {
		return
	}
	// Ranges that touch or overlap r (adjacent ones merge too).
	lo := r.Lo
	if lo > 0 {
		lo--
	}
	i := s.first(lo)
	j := i
	for j < len(s.rs) && (r.Hi == Max || s.rs[j].Lo <= r.Hi+1) {
		r.Lo = min(r.Lo, s.rs[j].Lo)
		r.Hi = max(r.Hi, s.rs[j].Hi)
		j++
	}
	if i == j {
		s.rs = append(s.rs, Range{})
		copy(s.rs[i+1:], s.rs[i:])
		s.rs[i] = r
		return
	}
	s.rs[i] = r
	s.rs = append(s.rs[:i+1], s.rs[j:]...)
}

// Remove deletes every tick of r.
func (s *RangeSet) Remove(r Range) {
	if r.Empty() {
		return
	}
	i := s.first(r.Lo)
	var keep []Range
	j := i
	for j < len(s.rs) && s.rs[j].Lo <= r.Hi {
		x := s.rs[j]
		if x.Lo < r.Lo {
			keep = append(keep, Range{x.Lo, r.Lo - 1})
		}
		if x.Hi > r.Hi {
			keep = append(keep, Range{r.Hi + 1, x.Hi})
		}
		j++
	}
	if i == j {
		return
	}
	tail := append(keep, s.rs[j:]...)
	s.rs = append(s.rs[:i], tail...)
}

// RemoveBelow deletes every tick <= t.
func (s *RangeSet) RemoveBelow(t Tick) {
	i := s.first(t + 1)
	if t == Max {
		i = len(s.rs)
	}
	n := copy(s.rs, s.rs[i:])
	s.rs = s.rs[:n]
	if n > 0 && s.rs[0].Lo <= t {
		s.rs[0].Lo = t + 1
	}
}

// Covers reports whether every tick of r is in the set.
func (s *RangeSet) Covers(r Range) bool {
	i := s.first(r.Lo)
	return i < len(s.rs) && s.rs[i].Lo <= r.Lo && s.rs[i].Hi >= r.Hi
}

// Visit calls fn for each part of the set inside r, in ascending order.
func (s *RangeSet) Visit(r Range, fn func(Range)) {
	if r.Empty() {
		return
	}
	for i := s.first(r.Lo); i < len(s.rs) && s.rs[i].Lo <= r.Hi; i++ {
		fn(s.rs[i].Intersect(r))
	}
}

// Overlaps reports whether any tick of r is in the set.
func (s *RangeSet) Overlaps(r Range) bool {
	if r.Empty() {
		return false
	}
	i := s.first(r.Lo)
	return i < len(s.rs) && s.rs[i].Lo <= r.Hi
}

// Min returns the smallest tick in the set and whether there is one.
func (s *RangeSet) Min() (Tick, bool) {
	if len(s.rs) == 0 {
		return 0, false
	}
	return s.rs[0].Lo, true
}

func (s *RangeSet) String() string {
	var b strings.Builder
	b.WriteByte('{')
	for i, r := range s.rs {
		if i > 0 {
			b.WriteByte(' ')
		}
		b.WriteString(r.String())
	}
	b.WriteByte('}')
	return b.String()
}
