package member_test

import (
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/aerie-mq/aerie/internal/member"
	"github.com/aerie-mq/aerie/internal/tick"
)

// action is one step of a scenario at a simulated time.
type action struct {
	at time.Duration
	do string // "start", "crash", "leave", "restart"
	b  string
	// seeds for start and restart
	seeds []string
}

func ms(n int) time.Duration { return time.Duration(n) * time.Millisecond }

func startAll(at time.Duration, seeds []string, brokers ...string) []action {
	var out []action
	for _, b := range brokers {
		out = append(out, action{at: at, do: "start", b: b, seeds: seeds})
	}
	return out
}

func (w *world) play(acts []action) {
	for _, a := range acts {
		a := a
		w.at(tick.Time(0).Add(a.at), func() {
			switch a.do {
			case "start":
				w.start(a.b, a.seeds...)
			case "crash":
				w.crash(a.b)
			case "leave":
				w.leave(a.b)
			case "restart": // crash and come back at once with a new boot nonce
				w.crash(a.b)
				w.start(a.b, a.seeds...)
			default:
				w.t.Fatalf("unknown action %q", a.do)
			}
		})
	}
}

var abcde = []string{"a", "b", "c", "d", "e"}

// scenarios: one per seed-001 need; each runs over many seeds.
var scenarios = []struct {
	name string
	// need names the seed-001 need the scenario checks (docs/MEMBERSHIP.md).
	need  string
	acts  []action
	cfg   func(*simConfig)
	check func(t *testing.T, w *world, final member.View)
	split bool // heals a split: conflicts and re-ordering allowed
}{
	{
		name: "metadata", need: "static metadata in views",
		acts: startAll(0, []string{"a"}, "a", "b", "c"),
		check: func(t *testing.T, w *world, v member.View) {
			for _, m := range v.Members {
				if m.Meta.Addr("broker") != "127.0.0.1:7"+m.ID.Broker || m.Meta.Cell != "cell-"+m.ID.Broker {
					t.Errorf("metadata of %s in %s: %+v", m.ID, v, m.Meta)
				}
			}
		},
	},
	{
		name: "join-through-seed", need: "join through seed members",
		acts: append(startAll(0, []string{"a", "b"}, "a", "b", "c"),
			action{at: ms(3000), do: "start", b: "d", seeds: []string{"x", "c"}}, // x never runs
			action{at: ms(3500), do: "crash", b: "a"},
			action{at: ms(5000), do: "start", b: "e", seeds: []string{"a", "b"}}), // a is dead: joins through b
		check: func(t *testing.T, w *world, v member.View) {
			if v.Elder().ID.Broker != "b" || len(v.Members) != 4 {
				t.Errorf("final view %s: want b elder and 4 members", v)
			}
		},
	},
	{
		name: "concurrent-start", need: "concurrent start of the first members without split clusters",
		acts: startAll(0, abcde, abcde...),
		check: func(t *testing.T, w *world, v member.View) {
			if len(v.Members) != 5 {
				t.Errorf("final view %s: want 5 members", v)
			}
		},
	},
	{
		name: "concurrent-start-staggered", need: "concurrent start of the first members without split clusters",
		acts: []action{
			{at: ms(0), do: "start", b: "e", seeds: abcde}, {at: ms(200), do: "start", b: "d", seeds: abcde},
			{at: ms(400), do: "start", b: "c", seeds: abcde}, {at: ms(900), do: "start", b: "b", seeds: abcde},
			{at: ms(1300), do: "start", b: "a", seeds: abcde},
		},
	},
	{
		name: "elder-crash", need: "stable order with an elder; monotonic view ids",
		acts: append(startAll(0, abcde, "a", "b", "c"),
			action{at: ms(2000), do: "start", b: "d", seeds: abcde},
			action{at: ms(3000), do: "crash", b: "a"},
			action{at: ms(5000), do: "crash", b: "b"}),
		check: func(t *testing.T, w *world, v member.View) {
			if v.Elder().ID.Broker != "c" {
				t.Errorf("final view %s: want c (the oldest survivor) as elder", v)
			}
		},
	},
	{
		// A minority at a time: losing a majority at once fences the
		// survivors (quorum-loss below).
		name: "devolve-to-one", need: "the cluster devolves to one member and keeps going",
		acts: append(startAll(0, abcde, "a", "b", "c", "d"),
			action{at: ms(2000), do: "crash", b: "a"}, action{at: ms(3500), do: "crash", b: "b"},
			action{at: ms(5000), do: "leave", b: "c"},
			action{at: ms(7000), do: "start", b: "e", seeds: []string{"d"}}),
		check: func(t *testing.T, w *world, v member.View) {
			if v.Elder().ID.Broker != "d" || len(v.Members) != 2 {
				t.Errorf("final view %s: want d elder, then e", v)
			}
			if n := w.cur["d"]; n.views < 3 {
				t.Errorf("d installed %d views, want the shrink to one and the growth again", n.views)
			}
		},
	},
	{
		// a and b (the elder) crash together: c and d keep half of v1
		// without its first member, so they are fenced and issue nothing,
		// until a and b come back as new incarnations.
		name: "quorum-loss", need: "a minority does not act as the cluster (fencing)",
		acts: append(startAll(0, abcde, "a", "b", "c", "d"),
			action{at: ms(2000), do: "crash", b: "a"}, action{at: ms(2000), do: "crash", b: "b"},
			action{at: ms(5000), do: "start", b: "a", seeds: abcde}, action{at: ms(5000), do: "start", b: "b", seeds: abcde}),
		check: func(t *testing.T, w *world, v member.View) {
			if len(v.Members) != 4 {
				t.Errorf("final view %s: want a, b, c and d", v)
			}
			for _, c := range w.changes {
				if strings.Contains(c, "installs") && !strings.Contains(c, "a/") && !strings.Contains(c, "b/") {
					t.Errorf("a view without a or b was installed: %s", c)
				}
			}
			if q := w.fenced["c"] + w.fenced["d"]; q == 0 {
				t.Errorf("neither c nor d reported itself fenced")
			}
		},
	},
	{
		name: "crash-vs-leave", need: "crash told apart from graceful leave",
		acts: append(startAll(0, abcde, abcde...),
			action{at: ms(2000), do: "crash", b: "b"}, action{at: ms(2000), do: "leave", b: "c"},
			action{at: ms(3000), do: "leave", b: "a"}), // the elder leaves
		cfg: func(c *simConfig) { c.SuspectFirst = true },
	},
	{
		name: "restart-new-incarnation", need: "frequent churn: a restart is a new incarnation",
		acts: append(startAll(0, abcde, "a", "b", "c"),
			action{at: ms(2000), do: "restart", b: "b", seeds: abcde},
			action{at: ms(2010), do: "restart", b: "a", seeds: abcde}),
		check: func(t *testing.T, w *world, v member.View) {
			for _, m := range v.Members {
				if m.ID.Broker != "c" && m.ID.BootNonce != 2 {
					t.Errorf("final view %s: want the second incarnations of a and b", v)
				}
			}
			if v.Elder().ID.Broker != "c" {
				t.Errorf("final view %s: c is the oldest member", v)
			}
		},
	},
	{
		name: "split-then-merge", need: "concurrent start without split clusters (a member that reached no seed in time)",
		acts: append(startAll(0, []string{"a", "b"}, "a", "b"),
			action{at: 0, do: "start", b: "c", seeds: []string{"x"}},              // c reaches nobody: bootstraps alone
			action{at: ms(3000), do: "start", b: "x", seeds: []string{"a", "c"}}), // x bridges the pools
		split: true,
		check: func(t *testing.T, w *world, v member.View) {
			if len(v.Members) != 4 {
				t.Errorf("final view %s: want one cluster of 4", v)
			}
		},
	},
}

func runScenario(t *testing.T, seed uint64, sc int) *world {
	s := scenarios[sc]
	cfg := defaultSim()
	if s.cfg != nil {
		s.cfg(&cfg)
	}
	w := newWorld(t, seed, cfg)
	w.allowConflicts = s.split
	w.play(s.acts)
	last := time.Duration(0)
	for _, a := range s.acts {
		last = max(last, a.at)
	}
	w.runUntil(tick.Time(0).Add(last + 5*time.Second))
	return w
}

func TestScenarios(t *testing.T) {
	seeds := simSeeds()
	for i, s := range scenarios {
		t.Run(s.name, func(t *testing.T) {
			for seed := uint64(1); seed <= seeds; seed++ {
				w := runScenario(t, seed, i)
				v := w.checkConverged()
				if s.check != nil && !t.Failed() {
					s.check(t, w, v)
				}
				if t.Failed() {
					t.Fatalf("seed %d (need: %s); reproduce: go test ./internal/member -run 'TestScenarios/%s' (seed %d)\n%s",
						seed, s.need, s.name, seed, w.trace())
				}
			}
		})
	}
}

// simSeeds is how many seeds each simulated test runs: 50, 10 with -short,
// or AERIE_MEMBER_SEEDS.
func simSeeds() uint64 {
	if n, err := strconv.ParseUint(os.Getenv("AERIE_MEMBER_SEEDS"), 10, 64); err == nil && n > 0 {
		return n
	}
	if testing.Short() {
		return 10
	}
	return 50
}
