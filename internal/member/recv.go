package member

// Messages from other members: announcements, acknowledgements, probes and
// goodbyes, and how views from other lineages (conflicts, merges) are
// settled.

func (m *Membership) recv(from ID, msg Message) error {
	if m.answered != nil {
		m.answered[from] = true
	}
	switch msg.Kind {
	case Bye:
		if from != m.self.ID {
			if p := m.fd[from]; p != nil {
				p.leaving = true
			} else {
				m.fd[from] = &peer{state: stateAlive, since: m.now, leaving: true}
				m.newest = nil
			}
		}
	case Probe:
		if v, ok := m.LocalState(); ok {
			m.send(from, announce(v))
		} else {
			m.send(from, Message{Kind: Ack}) // nothing to tell, but answer
		}
	case Ack:
		if m.installed && msg.Ack == (Ref{ID: m.cur.ID, Digest: m.cur.Digest()}) {
			m.acked[from] = true
		}
	case Announce:
		if msg.View == nil || len(msg.View.Members) == 0 {
			return ErrBadMessage
		}
		m.announced(from, *msg.View)
	default:
		return ErrBadMessage
	}
	return nil
}

func (m *Membership) announced(from ID, v View) {
	if v.ID > m.maxSeen {
		m.maxSeen = v.ID
	}
	newest := m.newestAlive()
	if e := v.Elder().ID; v.ID > m.cur.ID && e != m.self.ID && !m.live(e, newest) && m.fd[e] != nil {
		// An announcement still in flight from an elder our failure
		// detector reports dead: its successor issues the next view.
		if m.elderOf(v, newest) == m.self.ID {
			// We are that successor. Dropping the view would leave its
			// members waiting for us to lead them and the members it
			// excluded waiting to be admitted, while we follow a view of
			// another lineage (internal/sim seed 3002926). Take it over:
			// install it, then probe and issue the next view as any
			// successor does.
			m.adopt(v)
		}
		return
	}
	if m.installed && m.foreign(v) {
		m.merge(from, v)
		return
	}
	switch {
	case v.ID > m.cur.ID:
		m.adopt(v)
	case !m.installed:
		if v.ID > m.heard.ID && !v.Contains(m.self.ID) {
			m.heard = v
		}
	case v.ID == m.cur.ID && v.Digest() == m.cur.Digest():
		m.send(from, Message{Kind: Ack, Ack: Ref{ID: v.ID, Digest: v.Digest()}})
	case v.ID == m.cur.ID:
		m.conflict(from, v)
	default:
		m.send(from, announce(m.cur)) // a stale sender: tell it the news
	}
}

// adopt installs a newer view that contains this member, or notes that it
// has been left out.
func (m *Membership) adopt(v View) {
	if v.Contains(m.self.ID) {
		m.install(v)
		m.send(v.Elder().ID, Message{Kind: Ack, Ack: Ref{ID: v.ID, Digest: v.Digest()}})
		return
	}
	if m.installed {
		m.installed = false
		m.ready.Excluded = v.ID
	}
	if v.ID > m.heard.ID {
		m.heard = v
	}
}

// foreign: v does not descend from this member's view. It does when its
// elder is ours, or is in our view and every member ranked before it is
// gone from v (its issuer found them failed: succession). Otherwise it
// comes from another cluster (a partition healed, first members
// bootstrapped apart) or from a member that wrongly took itself for the
// elder.
func (m *Membership) foreign(v View) bool {
	e := v.Elder().ID
	if e == m.self.ID || e == m.elderOf(m.cur, m.newestAlive()) {
		return false
	}
	r := m.cur.Rank(e)
	if r < 0 {
		return true
	}
	newest := m.newestAlive()
	for _, mem := range m.cur.Members[:r] {
		// A member ranked before v's elder must be gone from v, and our
		// own failure detector must not report it alive: an issuer whose
		// detector has not heard of the older members yet (a large
		// cluster starting) is not their successor.
		if v.Contains(mem.ID) || m.reportedAlive(mem.ID, newest) {
			return true
		}
	}
	return false
}

// rivalWins says whether v's elder, rather than ours, should issue the
// merged view: a dead elder loses, otherwise the smaller name wins. The
// rule must be one both sides compute alike, so it cannot use ranks (the
// two views may rank the elders differently).
func (m *Membership) rivalWins(v View, newest map[string]uint64) bool {
	mine, rival := m.elderOf(m.cur, newest), v.Elder().ID
	switch {
	case m.reportedDead(rival, newest):
		return false
	case mine == ID{}:
		return true
	}
	return rival.less(mine)
}

// merge settles a meeting of two clusters the way conflicts are settled:
// one cluster absorbs the other. Its elder issues a view with an id above
// both (once its failure detector reports the other cluster's members, they
// are appended); the other cluster's members install that view and their
// elder yields.
func (m *Membership) merge(from ID, v View) {
	newest := m.newestAlive()
	rival := v.Elder().ID
	if !m.rivalWins(v, newest) {
		if mine := m.elderOf(m.cur, newest); mine != m.self.ID && v.ID > m.cur.ID && v.Contains(mine) {
			// Our elder is a member of their newer view: it installed it
			// (our lineage has no elder left to absorb theirs, and their
			// elder would wait for ours forever: internal/sim seed 126), or
			// it will settle with their elder itself and we follow its
			// next view.
			m.adopt(v)
			return
		}
		// We absorb them. Our elder must go above their id; their elder
		// must learn it lost.
		if v.ID >= m.cur.ID {
			if mine := m.elderOf(m.cur, newest); mine == m.self.ID {
				m.bump = true
			} else {
				m.send(mine, announce(v))
			}
		}
		m.send(rival, announce(m.cur))
		return
	}
	// They absorb us.
	if v.ID > m.cur.ID {
		m.adopt(v)
		return
	}
	if m.amElder(newest) {
		m.yield(rival)
	}
	m.send(rival, announce(m.cur)) // so that it goes above our id
}

// conflict: v has our installed view's id but other members. The elders of
// the two views settle it: the one with the smaller name (or the only one
// alive) issues a fresh view with a higher id, the other yields. A member
// that is not an elder forwards each view to the other's elder.
func (m *Membership) conflict(from ID, v View) {
	newest := m.newestAlive()
	other := v.Elder().ID
	if m.amElder(newest) {
		if other == m.self.ID || m.reportedDead(other, newest) || m.self.ID.less(other) {
			m.bump = true
			return
		}
		m.yield(other)
		m.send(other, announce(m.cur))
		return
	}
	m.send(other, announce(m.cur))
	if e := m.elderOf(m.cur, newest); e != from {
		m.send(e, announce(v))
	}
}

// yield lets a conflicting elder issue the next view; it is this member's
// turn again when that elder is reported dead or has not issued a view
// within YieldTimeout (counted from the first yield at this view: the
// rival's re-announcements do not extend it).
func (m *Membership) yield(to ID) {
	if m.yieldTo == to && m.yieldAt == m.cur.ID {
		return
	}
	m.yieldTo, m.yieldAt, m.yieldSince = to, m.cur.ID, m.now
}
