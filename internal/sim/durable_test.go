package sim

import (
	"testing"

	"github.com/aerie-mq/aerie/internal/gd"
)

// TestDurableSubscribers runs seeds with durable subscribers (every run
// without floors of its own has them): no violation, and the
// runs exercise reconnections (several sessions per subscriber).
func TestDurableSubscribers(t *testing.T) {
	sessions, gaps, runs, paused := 0, 0, 0, 0
	for s := uint64(1); s <= 24 && runs < 8; s++ {
		res, err := Run(DefaultOptions(s))
		if err != nil {
			t.Fatal(err)
		}
		if len(res.Violations) > 0 {
			t.Fatalf("seed %d: %v\n%s", s, res.Violations, res.Plan)
		}
		if res.DurableSessions > 0 {
			runs++
			sessions += res.DurableSessions
			paused += res.WindowPauses + res.WindowCuts
			gaps += res.Gaps
		}
	}
	t.Logf("%d runs with durable subscribers: %d sessions, %d gaps, %d catch-up pauses and cuts for a slow subscriber's window", runs, sessions, gaps, paused)
	// A session starts only if its SHB answers before the subscriber goes
	// away again, which faults often prevent; more sessions than runs
	// means subscribers did come back with their checkpoints.
	if runs < 4 || sessions <= runs {
		t.Fatalf("durable subscribers barely ran: %d runs, %d sessions", runs, sessions)
	}
	if paused == 0 {
		t.Fatal("no slow durable subscriber's catch-up was ever paced: the swarm does not exercise the window")
	}
}

// TestOracleBitesDurable breaks the catch-up one way at a time; the oracle
// must notice (docs/CONCEPTS.md I6).
func TestOracleBitesDurable(t *testing.T) {
	for _, c := range []struct {
		name string
		mut  gd.Mutation
		want []string
	}{
		{"the PHB answers a replay with a gap over ticks not L", gd.MutGapNotFinal, []string{"I6"}},
		{"live deliveries overtake the replay", gd.MutNoHold, []string{"I6", "I2", "I3"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			for s := uint64(1); s <= 60; s++ {
				o := DefaultOptions(s)
				o.Mutation = c.mut
				res, err := Run(o)
				if err != nil {
					t.Fatal(err)
				}
				for _, v := range res.Violations {
					for _, inv := range c.want {
						if v.Invariant == inv {
							t.Logf("caught after %d seeds: %v", s, v)
							return
						}
					}
				}
				if len(res.Violations) > 0 {
					t.Logf("seed %d: other violation first: %v", s, res.Violations[0])
				}
			}
			t.Fatalf("no %v violation: the oracle does not catch %q", c.want, c.name)
		})
	}
}
