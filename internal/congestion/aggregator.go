package congestion

import (
	"math"

	"github.com/aerie-mq/aerie/internal/msg"
)

// Aggregator folds the UCAs of one pubend at an intermediate broker exactly
// as Fig. 5 of Gryphon CC (Middleware 2003 §3.1): every UCA lowers the
// running minima; the first UCA with a sequence number above any seen goes
// upstream at once carrying the minima, which then restart at +Inf, so the
// later UCAs of that round fold into the next one sent. The pubend hears of
// new congestion after one path delay and of the worst SHB within a round.
type Aggregator struct {
	minRec, minNonRec float64
	seq               uint64
}

// NewAggregator returns an aggregator with no UCA seen (Fig. 5 lines 4–5).
func NewAggregator() *Aggregator {
	return &Aggregator{minRec: math.Inf(1), minNonRec: math.Inf(1)}
}

// OnUCA folds u in and returns the UCA to send upstream, if any (Fig. 5
// lines 7–12). A UCA with an impossible rate is refused with ErrBadRate and
// changes nothing.
func (a *Aggregator) OnUCA(u msg.UCA) (msg.UCA, bool, error) {
	if bad(u.MinRec) || bad(u.MinNonRec) {
		return msg.UCA{}, false, ErrBadRate
	}
	a.minNonRec = min(a.minNonRec, u.MinNonRec)
	a.minRec = min(a.minRec, u.MinRec)
	if u.Seq <= a.seq {
		return msg.UCA{}, false, nil
	}
	out := msg.UCA{Pubend: u.Pubend, Seq: u.Seq, MinRec: a.minRec, MinNonRec: a.minNonRec}
	a.minRec, a.minNonRec, a.seq = math.Inf(1), math.Inf(1), u.Seq
	return out, true, nil
}
