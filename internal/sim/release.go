package sim

import (
	"math/rand/v2"
	"time"

	"github.com/aerie-mq/aerie/internal/gd"
	"github.com/aerie-mq/aerie/internal/msg"
	"github.com/aerie-mq/aerie/internal/shell"
	"github.com/aerie-mq/aerie/internal/tick"
)

// The release protocol under faults (Gryphon DS, DSN 2003 §3). Durable
// subscribers do not exist yet, so in runs with floors on every SHB stands
// in for some: about twice a second it sets its release floor
// (gd.ReleaseFloor) to a delivery point it passed a while ago (subscribers
// acknowledging late), leaves it where it was (a subscriber away), or
// clears it (the last one left). The oracle checks the pubends' release
// rule and the ordering of T_r and T_d after every step (I10); with a short
// max_retain the pubends release early past floors that stay behind. Once
// the network heals the floors go, and every pubend must then release what
// it had decided (releaseConverged).
type floorDriver struct {
	rng  *rand.Rand
	seen map[msg.NodeID]map[msg.PubendID][]tick.Tick // delivery points sampled, oldest first
	// heldBack and early count samples of pubends whose L prefix was below
	// their ack prefix (a floor held them), and above T_r (max_retain
	// released early): evidence that runs exercise both.
	heldBack, early int
}

func (w *world) scheduleFloors() {
	if !w.plan.floors {
		return
	}
	w.floors = &floorDriver{rng: rand.New(rand.NewPCG(w.opts.Seed, 0x666c6f6f72)), seen: map[msg.NodeID]map[msg.PubendID][]tick.Tick{}} // "floor"
	for _, id := range w.order {
		if n := w.nodes[id]; n.broker.Role == SHB {
			w.floors.seen[id] = map[msg.PubendID][]tick.Tick{}
			w.after(time.Duration(w.floors.rng.IntN(1000))*time.Millisecond, func() { w.floorLoop(n) })
		}
	}
}

func (w *world) floorLoop(n *node) {
	f := w.floors
	if n.id == w.firstSHB() { // sample the pubends once per round
		for _, id := range w.order {
			if p := w.nodes[id]; p.broker.Role == PHB && p.up {
				for _, st := range p.eng.ReleaseStates() {
					if st.Hosted && st.Final < st.AckPrefix {
						f.heldBack++
					}
					if st.Hosted && st.Final > st.Released {
						f.early++
					}
				}
			}
		}
	}
	if n.up && !n.hung {
		for _, st := range n.eng.Inspect() {
			in := gd.ReleaseFloor{Pubend: st.Pubend}
			seen := append(f.seen[n.id][st.Pubend], st.Delivered)
			if len(seen) > 40 {
				seen = seen[1:]
			}
			f.seen[n.id][st.Pubend] = seen
			switch r := f.rng.IntN(10); {
			case w.healed || r == 0:
				in.Clear = true
			case r <= 3:
				continue // the subscriber holding the floor is away
			default:
				in.T = seen[len(seen)-1-f.rng.IntN(len(seen))]
			}
			w.input(n, func(b *shell.Broker) { b.ReleaseFloor(in) })
		}
	}
	if w.healed {
		return // cleared: everything is released again
	}
	w.after(time.Duration(200+f.rng.IntN(600))*time.Millisecond, func() { w.floorLoop(n) })
}

func (w *world) firstSHB() msg.NodeID {
	for _, id := range w.order {
		if w.nodes[id].broker.Role == SHB {
			return id
		}
	}
	return ""
}

// releaseConverged: once faults stopped and no floor holds anything back,
// every pubend releases what it had decided at healing (docs/CONCEPTS.md I11 for
// the release protocol: a release value that stopped travelling up would
// keep the pubend's log forever).
func (w *world) releaseConverged(targets map[msg.PubendID]tick.Tick) {
	for _, id := range w.order {
		n := w.nodes[id]
		if n.broker.Role != PHB || !n.up {
			continue
		}
		for _, st := range n.eng.ReleaseStates() {
			if t := targets[st.Pubend]; st.Hosted && st.Final < t {
				w.orc.Violate("I11", "pubend %s released (L) only up to %d, not past %d, after healing (T_r %d, T_d %d, ack %d)", st.Pubend, st.Final, t, st.Released, st.Delivered, st.AckPrefix)
			}
		}
	}
}
