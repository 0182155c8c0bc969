package bench

import (
	"encoding/json"
	"fmt"
	"io"
	"strings"
)

// WriteJSON writes one object per (workload, system): the headline point,
// with the workload's other points under "points" and the machine's limits
// under "machine" (docs/BENCHMARKS.md "Method").
func WriteJSON(w io.Writer, rep *Report) error {
	type key struct{ w, s string }
	var order []key
	groups := map[key][]Result{}
	for _, r := range rep.Results {
		k := key{r.Workload, r.System}
		if _, ok := groups[k]; !ok {
			order = append(order, k)
		}
		groups[k] = append(groups[k], r)
	}
	enc := json.NewEncoder(w)
	for _, k := range order {
		rs := groups[k]
		head := 0
		for i, r := range rs {
			if r.headline {
				head = i
			}
		}
		out := rs[head]
		for i, r := range rs {
			if i != head {
				out.Points = append(out.Points, r)
			}
		}
		m := rep.Machine
		out.Machine = &m
		if err := enc.Encode(out); err != nil {
			return fmt.Errorf("bench: write json: %w", err)
		}
	}
	return nil
}

// WriteTables writes the machine's limits and one Markdown table per
// workload, with aerie's ratio to each peer on the same point.
func WriteTables(w io.Writer, rep *Report) {
	m := rep.Machine
	fmt.Fprintf(w, "machine: %d CPUs, load %s; fsync p50 %.0f µs p99 %.0f µs; group commit %.0f k records/s (256 B, 256 per fsync); loopback TCP %.0f MB/s\n",
		m.CPUs, m.Load1, m.FsyncP50us, m.FsyncP99us, m.GroupCommitPerS/1000, m.LoopbackMBPerSec)
	if m.CommitFloorRate > 0 {
		fmt.Fprintf(w, "machine: the disk's latency floor at %d records/s (a record's arrival → its group commit's fsync, our log alone): p50 %.0f µs p99 %.0f µs\n",
			m.CommitFloorRate, m.CommitFloorP50us, m.CommitFloorP99us)
	}
	fmt.Fprintf(w, "runs per point: %d (median, [min–max]); duration per run %s\n", rep.Options.Runs, rep.Options.Duration)
	var last string
	for i, r := range rep.Results {
		if r.Workload != last {
			last = r.Workload
			fmt.Fprintf(w, "\n### %s\n\n", r.Workload)
			fmt.Fprintln(w, "| point | system | msgs/s | p50 µs | p99 µs | p99.9 µs | CPU-s / M events | peak RSS MB | delivered / expected | aerie ÷ system: msgs/s, p99, CPU |")
			fmt.Fprintln(w, "|---|---|---|---|---|---|---|---|---|---|")
		}
		if r.Runs == 0 {
			why := r.Err
			if why == "" {
				why = r.Note
			}
			fmt.Fprintf(w, "| %s | %s | — | — | — | — | — | — | — | %s |\n", r.Point, r.System, strings.NewReplacer("|", "/", "\n", "; ").Replace(why))
			continue
		}
		fmt.Fprintf(w, "| %s | %s | %s | %s | %s | %s | %s | %.0f | %d / %d%s | %s |\n",
			r.Point, sysLabel(r), rng(r, "msgs_per_sec", r.MsgsPerSec, 0), rng(r, "p50_us", r.P50, 0), rng(r, "p99_us", r.P99, 0),
			rng(r, "p999_us", r.P999, 0), rng(r, "cpu_s_per_million", r.CPUPerMillion, 1), r.PeakRSSMB,
			r.Delivered, r.Expected, integrity(r), ratios(rep.Results, i))
	}
	for _, r := range rep.Results {
		if r.Workload == "catchup" && r.Runs > 0 {
			relink := ""
			if v, ok := r.Extra["relink_s"]; ok {
				relink = fmt.Sprintf(" (of which %.2f s until the SHB's upstream link was back)", v)
			}
			fmt.Fprintf(w, "\ncatchup %s: outage %.0f s, caught up in %.2f s%s, %.1f× real time\n", r.System, r.Extra["outage_s"], r.Extra["catchup_s"], relink, r.Extra["x_real_time"])
		}
	}
	for _, r := range rep.Results {
		if v, ok := r.Extra["link_bytes_per_event"]; ok && r.Runs > 0 {
			fmt.Fprintf(w, "\n%s %s %s: the IB → SHB link carried %.1f bytes per published event\n", r.Workload, r.Point, r.System, v)
		}
	}
	writeProcessCPU(w, rep)
	for _, r := range rep.Results {
		if r.Err != "" && r.Runs > 0 {
			fmt.Fprintf(w, "\nnote: %s %s %s: some runs failed: %s\n", r.Workload, r.Point, r.System, r.Err)
		}
	}
}

func sysLabel(r Result) string {
	if r.System == SysJetStreamDef {
		return r.System + " (not durable)"
	}
	return r.System
}

// integrity flags anything but exactly-once, in-order delivery.
func integrity(r Result) string {
	if r.Dups == 0 && r.Gaps == 0 {
		return ""
	}
	return fmt.Sprintf(" (%d dup/reordered, %d gaps)", r.Dups, r.Gaps)
}

// rng renders "median [min–max]".
func rng(r Result, name string, v float64, prec int) string {
	x, ok := r.Range[name]
	if !ok || r.Runs < 2 {
		return fmt.Sprintf("%s", num(v, prec))
	}
	return fmt.Sprintf("%s [%s–%s]", num(v, prec), num(x[0], prec), num(x[1], prec))
}

func num(v float64, prec int) string {
	switch {
	case prec == 0 && v >= 10000:
		return fmt.Sprintf("%.0fk", v/1000)
	case prec == 0:
		return fmt.Sprintf("%.0f", v)
	default:
		return fmt.Sprintf("%.*f", prec, v)
	}
}

// ratios compares aerie with results[i] on the same workload and point
// (in the mqtt workload, aerie behind its MQTT listener at the same QoS).
func ratios(rs []Result, i int) string {
	r := rs[i]
	base := SysAerie
	if r.Workload == "mqtt" {
		base = SysAerieMQTT
		if mqttSystemQoS(r.System) == 2 {
			base = SysAerieMQTTQoS2
		}
	}
	if r.System == base {
		return ""
	}
	for _, a := range rs {
		if a.System == base && a.Workload == r.Workload && a.Point == r.Point && a.Runs > 0 {
			return fmt.Sprintf("%s, %s, %s", ratio(a.MsgsPerSec, r.MsgsPerSec), ratio(a.P99, r.P99), ratio(a.CPUPerMillion, r.CPUPerMillion))
		}
	}
	return ""
}

func ratio(a, b float64) string {
	if b == 0 {
		return "—"
	}
	return fmt.Sprintf("%.2f×", a/b)
}
