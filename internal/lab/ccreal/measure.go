package ccreal

import (
	"fmt"
	"math"
	"strings"
	"time"
)

// CaughtUp is how close to the present s2's doubt horizon must come for
// s2 to count as recovered (the simulator's CC2, Gryphon CC §5 E1).
const CaughtUp = 2 * time.Second

// Recovered is the first poll at or after BackAt at which s2's doubt
// horizon lagged the present by at most CaughtUp; false if none did.
func (r *Result) Recovered() (time.Duration, bool) {
	for _, p := range r.Polls {
		if p.At >= r.Options.BackAt && p.S2Lag >= 0 && p.S2Lag <= CaughtUp {
			return p.At, true
		}
	}
	return 0, false
}

// Rate is the deliveries per second in [from, to).
func Rate(rs []Recv, from, to time.Duration) float64 {
	n := 0
	for _, r := range rs {
		if r.At >= from && r.At < to {
			n++
		}
	}
	return float64(n) / (to - from).Seconds()
}

// LinkRate is the bytes per second the proxy forwarded to s2 in [from,
// to), from the polls nearest those bounds.
func (r *Result) LinkRate(from, to time.Duration) float64 {
	var a, b *Poll
	for i := range r.Polls {
		p := &r.Polls[i]
		if a == nil && p.At >= from {
			a = p
		}
		if p.At <= to {
			b = p
		}
	}
	if a == nil || b == nil || b.At <= a.At {
		return math.NaN()
	}
	return float64(b.LinkBytes-a.LinkBytes) / (b.At - a.At).Seconds()
}

// MeanLimit is p1's mean rate limit over the polls in [from, to),
// counting an unlimited pubend at rate (its offer); NaN without polls.
func (r *Result) MeanLimit(from, to time.Duration) float64 {
	sum, n := 0.0, 0
	for _, p := range r.Polls {
		if p.At >= from && p.At < to && p.HasCC {
			l := p.Limit
			if l <= 0 {
				l = r.Options.Rate
			}
			sum, n = sum+l, n+1
		}
	}
	if n == 0 {
		return math.NaN()
	}
	return sum / float64(n)
}

// LowestLimitAfter is p1's lowest rate limit from t on (0: never
// limited).
func (r *Result) LowestLimitAfter(t time.Duration) float64 {
	low := 0.0
	for _, p := range r.Polls {
		if p.At >= t && p.HasCC && p.Limit > 0 && (low == 0 || p.Limit < low) {
			low = p.Limit
		}
	}
	return low
}

// MaxLag is s2's largest doubt-horizon lag in the polls.
func (r *Result) MaxLag() time.Duration {
	var m time.Duration
	for _, p := range r.Polls {
		m = max(m, p.S2Lag)
	}
	return m
}

// Summary gives the figures docs/BENCHMARKS.md quotes.
func (r *Result) Summary() string {
	var b strings.Builder
	o := r.Options
	fmt.Fprintf(&b, "cc-%s-real, %s: %d published at %.0f events/s offered; every event exactly once and in order at s1 and s2 by %.1f s; load average %.1f, %.1f, %.1f (start, end of publishing, end)\n",
		o.Name, o, r.Published, o.Rate, r.Done.Seconds(), r.Load[0], r.Load[1], r.Load[2])
	if o.BackAt > 0 {
		r.summaryE1(&b)
	}
	for i, ph := range o.Phases {
		from := o.PhaseStart(i)
		half := from + ph.Len/2
		to := from + ph.Len
		fmt.Fprintf(&b, "  phase %d (%.0f–%.0f s), b1 → s2 limited to %.0f KB/s: second half s1 %.1f, s2 %.1f events/s; link %.1f KB/s (%.0f %% of the limit); p1's mean limit %.1f events/s; s2 at most %.1f s behind\n",
			i+1, from.Seconds(), to.Seconds(), float64(ph.Cap)/1000, Rate(r.S1, half, to), Rate(r.S2, half, to),
			r.LinkRate(half, to)/1000, 100*r.LinkRate(half, to)/float64(ph.Cap), r.MeanLimit(half, to), r.maxLagIn(from, to).Seconds())
		if a, z := r.between(from, to); a != nil {
			fmt.Fprintf(&b, "    in the phase: s2 sent %d alerts (UCAs), p1 lowered its rate %d times\n", z.S2UCAs-a.S2UCAs, z.P1Decreases-a.P1Decreases)
		}
	}
	return b.String()
}

func (r *Result) summaryE1(b *strings.Builder) {
	o := r.Options
	if rec, ok := r.Recovered(); ok {
		fmt.Fprintf(b, "  s2 back within %v of the present at %.1f s, %.1f s after b1 → s2 returned\n", CaughtUp, rec.Seconds(), (rec - o.BackAt).Seconds())
	} else {
		fmt.Fprintf(b, "  s2 not back within %v of the present while publishing (until %.0f s); at most %.1f s behind\n", CaughtUp, o.End.Seconds(), r.MaxLag().Seconds())
	}
	if low := r.LowestLimitAfter(o.BackAt); low > 0 {
		fmt.Fprintf(b, "  p1's rate limit after the restore: lowest %.1f events/s; mean %.1f in the 10 s after, %.1f in the last 10 s of publishing\n",
			low, r.MeanLimit(o.BackAt, o.BackAt+10*time.Second), r.MeanLimit(o.End-10*time.Second, o.End))
	} else {
		b.WriteString("  p1 never limited\n")
	}
	fmt.Fprintf(b, "  before the cut: s1 %.1f, s2 %.1f events/s; link %.1f KB/s\n", Rate(r.S1, time.Second, o.CutAt), Rate(r.S2, time.Second, o.CutAt), r.LinkRate(time.Second, o.CutAt)/1000)
	fmt.Fprintf(b, "  after the restore until publishing stopped: s1 %.1f, s2 %.1f events/s; link %.1f KB/s; s2's NACK window at most %d ms of ticks\n",
		Rate(r.S1, o.BackAt, o.End), Rate(r.S2, o.BackAt, o.End), r.LinkRate(o.BackAt, o.End)/1000, r.MaxWindow())
	end := o.End
	if rec, ok := r.Recovered(); ok {
		end = rec
	}
	if a, z := r.between(o.BackAt, end); a != nil && z != a {
		fmt.Fprintf(b, "  from the restore until %.1f s: b1 queued %d events for s2 (%d new to s2's subscriber), s2 sent %d nacks for %.1f s of ticks, b1 retransmitted %d\n",
			end.Seconds(), z.B1ToS2-a.B1ToS2, countIn(r.S2, a.At, z.At), z.S2Nacks-a.S2Nacks, float64(z.S2NackTicks-a.S2NackTicks)/1024/1000, z.B1Retrans-a.B1Retrans)
	}
}

// NackedAfterRestore returns how much of the stream, in seconds of ticks,
// s2 nacked from b1 → s2's return until it was back within CaughtUp of the
// present (until publishing stopped if it never was): about the outage's
// length when each missing tick is asked for once.
func (r *Result) NackedAfterRestore() float64 {
	end := r.Options.End
	if rec, ok := r.Recovered(); ok {
		end = rec
	}
	a, z := r.between(r.Options.BackAt, end)
	if a == nil {
		return 0
	}
	return float64(z.S2NackTicks-a.S2NackTicks) / 1024 / 1000
}

func countIn(rs []Recv, from, to time.Duration) int {
	n := 0
	for _, r := range rs {
		if r.At >= from && r.At < to {
			n++
		}
	}
	return n
}

// between returns the first and the last poll in [from, to]; nil, nil
// when there are none.
func (r *Result) between(from, to time.Duration) (a, b *Poll) {
	for i := range r.Polls {
		p := &r.Polls[i]
		if p.At < from || p.At > to {
			continue
		}
		if a == nil {
			a = p
		}
		b = p
	}
	return a, b
}

func (r *Result) maxLagIn(from, to time.Duration) time.Duration {
	var m time.Duration
	for _, p := range r.Polls {
		if p.At >= from && p.At < to {
			m = max(m, p.S2Lag)
		}
	}
	return m
}

// MaxWindow is s2's widest NACK window in the polls (ms of ticks; 0: it
// never recovered by SDCC).
func (r *Result) MaxWindow() int64 {
	var m int64
	for _, p := range r.Polls {
		m = max(m, p.S2Window)
	}
	return m
}

// BytesPerEvent is what one event cost on b1 → s2, headers and control
// traffic included, while nothing disturbed the link: the bytes the proxy
// forwarded per event s2 received, from 1 s until the first cut or limit.
func (r *Result) BytesPerEvent() float64 {
	o := r.Options
	to := o.End
	for _, t := range []time.Duration{o.CutAt, o.PhasesFrom} {
		if t > 0 {
			to = min(to, t)
		}
	}
	return r.LinkRate(time.Second, to) / Rate(r.S2, time.Second, to)
}
