package gd

// ClausesHeld counts the summary clauses this broker holds: those its
// downstream neighbours reported (one set per neighbour), and the distinct
// clauses of the union it reports upstream (its local subscriptions' and
// its downstreams'). It is the size of the broker's filter state, which
// grows with the subscriptions behind it (Gryphon GD §3: filters are
// summaries of what lies downstream), for docs/SCALE.md.
func (e *Engine) ClausesHeld() (downstream, union int) {
	for _, d := range e.downs {
		downstream += len(d.clauses)
	}
	return downstream, len(e.up.refs)
}
