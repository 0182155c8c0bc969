package stream

import (
	"fmt"
	"time"

	"github.com/aerie-mq/aerie/internal/msg"
	"github.com/aerie-mq/aerie/internal/tick"
)

// Liveness holds the subend-driven liveness parameters (seed 000 §3.2).
type Liveness struct {
	GCT    time.Duration // gap curiosity threshold
	NRTMin time.Duration // floor of the nack repetition threshold
	NRTMax time.Duration // cap of its exponential backoff
}

// Subend is the nack-originating side of an istream at a subscriber-hosting
// broker (or any leaf of a pubend's tree). It watches the Q ticks between the
// doubt horizon and the highest known tick ("gaps", seed 000 §3.2), nacks a
// gap once it has lasted GCT, repeats the nack every NRT with exponential
// backoff, and estimates NRT from nack round trips like TCP's RTO
// (Jacobson/Karels, docs/CONCEPTS.md P7).
type Subend struct {
	// FloorSet records that a fresh stream has chosen where it starts
	// needing ticks (docs/CONCEPTS.md P6: a new SHB stream does not nack history).
	FloorSet bool
	gaps     []gap
	// expectTo extends the gap window up to an AckExpected or DCT horizon;
	// expectNow makes every gap at or below it due at the next Scan, once.
	expectTo  tick.Tick
	expectNow bool
	srtt      time.Duration
	rttvar    time.Duration
	sampled   bool
	samples   uint64 // round-trip samples taken, for SRTT's readers
	// heard is when knowledge last arrived from upstream, revived when it
	// arrived after a quiet spell (Heard).
	heard, revived tick.Time
	// Window, when not 0, is the NACK window's last tick (Gryphon CC §3.2,
	// SDCC): a recovering SHB nacks no Q tick above it; gaps above it wait
	// until the doubt horizon, and the window with it, moves up.
	Window tick.Tick
	// HoldRepeats makes the subend hold a repeated nack while answers to
	// its earlier nacks are still arriving, recovering or not: set where
	// congestion control runs (Gryphon CC §3.2). Without it only a
	// recovering subend (Window set) holds; an outage shorter than the
	// receive window then repeated its whole backlog onto the bottleneck
	// every NRT (docs/known-issues/congestion-real-links.md, 1).
	HoldRepeats bool
	// answering is when a retransmission last arrived inside a nacked gap:
	// the upstream is still answering earlier nacks.
	answering tick.Time
}

// SRTT returns the smoothed nack round trip and how many round trips it
// has sampled.
func (s *Subend) SRTT() (time.Duration, uint64) { return s.srtt, s.samples }

type gap struct {
	r        tick.Range
	due      tick.Time
	sent     tick.Time // when first nacked
	last     tick.Time // when last nacked
	answered tick.Time // when knowledge last arrived inside it
	tries    int
}

// NRT returns the current nack repetition threshold estimate.
func (s *Subend) NRT(l Liveness) time.Duration {
	if !s.sampled {
		return l.NRTMin
	}
	return max(l.NRTMin, s.srtt+4*s.rttvar)
}

func (s *Subend) sample(r time.Duration) {
	s.samples++
	if !s.sampled {
		s.srtt, s.rttvar, s.sampled = r, r/2, true
		return
	}
	d := r - s.srtt
	s.srtt += d / 8
	if d < 0 {
		d = -d
	}
	s.rttvar += (d - s.rttvar) / 4
}

// Expect makes every Q tick up to t a gap that is nacked at the next Scan
// (AckExpected, seed 000 §3.2; or the delay curiosity threshold).
func (s *Subend) Expect(t tick.Tick) {
	s.expectTo = max(s.expectTo, t)
	s.expectNow = true
}

// Heard records that knowledge arrived from upstream at now. After a quiet
// spell longer than quiet (an outage: knowledge flows at least every
// silence interval otherwise), the path to the pubend evidently works
// again, so every gap already nacked is nacked again at the next Scan with
// its backoff restarted: the backoff grown during the outage (up to
// NackRepetitionMax) is for a pubend that seems down, and without this the
// backlog would wait for it or for the delay curiosity threshold (docs/CONCEPTS.md
// P7). During steady flow the backoff is left alone, so a long recovery is
// not nacked over and over.
func (s *Subend) Heard(now tick.Time, quiet time.Duration) {
	if s.heard != 0 && now.Sub(s.heard) > quiet {
		s.revived = now
	}
	s.heard = max(s.heard, now)
}

// Retry makes every gap already nacked due at the next Scan with its backoff
// restarted: the link upstream has just come (back) up, and the nacks sent
// on the old one are lost with it.
func (s *Subend) Retry() {
	for i := range s.gaps {
		if s.gaps[i].tries > 0 {
			s.gaps[i].due, s.gaps[i].tries = 0, 0
		}
	}
}

// Gaps returns the number of tracked gaps.
func (s *Subend) Gaps() int { return len(s.gaps) }

// Scan refreshes the gap list from the stream and returns the ranges to nack
// now, in ascending order.
func (s *Subend) Scan(k *tick.Knowledge[*msg.Event], now tick.Time, l Liveness) (nack []tick.Range) {
	dh := k.DoubtHorizon()
	hi := max(k.KnownHi(), s.expectTo)
	if s.expectTo <= dh {
		s.expectTo = 0
	}
	old := s.gaps
	touched := make([]bool, len(old))
	var next []gap
	j := 0 // old gaps before j end below the current Q run
	if hi > dh {
		k.VisitQ(tick.Range{Lo: dh + 1, Hi: hi}, func(q tick.Range) {
			cur := q.Lo
			for j < len(old) && old[j].r.Hi < q.Lo {
				j++
			}
			for i := j; i < len(old) && old[i].r.Lo <= q.Hi; i++ {
				part := old[i].r.Intersect(q)
				if part.Lo > cur {
					next = append(next, s.fresh(tick.Range{Lo: cur, Hi: part.Lo - 1}, now, l))
				}
				g := old[i]
				g.r = part
				next = append(next, g)
				touched[i] = true
				cur = part.Hi + 1
			}
			if cur <= q.Hi && cur != 0 {
				next = append(next, s.fresh(tick.Range{Lo: cur, Hi: q.Hi}, now, l))
			}
		})
	}
	for i, g := range old {
		if !touched[i] {
			s.retire(g)
		}
	}
	if s.expectNow {
		// Seed 000 §3.2: a subend receiving AckExpected(T) nacks every Q tick
		// up to T at once — including the front of a gap reaching past T and
		// a gap whose repetition is backing off.
		next = splitAt(next, s.expectTo)
		for i := range next {
			if next[i].r.Hi <= s.expectTo {
				next[i].due = now
			}
		}
		s.expectNow = false
	}
	if s.Window != 0 {
		next = splitAt(next, s.Window)
	}
	for i := range next {
		g := &next[i]
		if g.tries > 0 && s.revived > g.last { // see Heard
			g.due, g.tries = now, 0
		}
		if g.due > now || (s.Window != 0 && g.r.Lo > s.Window) {
			continue
		}
		if (s.Window != 0 || s.HoldRepeats) && g.tries > 0 && now.Sub(s.answering) < s.NRT(l) && now.Sub(g.last) < l.NRTMax {
			// Recovering, or under congestion control (Gryphon CC
			// §3.2): answers to earlier nacks are still arriving, so
			// the upstream is working through them and
			// this one's answer is queued behind them on the FIFO link.
			// Asking again would put a second copy of it in the queue of a
			// link that is the bottleneck of the recovery (E3 with a
			// 256 KiB queue overflowed on repeats). The repeat waits until
			// answers stop for NRT; a link that comes back up retries at
			// once (Retry), and no repeat waits longer than NRTMax.
			continue
		}
		nack = append(nack, g.r)
		if g.tries == 0 {
			g.sent = now
		}
		g.last = now
		g.tries++
		backoff := s.NRT(l) << min(g.tries-1, 16)
		g.due = now.Add(min(backoff, l.NRTMax))
	}
	s.gaps = next
	return nack
}

// splitAt splits the gap that straddles t into [lo,t] and [t+1,hi].
func splitAt(gaps []gap, t tick.Tick) []gap {
	for i, g := range gaps {
		if g.r.Lo <= t && t < g.r.Hi {
			hi := g
			hi.r.Lo = t + 1
			gaps[i].r.Hi = t
			return append(gaps[:i+1], append([]gap{hi}, gaps[i+1:]...)...)
		}
	}
	return gaps
}

func (s *Subend) fresh(r tick.Range, now tick.Time, l Liveness) gap {
	return gap{r: r, due: now.Add(l.GCT)}
}

// retire drops a gap that no longer holds any Q tick in the window. A gap
// answered after exactly one nack gives a round-trip sample (Karn's rule: a
// repeated nack's answer is ambiguous).
func (s *Subend) retire(g gap) {
	if g.tries == 1 && g.answered > g.sent {
		s.sample(g.answered.Sub(g.sent))
	}
}

// Answered records when knowledge arrived for ticks in r, so that a nack's
// round trip is measured at arrival rather than at the next Scan. retrans
// says the knowledge came as a retransmission, the answer to a nack: only
// those show the upstream still working through this subend's nacks
// (first-time events arriving in a gap nacked towards the pubend's present,
// as the delay curiosity threshold asks, do not).
func (s *Subend) Answered(r tick.Range, now tick.Time, retrans bool) {
	for i := range s.gaps {
		if s.gaps[i].r.Lo > r.Hi {
			break
		}
		if s.gaps[i].r.Hi >= r.Lo && s.gaps[i].tries > 0 {
			s.gaps[i].answered = now
			if retrans {
				s.answering = now
			}
		}
	}
}

// Describe renders the gap list, e.g. " gaps [5,9]x2".
func (s *Subend) Describe() string {
	if len(s.gaps) == 0 {
		return ""
	}
	out := " gaps"
	for _, g := range s.gaps {
		out += fmt.Sprintf(" %v×%d", g.r, g.tries)
	}
	return out
}
