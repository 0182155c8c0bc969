package broker

import (
	"errors"
	"math/rand/v2"
	"time"
)

// Monkey is the chaos monkey inside a broker process (the [chaos] table):
// about once per Interval it crashes the broker, as kill -9 would, leaving
// the restart to its supervisor (compose `restart:`, systemd), or drops
// every link, which the brokers then redial. Every action is logged with
// chaos=true and counted in Status.Chaos, so that an alarm can tell the
// monkey's work from a real failure.
type Monkey struct {
	// Interval is the mean time between actions (uniform in [½, 1½]×).
	Interval time.Duration
	// Faults are the actions allowed: "crash", "links" (nil: both).
	Faults []string
	// Seed seeds the choices (0: from the clock).
	Seed uint64
	// Crash ends the process at once, without a graceful shutdown (the
	// command sets os.Exit). Nil turns "crash" into dropping the links.
	Crash func()
}

var errChaosLinks = errors.New("chaos monkey: dropping every link")

type monkeyState struct {
	m     *Monkey
	rng   *rand.Rand
	timer *time.Timer
}

func newMonkey(m *Monkey) *monkeyState {
	if m == nil || m.Interval <= 0 {
		return nil
	}
	seed := m.Seed
	if seed == 0 {
		seed = uint64(time.Now().UnixNano())
	}
	s := &monkeyState{m: m, rng: rand.New(rand.NewPCG(seed, 0x6d6f6e6b6579))} // "monkey"
	s.timer = time.NewTimer(s.next())
	return s
}

func (s *monkeyState) next() time.Duration {
	return s.m.Interval/2 + time.Duration(s.rng.Int64N(int64(s.m.Interval)))
}

// fired returns the monkey's timer channel (nil when there is no monkey).
func (s *monkeyState) fired() <-chan time.Time {
	if s == nil {
		return nil
	}
	return s.timer.C
}

func (s *monkeyState) stop() {
	if s != nil {
		s.timer.Stop()
	}
}

// faults are the actions allowed.
func (s *monkeyState) faults() []string {
	if len(s.m.Faults) == 0 {
		return []string{"crash", "links"}
	}
	return s.m.Faults
}

// monkeyAct takes one action (on the loop goroutine).
func (n *Node) monkeyAct() {
	s := n.monkey
	faults := s.faults()
	action := faults[s.rng.IntN(len(faults))]
	if action == "crash" && s.m.Crash == nil {
		action = "links"
	}
	n.chaos[action]++
	switch action {
	case "crash":
		n.log.Error("chaos monkey: crashing this broker, as kill -9 would; its supervisor restarts it", "chaos", true, "action", action)
		s.m.Crash()
	default:
		n.log.Warn("chaos monkey: dropping every link; the brokers redial", "chaos", true, "action", action, "links", len(n.peers))
		for _, c := range n.peers {
			c.CloseWith(errChaosLinks, errChaosLinks.Error())
		}
	}
	s.timer.Reset(s.next())
}
