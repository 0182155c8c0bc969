package member

import (
	"slices"

	"github.com/aerie-mq/aerie/internal/tick"
)

// newestAlive maps each broker to the largest boot nonce among its
// incarnations known here, dead or alive: an incarnation with a smaller
// nonce has been superseded by a restart and never comes back, even when
// the newer one dies first. It depends only on the ids in fd and cur, so
// it is cached until one of those changes (it was a quarter of the
// simulator's CPU time, computed three times per Tick); callers must not
// modify it.
func (m *Membership) newestAlive() map[string]uint64 {
	if m.newest != nil {
		return m.newest
	}
	n := map[string]uint64{m.self.ID.Broker: m.self.ID.BootNonce}
	note := func(id ID) {
		if cur, ok := n[id.Broker]; !ok || id.BootNonce > cur {
			n[id.Broker] = id.BootNonce
		}
	}
	for id := range m.fd {
		note(id)
	}
	for _, mem := range m.cur.Members {
		note(mem.ID)
	}
	m.newest = n
	return n
}

// live: not declared failed or left, not superseded. A member the failure
// detector has never reported counts as live for UnknownGrace after this
// member first saw it in a view (the detector's reports may still be on
// their way), and as gone after that: a joiner's detector learns every live member when it
// joins, so a view member it never heard of died before it joined.
func (m *Membership) live(id ID, newest map[string]uint64) bool {
	if id == m.self.ID {
		return true
	}
	p := m.fd[id]
	switch {
	case p == nil && m.now.Sub(m.listedSince(id)) >= m.cfg.UnknownGrace:
		return false
	case p != nil && (p.state == stateFailed || p.state == stateLeft):
		return false
	}
	return newest[id.Broker] <= id.BootNonce
}

// reportedAlive: the failure detector positively reports id alive.
func (m *Membership) reportedAlive(id ID, newest map[string]uint64) bool {
	p := m.fd[id]
	return p != nil && (p.state == stateAlive || p.state == stateSuspect) && newest[id.Broker] <= id.BootNonce
}

// listedSince is when id first appeared in a view installed here (this
// member's start if never).
func (m *Membership) listedSince(id ID) tick.Time {
	if t, ok := m.listed[id]; ok {
		return t
	}
	return m.start
}

// reportedDead: the failure detector declared id failed or left, or a
// newer incarnation of its broker exists. Rival elders are judged by this,
// not by live: a stranger our detector has not reported yet is not dead.
func (m *Membership) reportedDead(id ID, newest map[string]uint64) bool {
	p := m.fd[id]
	return p != nil && (p.state == stateFailed || p.state == stateLeft) || newest[id.Broker] > id.BootNonce
}

func (m *Membership) elderOf(v View, newest map[string]uint64) ID {
	for _, mem := range v.Members {
		if m.live(mem.ID, newest) {
			return mem.ID
		}
	}
	return ID{}
}

func (m *Membership) amElder(newest map[string]uint64) bool {
	if !m.installed || m.elderOf(m.cur, newest) != m.self.ID {
		return false
	}
	if m.yieldAt == m.cur.ID && !m.reportedDead(m.yieldTo, newest) && m.now.Sub(m.yieldSince) < m.cfg.YieldTimeout {
		return false // a conflicting elder wins; wait for its view
	}
	return true
}

// reconcile issues a view if this member is the elder and its failure
// detector disagrees with the installed view, or bootstraps one if it is a
// fresh member whose turn it is.
func (m *Membership) reconcile() {
	newest := m.newestAlive()
	if !m.installed {
		m.maybeBootstrap(newest)
		return
	}
	if !m.amElder(newest) {
		m.bump = false
		return
	}
	next := m.desired(newest)
	if !m.bump && sameMembers(next.Members, m.cur.Members) {
		m.pending = false
		return
	}
	if !m.pending {
		m.pending, m.pendingSince = true, m.now
	}
	if !m.bump && m.now.Sub(m.pendingSince) < m.cfg.ViewBundling {
		return
	}
	if !m.mayReplace(m.cur, next) {
		return // fenced: this member sees no majority of its view
	}
	if m.cur.Elder().ID != m.self.ID && !m.probed(newest) {
		return
	}
	m.bump = false
	next.ID = m.maxSeen + 1
	m.issue(next)
}

// desired is the view the elder's failure detector calls for: survivors in
// their order, then newcomers sorted by name.
func (m *Membership) desired(newest map[string]uint64) View {
	var v View
	for _, mem := range m.cur.Members {
		p := m.fd[mem.ID]
		switch {
		case m.live(mem.ID, newest):
			v.Members = append(v.Members, mem)
		case p != nil && (p.state == stateLeft || p.leaving):
			// A member that said Bye and is gone has left, even when its
			// restart is seen before its departure.
			v.Left = append(v.Left, mem.ID)
		default: // failed, or superseded by a newer incarnation: a crash
			v.Crashed = append(v.Crashed, mem.ID)
		}
	}
	var joiners []Member
	for id, p := range m.fd {
		if p.state == stateAlive && !m.cur.Contains(id) && m.reportedAlive(id, newest) {
			joiners = append(joiners, Member{ID: id, Meta: p.meta})
		}
	}
	slices.SortFunc(joiners, byName)
	for _, j := range joiners {
		v.Members = append(v.Members, j)
		v.Joined = append(v.Joined, j.ID)
	}
	return v
}

// maybeBootstrap: a member in no view, that has heard of no live view and
// has waited JoinSettle, bootstraps one if it has the smallest name among
// the members its failure detector reports alive.
func (m *Membership) maybeBootstrap(newest map[string]uint64) {
	if m.now.Sub(m.start) < m.cfg.JoinSettle {
		return
	}
	for _, mem := range m.heard.Members {
		if mem.ID != m.self.ID && m.reportedAlive(mem.ID, newest) {
			return // a live cluster exists: its elder will admit us
		}
	}
	v := View{Members: []Member{m.self}, Joined: []ID{m.self.ID}}
	for id, p := range m.fd {
		if !m.reportedAlive(id, newest) {
			continue
		}
		if id.less(m.self.ID) {
			return // not our turn: the smaller member bootstraps
		}
		v.Members = append(v.Members, Member{ID: id, Meta: p.meta})
		v.Joined = append(v.Joined, id)
	}
	slices.SortFunc(v.Members, byName)
	slices.SortFunc(v.Joined, func(a, b ID) int { return cmpID(a, b) })
	if m.cur.ID > 0 {
		// Excluded from the view it had: the fresh view must keep a
		// majority of that one, or a member cut off with a minority
		// would start a cluster of its own.
		for _, mem := range m.cur.Members {
			if p := m.fd[mem.ID]; p != nil && p.state == stateLeft {
				v.Left = append(v.Left, mem.ID)
			}
		}
		slices.SortFunc(v.Left, cmpID)
		if !m.mayReplace(m.cur, v) {
			return
		}
	}
	v.ID = m.maxSeen + 1
	m.issue(v)
}

// probed: a member taking over from a dead elder asks every live member
// for its view before issuing one, and waits for all answers or
// ProbeTimeout. An answer with a newer view is installed like any
// announcement, so the id the new elder issues is above every view a
// live member installed.
func (m *Membership) probed(newest map[string]uint64) bool {
	// Ask the view's live members and every member the failure detector
	// reports alive: a joiner may have installed the dead elder's last view.
	var ask []ID
	for _, mem := range m.cur.Members {
		if mem.ID != m.self.ID && m.live(mem.ID, newest) {
			ask = append(ask, mem.ID)
		}
	}
	for id := range m.fd {
		if !m.cur.Contains(id) && m.reportedAlive(id, newest) {
			ask = append(ask, id)
		}
	}
	slices.SortFunc(ask, cmpID)
	if m.takeoverAt != m.cur.ID {
		m.takeoverAt, m.probeStart, m.answered = m.cur.ID, m.now, map[ID]bool{}
		for _, id := range ask {
			m.send(id, Message{Kind: Probe})
		}
	}
	// Wait for every member asked, however long, until the failure
	// detector declares it dead (then it drops out of ask). Issuing after a
	// timeout instead is how a successor used to reuse an id: the answer of
	// a member that installed the dead elder's last view was lost, and the
	// successor issued another view with that id (the known limit of
	// docs/MEMBERSHIP.md, gone since: the member package's 2000-seed run
	// without its tolerance for it). A probe or its answer may be lost:
	// ask again every ProbeTimeout.
	done := true
	again := m.now.Sub(m.probeStart) >= m.cfg.ProbeTimeout
	for _, id := range ask {
		if !m.answered[id] {
			done = false
			if again {
				m.send(id, Message{Kind: Probe})
			}
		}
	}
	if again {
		m.probeStart = m.now
	}
	return done
}

func (m *Membership) issue(v View) {
	m.pending = false
	m.install(v)
	m.lastAnnounce = m.now
	for _, mem := range v.Members {
		m.send(mem.ID, announce(v))
	}
}

// retransmit re-announces the view to members that have not acknowledged
// it; a member that is not the elder tells a successor its view.
func (m *Membership) retransmit() {
	newest := m.newestAlive()
	if !m.amElder(newest) {
		m.tellSuccessor(newest)
		return
	}
	if m.now.Sub(m.lastAnnounce) < m.cfg.RetransmitInterval {
		return
	}
	m.lastAnnounce = m.now
	for _, mem := range m.cur.Members {
		if !m.acked[mem.ID] && m.live(mem.ID, newest) {
			m.send(mem.ID, announce(m.cur))
		}
	}
}

// tellSuccessor: when the elder that issued our view is gone, the member
// next in line leads the view's members. It may not hold the view: the
// dead elder's announcement to it was lost, or reached it while it was
// following another lineage's view (internal/sim seed 3002926). Then it
// never issues the next view, and the members wait for it forever. So
// every member tells the successor its view, every RetransmitInterval
// until the successor acknowledges it (or the view changes); a successor
// that holds a newer view answers with that one.
func (m *Membership) tellSuccessor(newest map[string]uint64) {
	if !m.installed || m.now.Sub(m.lastAnnounce) < m.cfg.RetransmitInterval {
		return
	}
	e := m.elderOf(m.cur, newest)
	if e == (ID{}) || e == m.self.ID || e == m.cur.Elder().ID || m.acked[e] {
		return
	}
	m.lastAnnounce = m.now
	m.send(e, announce(m.cur))
}

func sameMembers(a, b []Member) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i].ID != b[i].ID || !a[i].Meta.equal(b[i].Meta) {
			return false
		}
	}
	return true
}

func byName(a, b Member) int { return cmpID(a.ID, b.ID) }

func cmpID(a, b ID) int {
	switch {
	case a.less(b):
		return -1
	case b.less(a):
		return 1
	}
	return 0
}
