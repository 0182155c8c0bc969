package msg

import (
	"fmt"
	"math"

	"github.com/aerie-mq/aerie/internal/tick"
)

// DCQ is a downstream congestion query (Gryphon CC, Middleware 2003 §3.1): a
// pubend sends one every DCQ interval down its tree, and every SHB below may
// answer with a UCA. Position is the pubend's latest assigned tick when the
// query left (m_pubend), so an SHB can tell how far its doubt horizon lags.
// It is a high-priority control message: it must not queue behind data.
type DCQ struct {
	Pubend   PubendID
	Seq      uint64
	Position tick.Tick
}

// UCA is an upstream congestion alert (Gryphon CC §3.1), the answer of
// congested SHBs to the DCQ numbered Seq, folded at every intermediate broker
// (Fig. 5). The two rates are the smallest smoothed doubt-horizon rates
// (tick-seconds per second) of the recovering and of the non-recovering SHBs
// below; +Inf means no SHB of that kind complained. High priority, like DCQ.
type UCA struct {
	Pubend    PubendID
	Seq       uint64
	MinRec    float64
	MinNonRec float64
}

func (m DCQ) String() string {
	return fmt.Sprintf("DCQ{%s #%d pos=%d}", m.Pubend, m.Seq, m.Position)
}

func (m UCA) String() string {
	return fmt.Sprintf("UCA{%s #%d rec=%s nonrec=%s}", m.Pubend, m.Seq, rateString(m.MinRec), rateString(m.MinNonRec))
}

func rateString(r float64) string {
	if math.IsInf(r, 1) {
		return "∞"
	}
	return fmt.Sprintf("%.3f", r)
}

func (DCQ) isMsg() {}
func (UCA) isMsg() {}
