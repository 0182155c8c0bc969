package sim

import (
	"bufio"
	"fmt"
	"io"
	"time"

	"github.com/aerie-mq/aerie/internal/msg"
	"github.com/aerie-mq/aerie/internal/tick"
)

// tracer samples per-broker time series, one row per broker per window:
// the data behind seed 000 Fig. 6 (latency, nacks sent, nack range) and
// Gryphon CC §5's figures. It writes them as CSV (Options.Trace) and keeps
// them for Result.Trace (Options.KeepTrace).
type tracer struct {
	w      *bufio.Writer // nil: rows kept only
	keep   bool
	rows   []TraceRow
	window time.Duration
	cur    map[msg.NodeID]*traceWindow
	last   map[msg.NodeID][2]uint64 // nacks, nack ticks at the previous row
	header bool
}

type traceWindow struct {
	n          int
	sumLatency time.Duration
	maxLatency time.Duration
}

// TraceRow is one broker's row of a traced run: the columns of the trace
// CSV (`aerie sim --trace`), typed, plus what the CSV leaves out (Queued).
type TraceRow struct {
	// At is when the window ended, since the start of the run; windows
	// are 100 ms.
	At     time.Duration
	Broker msg.NodeID
	// Deliveries in the window, their mean and largest latency (a
	// subscriber's receive time minus the tick's pubend time).
	Deliveries int
	LatencyAvg float64 // ms
	LatencyMax int64   // ms
	// Nacks sent in the window and the ticks they covered, in ms.
	Nacks     uint64
	NackRange uint64
	// HasLimit: a PHB with congestion control on; Limit is its first
	// pubend's rate limit in events/s (0: unlimited).
	HasLimit bool
	Limit    float64
	// HasCC: an SHB with congestion control state for its first stream:
	// the smoothed doubt-horizon rate (tick-s/s), whether it is
	// recovering, and its NACK window in ms of ticks.
	HasCC      bool
	DHRate     float64
	Recovering bool
	NackWindow int64
	// HasLag: an SHB with a stream; Lag is how far the first stream's
	// doubt horizon lags the SHB's clock (before the stream starts, the
	// whole epoch).
	HasLag bool
	Lag    time.Duration
	// Queued: bytes waiting at the end of the window on the broker's
	// capped links downstream (congestion.go); QueuedPeak: the most that
	// waited on one of them at any moment of the window (a queue that
	// overflows and resets within the window shows here, not in Queued).
	// Not in the CSV.
	Queued, QueuedPeak int
}

func newTracer(out io.Writer, keep bool) *tracer {
	t := &tracer{keep: keep, window: 100 * time.Millisecond, cur: map[msg.NodeID]*traceWindow{}, last: map[msg.NodeID][2]uint64{}}
	if out != nil {
		t.w = bufio.NewWriter(out)
	}
	return t
}

// delivered records one delivery's latency: the subscriber's local receive
// time minus the tick's pubend time (pub_ms), as the seed's figure measures.
func (t *tracer) delivered(n *node, local tick.Time, ev *msg.Event) {
	r := t.cur[n.id]
	if r == nil {
		r = &traceWindow{}
		t.cur[n.id] = r
	}
	lat := time.Duration(local.Millis()-ev.Tick.Millis()) * time.Millisecond
	r.n++
	r.sumLatency += lat
	r.maxLatency = max(r.maxLatency, lat)
}

// sample records one row per broker for the window ending at now.
func (t *tracer) sample(w *world) {
	if t.w != nil && !t.header {
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
			r = &traceWindow{}
		}
		row := TraceRow{At: w.now.Sub(epoch), Broker: id, Deliveries: r.n, LatencyMax: r.maxLatency.Milliseconds(),
			Nacks: nacks, NackRange: ticks >> tick.SubTickBits}
		if r.n > 0 {
			row.LatencyAvg = float64(r.sumLatency.Milliseconds()) / float64(r.n)
		}
		ccColumns(w, n, &row)
		for _, l := range w.links {
			if l.a == id && l.up && l.bw > 0 && l.busy[0] > w.now {
				row.Queued += int(l.busy[0].Sub(w.now).Seconds() * l.bw)
			}
			if l.a == id {
				row.QueuedPeak = max(row.QueuedPeak, int(l.peak[0]))
				l.peak[0] = 0
			}
		}
		if t.w != nil {
			row.writeCSV(t.w)
		}
		if t.keep {
			t.rows = append(t.rows, row)
		}
	}
	t.cur = map[msg.NodeID]*traceWindow{}
	w.after(t.window, func() { t.sample(w) })
}

func (t *tracer) flush() {
	if t.w != nil {
		t.w.Flush()
	}
}

// writeCSV writes r as one line of the trace CSV.
func (r *TraceRow) writeCSV(out io.Writer) {
	fmt.Fprintf(out, "%d,%s,%d,%.1f,%d,%d,%d,", r.At.Milliseconds(), r.Broker, r.Deliveries, r.LatencyAvg,
		r.LatencyMax, r.Nacks, r.NackRange)
	switch {
	case r.HasLimit:
		fmt.Fprintf(out, "%.1f,,,,\n", r.Limit)
	case r.HasCC:
		rec := 0
		if r.Recovering {
			rec = 1
		}
		fmt.Fprintf(out, ",%.3f,%d,%d,%d\n", r.DHRate, rec, r.NackWindow, r.Lag.Milliseconds())
	case r.HasLag:
		fmt.Fprintf(out, ",,,,%d\n", r.Lag.Milliseconds())
	default:
		fmt.Fprint(out, ",,,,\n")
	}
}

// ccColumns fills the congestion control columns of a row (Gryphon CC
// §5's figures): the pubend's rate limit in events/s (0: unlimited), and at
// an SHB the smoothed doubt-horizon rate, whether it is recovering and its
// NACK window (absent with congestion control off), and how far its doubt
// horizon lags the present. Each is the first pubend's (the "cc" scenario
// has one).
func ccColumns(w *world, n *node, r *TraceRow) {
	if !n.up {
		return
	}
	cc := n.eng.CCStates()
	if n.broker.Role == PHB {
		if len(cc) > 0 {
			r.HasLimit, r.Limit = true, cc[0].Limit
		}
		return
	}
	streams := n.eng.Inspect()
	if n.broker.Role != SHB || len(streams) == 0 {
		return
	}
	r.HasLag, r.Lag = true, time.Duration(w.localNow(n).Millis()-streams[0].DoubtHorizon.Millis())*time.Millisecond
	for _, s := range cc {
		if s.Pubend != streams[0].Pubend {
			continue
		}
		r.HasCC, r.DHRate, r.Recovering, r.NackWindow = true, s.Rate, s.Recovering, s.NackWindow
		return
	}
}
