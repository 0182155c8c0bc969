package client

import (
	"cmp"
	"slices"
)

// pendingSet holds a client's unacknowledged publishes by seq. A client's
// seqs are consecutive and at most MaxInflight are unacknowledged, so a
// ring indexed by seq serves instead of a map: no hashing and no map
// growth per publish. Two pending seqs that share a slot (one publish
// left unanswered while a whole ring's worth of later ones were acked)
// double the ring until they do not. All methods run under the client's
// mu.
type pendingSet struct {
	slots []*publish // len is a power of two; slot seq & (len-1)
	n     int
}

const pendingMinSlots = 64

func (s *pendingSet) len() int { return s.n }

// put adds p, which must not be pending yet.
func (s *pendingSet) put(p *publish) {
	if len(s.slots) == 0 {
		s.slots = make([]*publish, pendingMinSlots)
	}
	for s.slots[s.slot(p.seq)] != nil {
		s.grow()
	}
	s.slots[s.slot(p.seq)] = p
	s.n++
}

// take removes and returns the publish with seq (nil: none is pending).
func (s *pendingSet) take(seq uint64) *publish {
	if len(s.slots) == 0 {
		return nil
	}
	i := s.slot(seq)
	p := s.slots[i]
	if p == nil || p.seq != seq {
		return nil
	}
	s.slots[i] = nil
	s.n--
	return p
}

// inOrder returns the pending publishes by seq (a resend after reconnect).
func (s *pendingSet) inOrder() []*publish {
	out := make([]*publish, 0, s.n)
	for _, p := range s.slots {
		if p != nil {
			out = append(out, p)
		}
	}
	slices.SortFunc(out, func(a, b *publish) int { return cmp.Compare(a.seq, b.seq) })
	return out
}

// takeAll empties the set and returns what it held, by seq.
func (s *pendingSet) takeAll() []*publish {
	out := s.inOrder()
	clear(s.slots)
	s.n = 0
	return out
}

func (s *pendingSet) slot(seq uint64) uint64 { return seq & uint64(len(s.slots)-1) }

// grow doubles the ring, placing every pending publish again.
func (s *pendingSet) grow() {
	old := s.slots
	for {
		s.slots = make([]*publish, 2*len(s.slots))
		if s.place(old) {
			return
		}
	}
}

// place puts old's publishes into s.slots; false if two share a slot.
func (s *pendingSet) place(old []*publish) bool {
	for _, p := range old {
		if p == nil {
			continue
		}
		if s.slots[s.slot(p.seq)] != nil {
			return false
		}
		s.slots[s.slot(p.seq)] = p
	}
	return true
}
