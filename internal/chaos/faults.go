package chaos

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"syscall"
	"time"

	"github.com/aerie-mq/aerie/internal/faultnet"
	"github.com/aerie-mq/aerie/internal/proc"
)

// Fault kinds.
const (
	FaultKill      = "kill"      // SIGKILL, restart after a while
	FaultStall     = "stall"     // SIGSTOP, SIGCONT after a while
	FaultCut       = "cut"       // a link refuses and drops everything
	FaultLinkStall = "linkstall" // a link accepts and forwards nothing
)

// AllFaults are the kinds `aerie chaos` injects by default.
var AllFaults = []string{FaultKill, FaultStall, FaultCut, FaultLinkStall}

// BlindSpots says what a run cannot inject or check, printed before it
// starts.
func BlindSpots(nw *network) []string {
	out := []string{
		"slow disk, full disk and clock steps are not injected (they need privileges this process does not have)",
		"links are faulted where a broker dials them (through a proxy); client connections are not faulted, only their brokers",
		"plain subscriptions may lose what was published while they re-subscribed: they are checked against the gap notices they deliver, not for completeness there",
		"durable subscriptions are checked for completeness everywhere, but their subscribers never crash: they resume from the checkpoint their client holds in memory, not from a saved file",
	}
	if len(nw.spare) > 0 {
		var ids []string
		for id := range nw.spare {
			ids = append(ids, id)
		}
		slices.Sort(ids)
		out = append(out, "spared by [chaos] spare, never touched: "+strings.Join(ids, ", "))
	}
	return out
}

// injected is one fault, for the schedule printed with a violation.
type injected struct {
	at     time.Duration
	kind   string
	target string
	heal   time.Duration
}

func (f injected) String() string {
	return fmt.Sprintf("%8.3fs %-9s %-8s for %v", f.at.Seconds(), f.kind, f.target, f.heal.Round(time.Millisecond))
}

// monkey chooses and applies faults.
type monkey struct {
	rng    *rand.Rand
	kinds  []string
	nw     *network
	procs  *proc.Group
	began  time.Time
	faults []injected
	busy   map[string]bool // brokers and links under a fault now
	heals  []heal
}

type heal struct {
	at     time.Time
	target string
	undo   func() error
}

// next injects one fault, if a target is free: a broker or a link, never a
// spared broker or one of its links. Now and then (one in four) it goes
// for the oldest running broker, as the paper's monkey favours older
// processes.
func (m *monkey) next(now time.Time) error {
	kind := m.kinds[m.rng.IntN(len(m.kinds))]
	var target string
	var undo func() error
	d := time.Duration(500+m.rng.IntN(2500)) * time.Millisecond
	switch kind {
	case FaultKill, FaultStall:
		var free []string
		for _, id := range m.nw.ids {
			if !m.nw.spare[id] && !m.busy[id] {
				free = append(free, id)
			}
		}
		if len(free) == 0 {
			return nil
		}
		target = free[m.rng.IntN(len(free))]
		if m.rng.IntN(4) == 0 {
			if old := m.procs.Oldest(free); old != "" {
				target = old
			}
		}
		id := target
		if kind == FaultKill {
			m.procs.Kill(id)
			undo = func() error { return m.nw.start(m.procs, id) }
		} else {
			m.procs.Signal(id, syscall.SIGSTOP)
			undo = func() error { m.procs.Signal(id, syscall.SIGCONT); return nil }
		}
	case FaultCut, FaultLinkStall:
		var free []*link
		for _, l := range m.nw.links {
			if !m.nw.spare[l.dialer] && !m.nw.spare[l.target] && !m.busy[l.String()] {
				free = append(free, l)
			}
		}
		if len(free) == 0 {
			return nil
		}
		l := free[m.rng.IntN(len(free))]
		target = l.String()
		mode := faultnet.Cut
		if kind == FaultLinkStall {
			mode = faultnet.Stall
		}
		l.proxy.Set(mode)
		undo = func() error { l.proxy.Set(faultnet.Pass); return nil }
	}
	m.busy[target] = true
	m.faults = append(m.faults, injected{at: now.Sub(m.began), kind: kind, target: target, heal: d})
	m.heals = append(m.heals, heal{at: now.Add(d), target: target, undo: undo})
	return nil
}

// healDue undoes the faults whose time has come (all of them with force).
func (m *monkey) healDue(now time.Time, force bool) error {
	keep := m.heals[:0]
	var err error
	for _, h := range m.heals {
		if !force && now.Before(h.at) {
			keep = append(keep, h)
			continue
		}
		if e := h.undo(); e != nil && err == nil {
			err = e
		}
		delete(m.busy, h.target)
	}
	m.heals = keep
	return err
}

// schedule renders the faults so far, one per line.
func (m *monkey) schedule() string {
	var b strings.Builder
	for _, f := range m.faults {
		fmt.Fprintf(&b, "  %v\n", f)
	}
	return b.String()
}
