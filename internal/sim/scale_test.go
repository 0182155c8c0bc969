package sim

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/aerie-mq/aerie/internal/gd"
)

// TestScaleTopologyShape: the scale topology has the requested number of
// brokers, levels and fan-out, SHBs only at the leaves, and a tree per
// pubend.
func TestScaleTopologyShape(t *testing.T) {
	cases := []struct {
		shape                  ScaleShape
		phbs, ibs, shbs, depth int
	}{
		{ScaleShape{Brokers: 30, Fanout: 3}, 1, 12 + 3, 14, 2},
		{ScaleShape{Brokers: 1000}, 1, 110 + 10, 879, 2},
		{ScaleShape{Brokers: 1000, Pubends: 100}, 4, 110 + 10, 876, 2},
		{ScaleShape{Brokers: 200, Depth: 3, Fanout: 2, NoCells: true}, 1, 14, 185, 3},
		{ScaleShape{Brokers: 104, Depth: 2, Fanout: 1}, 1, 2 + 1, 100, 2},
	}
	for _, c := range cases {
		t.Run(fmt.Sprintf("%+v", c.shape), func(t *testing.T) {
			topo, s, err := ScaleTopology(c.shape)
			if err != nil {
				t.Fatal(err)
			}
			if s.Depth != c.depth {
				t.Errorf("depth %d, want %d", s.Depth, c.depth)
			}
			count := map[Role]int{}
			pubends := 0
			for _, b := range topo.Brokers {
				count[b.Role]++
				pubends += len(b.Pubends)
			}
			if len(topo.Brokers) != c.shape.Brokers || count[PHB] != c.phbs || count[IB] != c.ibs || count[SHB] != c.shbs {
				t.Errorf("%d brokers: %d PHBs, %d IBs, %d SHBs; want %d: %d, %d, %d", len(topo.Brokers), count[PHB], count[IB], count[SHB], c.shape.Brokers, c.phbs, c.ibs, c.shbs)
			}
			if pubends != s.Pubends {
				t.Errorf("%d pubends hosted, want %d", pubends, s.Pubends)
			}
			// Every level multiplies by the fan-out; SHBs hang under the
			// deepest IBs only, evenly.
			width := map[int]int{}
			under := map[string]int{}
			for _, l := range topo.Links {
				if strings.HasPrefix(string(l.Down), "b") {
					var lv, i int
					fmt.Sscanf(string(l.Down), "b%d.%d", &lv, &i)
					if lv > 1 || strings.HasPrefix(string(l.Up), "p1") {
						width[lv]++
					}
				}
				if strings.HasPrefix(string(l.Down), "s") {
					if want := fmt.Sprintf("b%d.", s.Depth); !strings.HasPrefix(string(l.Up), want) {
						t.Errorf("SHB %s hangs under %s, not a deepest IB", l.Down, l.Up)
					}
					under[string(l.Up)]++
				}
			}
			w := 1
			for lv := 1; lv <= s.Depth; lv++ {
				w *= s.Fanout
				if width[lv] != w {
					t.Errorf("level %d has %d IB cells, want %d", lv, width[lv], w)
				}
			}
			lo, hi := c.shbs, 0
			for _, n := range under {
				lo, hi = min(lo, n), max(hi, n)
			}
			if hi-lo > 1 || len(under) != w {
				t.Errorf("SHBs per deepest IB from %d to %d over %d IBs, want even over %d", lo, hi, len(under), w)
			}
			routes := topo.Routes()
			for _, b := range topo.Brokers {
				if b.Role == SHB && len(routes[b.ID]) != s.Pubends {
					t.Errorf("SHB %s is in %d pubend trees, want %d", b.ID, len(routes[b.ID]), s.Pubends)
				}
			}
		})
	}
}

// TestScaleTopologyRefusesImpossibleShapes: a tree that does not fit in
// the brokers is refused with the numbers.
func TestScaleTopologyRefusesImpossibleShapes(t *testing.T) {
	for _, s := range []ScaleShape{{Brokers: 20}, {Brokers: 100, Depth: 3}, {Brokers: 0}, {Brokers: 50, Fanout: -1}} {
		if _, _, err := ScaleTopology(s); err == nil {
			t.Errorf("%+v: no error", s)
		}
	}
	_, _, err := ScaleTopology(ScaleShape{Brokers: 100, Depth: 3})
	if err == nil || !strings.Contains(err.Error(), "needs at least 2121 brokers") {
		t.Errorf("error %v does not say how many brokers the shape needs", err)
	}
}

// TestScaleRefusesWhatDoesNotFit: sizes beyond the memory limit are
// refused before anything is built, with the estimate in the error.
func TestScaleRefusesWhatDoesNotFit(t *testing.T) {
	o := scaleOptions(1, 1000, 100_000_000)
	o.Scale.MemLimit = 16 << 30
	began := time.Now()
	_, err := Run(o)
	if err == nil {
		t.Fatal("a run of 100 M subscriptions under a 16 GiB limit was not refused")
	}
	for _, want := range []string{"need about", "GiB", "per subscription", "refused"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not say %q", err, want)
		}
	}
	if el := time.Since(began); el > 5*time.Second {
		t.Errorf("refusing took %v: the run was built first", el)
	}
	o.Scale.MemLimit = EstimateScaleBytes(ScaleShape{Brokers: 1000, Fanout: 10, Pubends: 4}, 100_000_000)
	if _, err := Run(scaleOptionsWith(o, 0)); err != nil && strings.Contains(err.Error(), "refused") {
		t.Errorf("a run at exactly its estimate was refused: %v", err)
	}
}

// scaleOptionsWith returns o with no subscriptions and a tiny tree, to
// check that the limit alone does not refuse.
func scaleOptionsWith(o Options, subs int) Options {
	o.Scale.Shape = ScaleShape{Brokers: 30, Fanout: 3}
	o.Scale.Subscriptions = subs
	o.FaultPhase, o.ConvergePhase = time.Second, time.Second
	return o
}

func scaleOptions(seed uint64, brokers, subs int) Options {
	o := DefaultOptions(seed)
	o.Topology, o.Scenario = "scale", "scale"
	o.FaultPhase, o.ConvergePhase = 6*time.Second, 14*time.Second
	o.Scale = ScaleParams{Shape: ScaleShape{Brokers: brokers, Fanout: 3}, Subscriptions: subs, Rate: 20, FullChecks: 200}
	return o
}

// TestScaleRun: a small scale run — 30 brokers, 10 000 subscriptions of
// the benchmark's mix, the deep link failure, a cell losing a member and a
// region partitioned — passes the oracle, most sessions checked compactly.
func TestScaleRun(t *testing.T) {
	res, err := Run(scaleOptions(1, 30, 10_000))
	if err != nil {
		t.Fatal(err)
	}
	for _, v := range res.Violations {
		t.Error(v)
	}
	r := res.Scale
	if r == nil {
		t.Fatal("no scale result")
	}
	t.Logf("%d published, %d delivered to %d sessions (%d in full); deep link %s, %d SHBs behind: %d nacks at the PHBs, %d from the SHBs",
		res.Published, res.Delivered, res.Sessions, r.FullSessions, r.DeepLink, r.SHBsBehind, r.PubendNacks, r.SHBNacks)
	if res.Sessions != 10_000 || r.FullSessions < 150 || r.FullSessions > 250 {
		t.Errorf("%d sessions, %d in full: want 10000, about 200", res.Sessions, r.FullSessions)
	}
	if res.Published < 400 || res.Delivered < 1000 {
		t.Errorf("published %d, delivered %d: the run did little", res.Published, res.Delivered)
	}
	if r.SHBsBehind == 0 || r.SHBNacks == 0 {
		t.Errorf("the deep link failure had %d SHBs behind it, which sent %d nacks", r.SHBsBehind, r.SHBNacks)
	}
}

// TestScaleOracleBites: protocol rules broken one at a time are caught in
// the scale topology, where most sessions are compact.
func TestScaleOracleBites(t *testing.T) {
	cases := []struct {
		name string
		mut  gd.Mutation
		want []string
	}{
		{"ignore selectors", gd.MutIgnoreSelector, []string{"I1"}},
		{"deliver past gaps", gd.MutDeliverPastGaps, []string{"I5", "I11"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			o := scaleOptions(1, 30, 3000)
			o.Mutation = c.mut
			res, err := Run(o)
			if err != nil {
				t.Fatal(err)
			}
			for _, v := range res.Violations {
				for _, inv := range c.want {
					if v.Invariant == inv {
						t.Logf("caught: %v", v)
						return
					}
				}
			}
			t.Fatalf("no %v violation with %q (got %v)", c.want, c.name, res.Violations)
		})
	}
}
