package bench

import (
	"fmt"
	"io"
	"slices"
	"strings"

	"github.com/aerie-mq/aerie/internal/lattrace"
)

// stageNodes are the brokers of the 3-hop path in order, as the bench
// names them (startAerie, the procs network).
var stageNodes = []string{"p1", "b1", "s1"}

// reportStages writes the latency breakdown of one run from the lattrace
// table: for every stage, how long events took from the stage before
// (p50, p99, p99.9 of the step), and, for the events whose end-to-end
// latency is in the run's slowest 1 % (and 0.1 %), the mean of each step:
// where the tail's time goes. Only events with every stage marked count.
func reportStages(w io.Writer, label string) {
	tab := lattrace.Table()
	if tab == nil {
		return
	}
	// The columns that were marked, in the order events pass them
	// (ordered by their median time after the intended send).
	var cols []int
	for s := 0; s < lattrace.Slots; s++ {
		for q := 1; q < lattrace.MaxSeqs; q++ {
			if tab[q*lattrace.Slots+s] != 0 {
				cols = append(cols, s)
				break
			}
		}
	}
	recv := lattrace.Slot(len(stageNodes), lattrace.Recv)
	if !slices.Contains(cols, recv) {
		return
	}
	// An event's intended send time is not in the table; the publisher's
	// first mark stands in as the start where the payload is not at hand,
	// so rows are events with every column marked, and steps are measured
	// from the first column.
	type row struct {
		t   []int64
		e2e int64
	}
	var rows []row
	for q := 1; q < lattrace.MaxSeqs; q++ {
		base := q * lattrace.Slots
		ok := true
		t := make([]int64, len(cols))
		for i, s := range cols {
			if t[i] = tab[base+s]; t[i] == 0 {
				ok = false
				break
			}
		}
		if ok {
			rows = append(rows, row{t: t})
		}
	}
	if len(rows) < 100 {
		fmt.Fprintf(w, "stages %s: only %d events fully traced\n", label, len(rows))
		return
	}
	// Order the columns by their median offset from the first one.
	med := make([]int64, len(cols))
	for i := range cols {
		d := make([]int64, len(rows))
		for j, r := range rows {
			d[j] = r.t[i] - r.t[0]
		}
		slices.Sort(d)
		med[i] = d[len(d)/2]
	}
	order := make([]int, len(cols))
	for i := range order {
		order[i] = i
	}
	slices.SortStableFunc(order, func(a, b int) int { return int(med[a] - med[b]) })
	first, last := order[0], order[len(order)-1]
	for j := range rows {
		rows[j].e2e = rows[j].t[last] - rows[j].t[first]
	}
	e2e := make([]int64, len(rows))
	for j, r := range rows {
		e2e[j] = r.e2e
	}
	slices.Sort(e2e)
	pct := func(d []int64, p float64) float64 {
		return float64(d[min(len(d)-1, int(p*float64(len(d))))]) / 1e3
	}
	p99, p999 := e2e[min(len(e2e)-1, int(0.99*float64(len(e2e))))], e2e[min(len(e2e)-1, int(0.999*float64(len(e2e))))]
	var b strings.Builder
	fmt.Fprintf(&b, "stages %s: %d events traced; %s → %s: p50 %.0f µs, p99 %.0f µs, p99.9 %.0f µs\n", label, len(rows),
		lattrace.SlotName(cols[first], stageNodes), lattrace.SlotName(cols[last], stageNodes), pct(e2e, 0.5), pct(e2e, 0.99), pct(e2e, 0.999))
	fmt.Fprintf(&b, "| step (µs from the stage above) | p50 | p99 | p99.9 | mean, all | mean, slowest 1 %% | mean, slowest 0.1 %% |\n|---|---|---|---|---|---|---|\n")
	for k := 1; k < len(order); k++ {
		i, prev := order[k], order[k-1]
		d := make([]int64, len(rows))
		var all, tail, tail3 float64
		var nt, nt3 int
		for j, r := range rows {
			d[j] = r.t[i] - r.t[prev]
			all += float64(d[j])
			if r.e2e >= p99 {
				tail += float64(d[j])
				nt++
			}
			if r.e2e >= p999 {
				tail3 += float64(d[j])
				nt3++
			}
		}
		slices.Sort(d)
		fmt.Fprintf(&b, "| %s | %.0f | %.0f | %.0f | %.0f | %.0f | %.0f |\n", lattrace.SlotName(cols[i], stageNodes),
			pct(d, 0.5), pct(d, 0.99), pct(d, 0.999), all/float64(len(rows))/1e3, tail/float64(max(nt, 1))/1e3, tail3/float64(max(nt3, 1))/1e3)
	}
	io.WriteString(w, b.String())
}
