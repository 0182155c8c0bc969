package member

// Fencing (quorum loss, Geode notes: "network partition detection"). A
// member that cannot see a majority of its installed view may be on the
// minority side of a partition: it must not act as if it were the cluster.
//
// The rule, one the issuer and the oracle compute alike from two views:
// a view next may replace a view prev only if next keeps a majority of
// prev's brokers. A broker counts as kept when next holds any incarnation
// of it (a newer incarnation proves the old one crashed rather than sits
// across a partition). Members next records as Left do not count at all:
// a graceful leave is announced and cannot hide a partition. Exactly half
// is a majority when the kept half holds the first (oldest) counted member
// of prev: of two halves exactly one holds it, as Geode's lead member
// weighs more than the others.
//
// So a member whose failure detector sees only a minority of its view is
// fenced: it reports Quorate false, and as elder it issues no view (it
// keeps its view and waits). When the partition heals its detector sees
// the others again and it follows (or, by the merge rule, absorbs) the
// majority's lineage. A cluster still devolves to one member, a minority
// at a time; losing a majority at once fences the survivors until enough of
// the lost brokers come back (as the same or a newer incarnation).

// keepsMajority says whether the brokers kept keep a majority of prev's
// members not listed as left (see above). A view with no counted member
// is kept by anything.
func keepsMajority(prev View, left func(ID) bool, kept func(broker string) bool) bool {
	total, have := 0, 0
	first := ""
	for _, mem := range prev.Members {
		if left(mem.ID) {
			continue
		}
		if total == 0 {
			first = mem.ID.Broker
		}
		total++
		if kept(mem.ID.Broker) {
			have++
		}
	}
	return total == 0 || 2*have > total || 2*have == total && kept(first)
}

// viewKeepsMajority: may next replace prev (the issuing rule)?
func viewKeepsMajority(prev, next View) bool {
	brokers := make(map[string]bool, len(next.Members))
	for _, mem := range next.Members {
		brokers[mem.ID.Broker] = true
	}
	return keepsMajority(prev, func(id ID) bool { return hasID(next.Left, id) },
		func(b string) bool { return brokers[b] })
}

// mayReplace applies the issuing rule unless the configuration switched
// fencing off (tests only).
func (m *Membership) mayReplace(prev, next View) bool {
	return m.cfg.Unfenced || prev.ID == 0 || viewKeepsMajority(prev, next)
}

// updateQuorum recomputes Quorate from the failure detector: the installed
// view's brokers this member sees alive (itself, a live member, or a newer
// incarnation reported alive) keep a majority of it.
func (m *Membership) updateQuorum(newest map[string]uint64) {
	if !m.installed {
		m.quorate = false
		return
	}
	if m.cfg.Unfenced {
		m.quorate = true
		return
	}
	left := func(id ID) bool { p := m.fd[id]; return p != nil && p.state == stateLeft }
	seen := make(map[string]bool, len(m.cur.Members))
	for _, mem := range m.cur.Members {
		if m.live(mem.ID, newest) {
			seen[mem.ID.Broker] = true
		}
	}
	kept := func(b string) bool {
		if seen[b] {
			return true
		}
		n, ok := newest[b]
		return ok && m.reportedAlive(ID{Broker: b, BootNonce: n}, newest)
	}
	m.quorate = keepsMajority(m.cur, left, kept)
}

// Quorate says whether this member has an installed view and its failure
// detector sees a majority of that view's brokers (the fencing rule of the
// package documentation): false on the minority side of a partition, where
// the member issues no views.
func (m *Membership) Quorate() bool { return m.quorate }
