package sim

import (
	"errors"
	"syscall"
	"time"

	"github.com/aerie-mq/aerie/internal/msg"
	"github.com/aerie-mq/aerie/internal/shell"
	"github.com/aerie-mq/aerie/internal/vfs"
)

// scheduleFaults draws the fault schedule of the fault phase from the seed.
func (w *world) scheduleFaults() {
	var kinds []string
	for _, f := range []string{FaultCrash, FaultCut, FaultStall, FaultPartition, FaultIOError, FaultOverload} {
		if w.plan.faults[f] {
			kinds = append(kinds, f)
		}
	}
	if len(kinds) == 0 {
		return
	}
	var next func()
	next = func() {
		if w.healed {
			return
		}
		w.inject(kinds[w.rng.IntN(len(kinds))])
		gap := time.Duration(w.rng.Int64N(int64(2 * w.plan.faultEvery)))
		w.after(gap, next)
	}
	w.after(time.Duration(w.rng.Int64N(int64(w.plan.faultEvery))), next)
}

// scheduleDiskFull fills a PHB's disk now and then during the fault phase
// (FaultDiskFull), on a schedule drawn from its own generator so that
// every other fault of a seed replays as before it existed.
func (w *world) scheduleDiskFull() {
	if !w.plan.faults[FaultDiskFull] {
		return
	}
	var next func()
	next = func() {
		if w.healed {
			return
		}
		var phbs []*node
		for _, id := range w.order {
			// Not a member of a cell that has not formed yet: see cellFormed.
			if n := w.nodes[id]; n.diskFS() != nil && n.broker.Role == PHB && !n.diskFull && (n.raft == nil || w.cellFormed(n)) {
				phbs = append(phbs, n)
			}
		}
		if len(phbs) > 0 {
			n := phbs[w.fullRng.IntN(len(phbs))]
			n.diskFull = true
			w.diskFulls++
			w.watchf("disk full at %s", n.id)
			n.diskFS().SetFull(syscall.ENOSPC)
			w.after(time.Duration(200+w.fullRng.IntN(4800))*time.Millisecond, func() { w.diskRoom(n) })
		}
		w.after(time.Duration(1000+w.fullRng.Int64N(int64(4*w.plan.faultEvery))), next)
	}
	w.after(time.Duration(w.fullRng.Int64N(int64(2*w.plan.faultEvery))), next)
}

// scheduleShed has a broker shed its caches now and then during the fault
// phase (FaultShed), as one over its memory budget would, for 0.2–5 s, on
// a schedule drawn from its own generator so that every other fault of a
// seed replays as before it existed. A crash, or a Raft member's new
// shell, ends the episode early (the new engine does not shed).
func (w *world) scheduleShed() {
	if !w.plan.faults[FaultShed] {
		return
	}
	var next func()
	next = func() {
		if w.healed {
			return
		}
		var up []*node
		for _, id := range w.order {
			if n := w.nodes[id]; n.up && n.sh != nil && !n.sh.MemoryState().Shedding {
				up = append(up, n)
			}
		}
		if len(up) > 0 {
			n := up[w.shedRng.IntN(len(up))]
			gen := n.gen
			w.sheds++
			w.watchf("shedding at %s", n.id)
			w.input(n, func(sh *shell.Broker) { sh.Shed(true) })
			w.after(time.Duration(200+w.shedRng.IntN(4800))*time.Millisecond, func() {
				if n.gen == gen {
					w.watchf("shedding ends at %s", n.id)
					w.input(n, func(sh *shell.Broker) { sh.Shed(false) })
				}
			})
		}
		w.after(time.Duration(500+w.shedRng.Int64N(int64(2*w.plan.faultEvery))), next)
	}
	w.after(time.Duration(w.shedRng.Int64N(int64(w.plan.faultEvery))), next)
}

// diskFS is the filesystem of n's logs: a plain PHB's disk, or a
// replicated member's (its Raft log and pubend store); nil for others.
func (n *node) diskFS() *vfs.MemFS {
	switch {
	case n.disk != nil:
		return n.disk.fs
	case n.raft != nil:
		return n.raft.fs
	}
	return nil
}

// diskRoom gives n's disk room again.
func (w *world) diskRoom(n *node) {
	if n.diskFull {
		n.diskFull = false
		n.diskFS().SetFull(nil)
		w.watchf("disk room at %s", n.id)
	}
}

func (w *world) inject(kind string) {
	ms := func(lo, hi int) time.Duration { return time.Duration(lo+w.rng.IntN(hi-lo)) * time.Millisecond }
	switch kind {
	case FaultOverload:
		w.injectOverload()
	case FaultCrash:
		n := w.nodes[w.order[w.rng.IntN(len(w.order))]]
		if l := w.leaderToCrash(); l != nil {
			n = l
		}
		wipe := w.plan.faults[FaultWipe] && n.raft != nil && w.wrng.IntN(2) == 0 && w.cellSettled(n.cell)
		w.crash(n)
		if wipe {
			w.wipe(n)
		} else if w.plan.faults[FaultSummary] && w.srng.IntN(2) == 0 {
			w.damageSummary(n)
		}
		w.after(ms(300, 5000), func() {
			if !w.healed {
				w.restart(n)
			}
		})
	case FaultCut:
		l := w.links[w.rng.IntN(len(w.links))]
		w.cut(l)
		w.after(ms(200, 10000), func() { w.heal(l) })
	case FaultStall:
		// Seed 000 §4.2: accept but do not forward for 2–3 s, then fail.
		l := w.links[w.rng.IntN(len(w.links))]
		if !l.up {
			return
		}
		l.stalled = true
		w.after(ms(2000, 3000), func() {
			if l.stalled {
				w.cut(l)
				w.after(ms(1000, 5000), func() { w.heal(l) })
			}
		})
	case FaultIOError:
		var phbs []*node
		for _, id := range w.order {
			if n := w.nodes[id]; (n.disk != nil || n.raft != nil) && n.up && n.broker.Role == PHB {
				phbs = append(phbs, n)
			}
		}
		if len(phbs) > 0 {
			n := phbs[w.rng.IntN(len(phbs))]
			if n.raft != nil && !w.cellFormed(n) {
				// A member whose first fsync fails stops with nothing
				// durable, as after a power loss: see cellFormed.
				return
			}
			if n.raft != nil {
				n.raft.fs.InjectError(vfs.OpSync, "", errors.New("sim: injected fsync failure"))
			} else {
				n.disk.failNextSync()
			}
		}
	case FaultPartition:
		id := w.order[w.rng.IntN(len(w.order))]
		var last time.Duration
		for _, l := range w.links {
			if l.a == id || l.b == id {
				w.cut(l)
				d := ms(1000, 8000)
				last = max(last, d)
				w.after(d, func() { w.heal(l) })
			}
		}
		// Off memberlist's network too, until its last link heals.
		w.isolate(w.nodes[id], w.now.Add(max(last, time.Second)))
	}
}

// leaderToCrash: with replicated cells, half the crashes hit the serving
// leader of one (the failover the cells exist for), else nil.
func (w *world) leaderToCrash() *node {
	var cells []msg.NodeID
	for _, id := range w.order {
		if n := w.nodes[id]; n.raft != nil && n.cell == id {
			cells = append(cells, id)
		}
	}
	if len(cells) == 0 || w.rrng.IntN(2) == 0 {
		return nil
	}
	return w.serving(cells[w.rrng.IntN(len(cells))])
}

// healAll ends the fault phase: every broker restarts, every link heals and
// stops losing messages, publishers stop starting new publishes.
func (w *world) healAll() {
	w.healed = true
	for _, id := range w.order {
		w.diskRoom(w.nodes[id])
	}
	w.unhangAll()
	w.addBackAll()
	for _, id := range w.order {
		w.restart(w.nodes[id])
	}
	for _, l := range w.links {
		l.loss, l.bw = false, 0
		w.heal(l)
	}
	w.durablesHealed()
}

// scheduleFig6 reproduces seed 000 §4.2 "b1-s1 failure": four pubends at 25
// msgs/s of 100 bytes, one subscriber per SHB, the link b1–s1 stalled for
// 2.5 s and then failed for 10 s.
func (w *world) scheduleFig6(shbs []msg.NodeID) {
	for i, pe := range w.nodes["p1"].broker.Pubends {
		pub := &publisher{id: "pub-" + string(pe), node: "p1", pubend: pe,
			outstanding: map[uint64]time.Duration{}, rate: 25, fixedTopic: "fig6.t"}
		w.pubs = append(w.pubs, pub)
		w.after(time.Duration(i*10)*time.Millisecond, func() { pub.run(w) })
		w.after(time.Second, func() { pub.retry(w) })
	}
	for i, id := range shbs {
		s := &subscriber{name: "c" + string(rune('0'+i)), node: id, pattern: ">"}
		w.subs = append(w.subs, s)
		w.after(100*time.Millisecond, func() { s.start(w) })
	}
	l := w.byPair[pairKey("b1", "s1")]
	w.after(10*time.Second, func() { l.stalled = true })
	w.after(12500*time.Millisecond, func() { w.cut(l) })
	w.after(22500*time.Millisecond, func() { w.heal(l) })
}
