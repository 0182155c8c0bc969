package sim

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"

	"github.com/aerie-mq/aerie/internal/gd"
	"github.com/aerie-mq/aerie/internal/msg"
)

// Role of a broker in the simulated network.
type Role int

const (
	PHB Role = iota
	IB
	SHB
)

func (r Role) String() string { return [...]string{"PHB", "IB", "SHB"}[r] }

// Broker is one simulated broker.
type Broker struct {
	ID      msg.NodeID
	Role    Role
	Pubends []msg.PubendID // PHB only
}

// Link joins an upstream broker to a downstream one.
type Link struct{ Up, Down msg.NodeID }

// Topology is a network: per pubend, the links reachable from its PHB form a
// tree (every non-PHB broker has exactly one upstream neighbour).
//
// Links join cells. A cell is the broker of the same id unless Cells lists
// it with several members (seed 000 §3: a virtual broker on several
// machines); every member of an upstream cell then links to every member
// of the downstream cell (a link bundle), and members of a cell link to
// each other (for sideways routing).
type Topology struct {
	Name    string
	Brokers []Broker
	Links   []Link
	Cells   gd.Cells
}

// withCells makes about half the IBs that have downstream cells cells of
// two brokers: b3 gets a twin b3x in cell b3. As in seed 000 §3, only
// intermediate brokers form cells: a leaf (a subend) would have one member
// without the flow poll its upstream forever (DCT).
func (t Topology) withCells(rng *rand.Rand) Topology {
	out := Topology{Name: t.Name, Links: t.Links, Cells: gd.Cells{}}
	hasDown := map[msg.NodeID]bool{}
	for _, l := range t.Links {
		hasDown[l.Up] = true
	}
	for _, b := range t.Brokers {
		out.Brokers = append(out.Brokers, b)
		if b.Role == IB && rng.IntN(2) == 0 && hasDown[b.ID] {
			twin := b.ID + "x"
			out.Brokers = append(out.Brokers, Broker{ID: twin, Role: IB})
			out.Cells[b.ID] = []msg.NodeID{b.ID, twin}
		}
	}
	return out
}

// CellOf returns the cell of broker id.
func (t Topology) CellOf(id msg.NodeID) msg.NodeID {
	for c, ms := range t.Cells {
		for _, m := range ms {
			if m == id {
				return c
			}
		}
	}
	return id
}

func (t Topology) members(c msg.NodeID) []msg.NodeID {
	if ms, ok := t.Cells[c]; ok {
		return ms
	}
	return []msg.NodeID{c}
}

// Physical returns the connections between brokers: every pair of members
// across each virtual link, and every pair within a cell.
func (t Topology) Physical() []Link {
	var out []Link
	for _, l := range t.Links {
		for _, u := range t.members(l.Up) {
			for _, d := range t.members(l.Down) {
				out = append(out, Link{u, d})
			}
		}
	}
	for _, b := range t.Brokers {
		ms := t.members(t.CellOf(b.ID))
		for _, m := range ms {
			if m > b.ID {
				out = append(out, Link{b.ID, m})
			}
		}
	}
	return out
}

// Topologies lists the named topologies `aerie sim --topology` accepts.
var topologyNames = []string{"swarm", "line", "fig6", "ds", "cc", "cc-e2", "cc-e3", "cc-e4", "cc-collapse-ib", "cc-collapse-pb", "scale"}

// TopologyNames returns the names accepted by BuildTopology.
func TopologyNames() []string { return append([]string(nil), topologyNames...) }

// BuildTopology returns a named topology; "swarm" draws one from rng.
func BuildTopology(name string, rng *rand.Rand) (Topology, error) {
	switch name {
	case "", "swarm":
		return swarmTopology(rng), nil
	case "scale":
		// The shape comes from Options.Scale (makeScalePlan); this is
		// the smallest tree of the defaults.
		t, _, err := ScaleTopology(ScaleShape{Brokers: 30, Fanout: 3})
		return t, err
	case "line":
		return Topology{Name: "line",
			Brokers: []Broker{{ID: "p1", Role: PHB, Pubends: []msg.PubendID{"P1"}}, {ID: "b1", Role: IB}, {ID: "s1", Role: SHB}},
			Links:   []Link{{"p1", "b1"}, {"b1", "s1"}}}, nil
	case "ds":
		// Gryphon DS, DSN 2003 §5: one PHB with four pubends, one SHB.
		return Topology{Name: "ds",
			Brokers: []Broker{{ID: "p1", Role: PHB, Pubends: []msg.PubendID{"P1", "P2", "P3", "P4"}}, {ID: "s1", Role: SHB}},
			Links:   []Link{{"p1", "s1"}}}, nil
	case "cc-e3":
		// Gryphon CC Fig. 12: one PHB, three IBs, five SHBs, asymmetric
		// (s4 and s5 three hops from the pubend, the others two).
		return Topology{Name: name,
			Brokers: []Broker{{ID: "p1", Role: PHB, Pubends: []msg.PubendID{"P1"}},
				{ID: "b1", Role: IB}, {ID: "b2", Role: IB}, {ID: "b3", Role: IB},
				{ID: "s1", Role: SHB}, {ID: "s2", Role: SHB}, {ID: "s3", Role: SHB}, {ID: "s4", Role: SHB}, {ID: "s5", Role: SHB}},
			Links: []Link{{"p1", "b1"}, {"p1", "b2"}, {"b1", "s1"}, {"b1", "s2"}, {"b1", "b3"}, {"b2", "s3"}, {"b3", "s4"}, {"b3", "s5"}}}, nil
	case "cc", "cc-e2", "cc-e4", "cc-collapse-ib", "cc-collapse-pb":
		// Gryphon CC Fig. 1: one PHB, an IB and two SHBs.
		return Topology{Name: name,
			Brokers: []Broker{{ID: "p1", Role: PHB, Pubends: []msg.PubendID{"P1"}}, {ID: "b1", Role: IB},
				{ID: "s1", Role: SHB}, {ID: "s2", Role: SHB}},
			Links: []Link{{"p1", "b1"}, {"b1", "s1"}, {"b1", "s2"}}}, nil
	case "fig6":
		// Seed 000 Fig. 3 with one broker per cell (docs/CONCEPTS.md "Roles"): p1 hosts
		// four pubends; IB1 (b1) feeds s1, s2; IB2 (b3) feeds s3–s5.
		return Topology{Name: "fig6",
			Brokers: []Broker{
				{ID: "p1", Role: PHB, Pubends: []msg.PubendID{"P1", "P2", "P3", "P4"}},
				{ID: "b1", Role: IB}, {ID: "b3", Role: IB},
				{ID: "s1", Role: SHB}, {ID: "s2", Role: SHB}, {ID: "s3", Role: SHB}, {ID: "s4", Role: SHB}, {ID: "s5", Role: SHB},
			},
			Links: []Link{{"p1", "b1"}, {"p1", "b3"}, {"b1", "s1"}, {"b1", "s2"}, {"b3", "s3"}, {"b3", "s4"}, {"b3", "s5"}}}, nil
	}
	return Topology{}, fmt.Errorf("sim: unknown topology %q (known: %s)", name, strings.Join(topologyNames, ", "))
}

// swarmTopology draws 1–3 PHBs with 1–4 pubends each, 0–3 levels of IBs and
// 1–6 SHBs (issue 2 item 7).
func swarmTopology(rng *rand.Rand) Topology {
	t := Topology{Name: "swarm"}
	nPHB := 1 + rng.IntN(3)
	var phbs []msg.NodeID
	pn := 0
	for i := 1; i <= nPHB; i++ {
		b := Broker{ID: msg.NodeID(fmt.Sprintf("p%d", i)), Role: PHB}
		for j := 0; j < 1+rng.IntN(4); j++ {
			pn++
			b.Pubends = append(b.Pubends, msg.PubendID(fmt.Sprintf("P%d", pn)))
		}
		t.Brokers = append(t.Brokers, b)
		phbs = append(phbs, b.ID)
	}
	levels := rng.IntN(4)
	var ibs [][]msg.NodeID
	n := 0
	for l := 0; l < levels; l++ {
		count := 1
		if l > 0 {
			count = 1 + rng.IntN(2)
		}
		var level []msg.NodeID
		for i := 0; i < count; i++ {
			n++
			id := msg.NodeID(fmt.Sprintf("b%d", n))
			t.Brokers = append(t.Brokers, Broker{ID: id, Role: IB})
			level = append(level, id)
			if l == 0 {
				for _, p := range phbs {
					t.Links = append(t.Links, Link{p, id})
				}
			} else {
				prev := ibs[l-1]
				t.Links = append(t.Links, Link{prev[rng.IntN(len(prev))], id})
			}
		}
		ibs = append(ibs, level)
	}
	nSHB := 1 + rng.IntN(6)
	for i := 1; i <= nSHB; i++ {
		id := msg.NodeID(fmt.Sprintf("s%d", i))
		t.Brokers = append(t.Brokers, Broker{ID: id, Role: SHB})
		if levels == 0 {
			for _, p := range phbs {
				t.Links = append(t.Links, Link{p, id})
			}
			continue
		}
		l := rng.IntN(levels)
		t.Links = append(t.Links, Link{ibs[l][rng.IntN(len(ibs[l]))], id})
	}
	return t
}

// Routes computes every cell's place in every pubend's tree, keyed by cell
// id (every member of a cell has its cell's routes).
func (t Topology) Routes() map[msg.NodeID][]gd.Route {
	downs := map[msg.NodeID][]msg.NodeID{}
	ups := map[msg.NodeID][]msg.NodeID{}
	for _, l := range t.Links {
		downs[l.Up] = append(downs[l.Up], l.Down)
		ups[l.Down] = append(ups[l.Down], l.Up)
	}
	out := map[msg.NodeID][]gd.Route{}
	for _, b := range t.Brokers {
		if b.Role != PHB || t.CellOf(b.ID) != b.ID {
			continue // a replicated cell's tree is walked once, from the cell
		}
		for _, p := range b.Pubends {
			// Walk the tree below the PHB; a non-PHB broker's upstream for p
			// is the neighbour that reaches it from this PHB.
			var walk func(node, up msg.NodeID)
			walk = func(node, up msg.NodeID) {
				var down []msg.NodeID
				for _, d := range downs[node] {
					down = append(down, d)
				}
				out[node] = append(out[node], gd.Route{Pubend: p, Up: up, Down: down})
				for _, d := range down {
					walk(d, node)
				}
			}
			walk(b.ID, "")
		}
	}
	return out
}

func (t Topology) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s:", t.Name)
	for _, br := range t.Brokers {
		fmt.Fprintf(&b, " %s(%s", br.ID, br.Role)
		if len(br.Pubends) > 0 {
			fmt.Fprintf(&b, " %v", br.Pubends)
		}
		b.WriteString(")")
	}
	b.WriteString(" links:")
	for _, l := range t.Links {
		fmt.Fprintf(&b, " %s>%s", l.Up, l.Down)
	}
	if len(t.Cells) > 0 {
		var cs []string
		for c, ms := range t.Cells {
			cs = append(cs, fmt.Sprintf("%s=%v", c, ms))
		}
		slices.Sort(cs)
		fmt.Fprintf(&b, " cells: %s", strings.Join(cs, " "))
	}
	return b.String()
}
