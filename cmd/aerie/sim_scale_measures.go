package main

import (
	"fmt"
	"io"
	"time"

	"github.com/aerie-mq/aerie/internal/sim"
)

// printScaleMeasures writes the measurements behind docs/SCALE.md's
// scaling laws: traffic by kind, the steady window's control traffic per
// event, subscription propagation, and recovery after the partitions.
func printScaleMeasures(w io.Writer, r *sim.ScaleResult) {
	msgs, bytes := r.Traffic.Total()
	fmt.Fprintf(w, "traffic: %d messages, %s on links: %s\n", msgs, humanBytes(int64(bytes)), r.Traffic)
	cm, cb := r.Steady.Control()
	fmt.Fprintf(w, "steady %s–%s: %d events logged, %d delivered; control traffic %d messages, %s (%.1f messages per delivered event)\n",
		r.SteadyFrom, r.SteadyTo, r.SteadyLogged, r.SteadyDelivered, cm, humanBytes(int64(cb)), perEvent(cm, r.SteadyDelivered))
	l := r.SubLatency
	fmt.Fprintf(w, "subscriptions: %d started, Subscribe → SubStarted p50 %s, p99 %s, max %s; %d filter versions logged\n",
		l.N, l.P50, l.P99, l.Max, r.FilterVersions)
	if r.RegionSHBs > 0 {
		fmt.Fprintf(w, "recovery after the heal: deep link (%d SHBs) %s, region (%d SHBs) %s\n",
			r.SHBsBehind, recoveryText(r.DeepRecovery), r.RegionSHBs, recoveryText(r.RegionRecovery))
	}
}

func perEvent(n uint64, events int) float64 {
	if events == 0 {
		return 0
	}
	return float64(n) / float64(events)
}

func recoveryText(d time.Duration) string {
	if d < 0 {
		return "not recovered"
	}
	return d.String()
}
