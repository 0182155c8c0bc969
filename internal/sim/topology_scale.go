package sim

import (
	"fmt"

	"github.com/aerie-mq/aerie/internal/gd"
	"github.com/aerie-mq/aerie/internal/msg"
)

// ScaleShape is the shape of `aerie sim --topology scale`: a tree with the
// PHBs at the root, Depth levels of IBs each Fanout times wider than the one
// above, and SHBs at the leaves. Zero fields take defaults.
type ScaleShape struct {
	// Brokers is every broker of the tree: PHBs, IBs (cell twins
	// included) and SHBs. The SHBs are what the PHBs and IBs leave.
	Brokers int
	// Depth is the number of IB levels (default: the deepest tree of
	// Fanout that still leaves every deepest IB at least one SHB).
	Depth int
	// Fanout is how many IBs each IB of the level above feeds (default 10);
	// the first level has Fanout IBs.
	Fanout int
	// Pubends are spread round-robin over the PHBs (default 4); there are
	// ceil(Pubends/25) PHBs, at most 4.
	Pubends int
	// NoCells keeps every first-level IB a cell of one broker; otherwise
	// each is a cell of two (Gryphon GD §3's virtual broker), so that a
	// cell can lose a member.
	NoCells bool
}

const (
	defaultScaleFanout  = 10
	defaultScalePubends = 4
	maxScalePHBs        = 4
)

// withDefaults fills the zero fields and checks that the tree fits.
func (s ScaleShape) withDefaults() (ScaleShape, error) {
	if s.Fanout == 0 {
		s.Fanout = defaultScaleFanout
	}
	if s.Pubends == 0 {
		s.Pubends = defaultScalePubends
	}
	switch {
	case s.Brokers <= 0:
		return s, fmt.Errorf("sim: scale topology: --brokers must be positive, got %d", s.Brokers)
	case s.Fanout < 1:
		return s, fmt.Errorf("sim: scale topology: --fanout must be at least 1, got %d", s.Fanout)
	case s.Depth < 0:
		return s, fmt.Errorf("sim: scale topology: --depth must be at least 1, got %d", s.Depth)
	case s.Pubends < 1:
		return s, fmt.Errorf("sim: scale topology: --pubends must be at least 1, got %d", s.Pubends)
	}
	if s.Depth == 0 {
		for d := 1; s.needs(d) <= s.Brokers; d++ {
			s.Depth = d
			if s.Fanout == 1 {
				break // a line of IBs would only grow
			}
		}
		if s.Depth == 0 {
			return s, fmt.Errorf("sim: scale topology: %d brokers are too few for fan-out %d: one level needs %d (PHBs, IBs and one SHB per IB)", s.Brokers, s.Fanout, s.needs(1))
		}
	}
	if n := s.needs(s.Depth); n > s.Brokers {
		return s, fmt.Errorf("sim: scale topology: depth %d with fan-out %d needs at least %d brokers (PHBs, IBs and one SHB per deepest IB), got %d", s.Depth, s.Fanout, n, s.Brokers)
	}
	return s, nil
}

func (s ScaleShape) phbs() int { return min(maxScalePHBs, (s.Pubends+24)/25) }

func (s ScaleShape) twins() int {
	if s.NoCells {
		return 0
	}
	return s.Fanout
}

// ibs is the number of IBs in d levels, cell twins not counted.
func (s ScaleShape) ibs(d int) int {
	n, w := 0, 1
	for range d {
		w *= s.Fanout
		n += w
		if n > 1<<30 {
			return 1 << 30 // beyond any broker count: refused
		}
	}
	return n
}

// needs is the fewest brokers a tree of depth d holds: PHBs, IBs with their
// twins, and one SHB under each deepest IB.
func (s ScaleShape) needs(d int) int {
	return s.phbs() + s.ibs(d) + s.twins() + (s.ibs(d) - s.ibs(d-1))
}

// ScaleTopology builds the tree of shape s: PHBs p1…, IBs b<level>.<i>
// (first-level cells with their twin b1.<i>x), SHBs s1… spread evenly
// under the deepest IBs.
func ScaleTopology(s ScaleShape) (Topology, ScaleShape, error) {
	s, err := s.withDefaults()
	if err != nil {
		return Topology{}, s, err
	}
	t := Topology{Name: "scale", Cells: gd.Cells{}}
	phbs := make([]msg.NodeID, s.phbs())
	for i := range phbs {
		phbs[i] = msg.NodeID(fmt.Sprintf("p%d", i+1))
		t.Brokers = append(t.Brokers, Broker{ID: phbs[i], Role: PHB})
	}
	for j := 1; j <= s.Pubends; j++ {
		b := &t.Brokers[(j-1)%len(phbs)]
		b.Pubends = append(b.Pubends, msg.PubendID(fmt.Sprintf("P%d", j)))
	}
	above := phbs
	for l := 1; l <= s.Depth; l++ {
		var level []msg.NodeID
		width := len(above) * s.Fanout
		if l == 1 {
			width = s.Fanout
		}
		for i := range width {
			id := msg.NodeID(fmt.Sprintf("b%d.%d", l, i+1))
			t.Brokers = append(t.Brokers, Broker{ID: id, Role: IB})
			level = append(level, id)
			if l == 1 {
				for _, p := range phbs {
					t.Links = append(t.Links, Link{p, id})
				}
				if !s.NoCells {
					twin := id + "x"
					t.Brokers = append(t.Brokers, Broker{ID: twin, Role: IB})
					t.Cells[id] = []msg.NodeID{id, twin}
				}
				continue
			}
			t.Links = append(t.Links, Link{above[i/s.Fanout], id})
		}
		above = level
	}
	for i := range s.Brokers - len(t.Brokers) {
		id := msg.NodeID(fmt.Sprintf("s%d", i+1))
		t.Brokers = append(t.Brokers, Broker{ID: id, Role: SHB})
		t.Links = append(t.Links, Link{above[i%len(above)], id})
	}
	return t, s, nil
}
