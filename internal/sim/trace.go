package sim

import (
	"bufio"
	"fmt"
	"io"
	"time"

	"github.com/aerie-mq/aerie/internal/msg"
	"github.com/aerie-mq/aerie/internal/tick"
)

// tracer writes per-broker time series as CSV, one row per broker per
// window: the data behind seed 000 Fig. 6 (latency, nacks sent, nack range).
type tracer struct {
	w      *bufio.Writer
	window time.Duration
	cur    map[msg.NodeID]*traceRow
	last   map[msg.NodeID][2]uint64 // nacks, nack ticks at the previous row
	header bool
}

type traceRow struct {
	n          int
	sumLatency time.Duration
	maxLatency time.Duration
}

func newTracer(out io.Writer) *tracer {
	return &tracer{w: bufio.NewWriter(out), window: 100 * time.Millisecond, cur: map[msg.NodeID]*traceRow{}, last: map[msg.NodeID][2]uint64{}}
}

// delivered records one delivery's latency: the subscriber's local receive
// time minus the tick's pubend time (pub_ms), as the seed's figure measures.
func (t *tracer) delivered(n *node, local tick.Time, ev *msg.Event) {
	r := t.cur[n.id]
	if r == nil {
		r = &traceRow{}
		t.cur[n.id] = r
	}
	lat := time.Duration(local.Millis()-ev.Tick.Millis()) * time.Millisecond
	r.n++
	r.sumLatency += lat
	r.maxLatency = max(r.maxLatency, lat)
}

// sample writes one row per broker for the window ending at now.
func (t *tracer) sample(w *world) {
	if !t.header {
		fmt.Fprintln(t.w, "t_ms,broker,deliveries,latency_ms_avg,latency_ms_max,nacks_sent,nack_range_ms,rate_limit,dh_rate,recovering,nack_window_ms,dh_lag_ms")
		t.header = true
	}
	for _, id := range w.order {
		n := w.nodes[id]
		st := n.eng.Stats()
		prev := t.last[id]
		nacks, ticks := st.NacksSent-min(prev[0], st.NacksSent), st.NackTicksSent-min(prev[1], st.NackTicksSent)
		t.last[id] = [2]uint64{st.NacksSent, st.NackTicksSent}
		r := t.cur[id]
		if r == nil {
			r = &traceRow{}
		}
		avg := 0.0
		if r.n > 0 {
			avg = float64(r.sumLatency.Milliseconds()) / float64(r.n)
		}
		fmt.Fprintf(t.w, "%d,%s,%d,%.1f,%d,%d,%d,%s\n", time.Duration(w.now-epoch).Milliseconds(), id, r.n, avg,
			r.maxLatency.Milliseconds(), nacks, ticks>>tick.SubTickBits, ccColumns(w, n))
	}
	t.cur = map[msg.NodeID]*traceRow{}
	w.after(t.window, func() { t.sample(w) })
}

func (t *tracer) flush() { t.w.Flush() }

// ccColumns are the congestion control columns of a row (Gryphon CC §5's
// figures): the pubend's rate limit in events/s (0: unlimited), and at an
// SHB the smoothed doubt-horizon rate, whether it is recovering and its NACK
// window (empty with congestion control off), and how far its doubt horizon
// lags the present. Each is the first pubend's (the "cc" scenario has one).
func ccColumns(w *world, n *node) string {
	if !n.up {
		return ",,,,"
	}
	cc := n.eng.CCStates()
	if n.broker.Role == PHB {
		if len(cc) > 0 {
			return fmt.Sprintf("%.1f,,,,", cc[0].Limit)
		}
		return ",,,,"
	}
	streams := n.eng.Inspect()
	if n.broker.Role != SHB || len(streams) == 0 {
		return ",,,,"
	}
	lag := fmt.Sprint(w.localNow(n).Millis() - streams[0].DoubtHorizon.Millis())
	for _, s := range cc {
		if s.Pubend != streams[0].Pubend {
			continue
		}
		rec := 0
		if s.Recovering {
			rec = 1
		}
		return fmt.Sprintf(",%.3f,%d,%d,%s", s.Rate, rec, s.NackWindow, lag)
	}
	return ",,,," + lag
}
