package bench

import (
	"slices"
	"sort"
)

// Result is one (workload, system, point): medians over the runs, with the
// range. Its JSON form is the `aerie bench --json` contract (docs/BENCHMARKS.md "Method").
type Result struct {
	Workload      string  `json:"workload"`
	System        string  `json:"system"`
	Point         string  `json:"point"`
	Durable       bool    `json:"durable"`
	MsgsPerSec    float64 `json:"msgs_per_sec"`
	P50           float64 `json:"p50_us"`
	P99           float64 `json:"p99_us"`
	P999          float64 `json:"p999_us"`
	CPUPerMillion float64 `json:"cpu_s_per_million"`
	PeakRSSMB     float64 `json:"peak_rss_mb"`
	Runs          int     `json:"runs"`
	// Range holds [min, max] over the runs of each metric above.
	Range     map[string][2]float64 `json:"range,omitempty"`
	Published int64                 `json:"published"`
	Delivered int64                 `json:"delivered"`
	Expected  int64                 `json:"expected"`
	// Dups counts deliveries at or below the last seq seen (duplicates or
	// reordering), Gaps the jumps over missing seqs; both 0 means exactly
	// once, in order.
	Dups  int64              `json:"dups"`
	Gaps  int64              `json:"gaps"`
	Extra map[string]float64 `json:"extra,omitempty"`
	Note  string             `json:"note,omitempty"`
	// Err is set when a run failed; the medians cover the runs that did not.
	Err string `json:"error,omitempty"`
	// Points are this (workload, system)'s other measurement points, when
	// the object is the headline of a JSON line.
	Points  []Result `json:"points,omitempty"`
	Machine *Machine `json:"machine,omitempty"`

	runs     []runResult // kept for the plots
	headline bool
}

func median(xs []float64) float64 {
	if len(xs) == 0 {
		return 0
	}
	s := slices.Clone(xs)
	sort.Float64s(s)
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}

// aggregate folds the successful runs into r.
func (r *Result) aggregate(runs []runResult) {
	r.runs = runs
	r.Runs = len(runs)
	if len(runs) == 0 {
		return
	}
	r.Range = map[string][2]float64{}
	field := func(name string, dst *float64, get func(runResult) float64) {
		xs := make([]float64, len(runs))
		for i, x := range runs {
			xs[i] = get(x)
		}
		*dst = median(xs)
		r.Range[name] = [2]float64{slices.Min(xs), slices.Max(xs)}
	}
	field("msgs_per_sec", &r.MsgsPerSec, func(x runResult) float64 { return x.MsgsPerSec })
	field("p50_us", &r.P50, func(x runResult) float64 { return x.P50 })
	field("p99_us", &r.P99, func(x runResult) float64 { return x.P99 })
	field("p999_us", &r.P999, func(x runResult) float64 { return x.P999 })
	field("cpu_s_per_million", &r.CPUPerMillion, func(x runResult) float64 { return x.CPUPerMillion })
	field("peak_rss_mb", &r.PeakRSSMB, func(x runResult) float64 { return x.PeakRSSMB })
	keys := map[string]bool{}
	for _, x := range runs {
		r.Published += x.Published
		r.Delivered += x.Delivered
		r.Expected += x.Expected
		r.Dups += x.Dups
		r.Gaps += x.Gaps
		for k := range x.Extra {
			keys[k] = true
		}
	}
	if len(keys) > 0 {
		r.Extra = map[string]float64{}
		for k := range keys {
			var v float64
			field(k, &v, func(x runResult) float64 { return x.Extra[k] })
			r.Extra[k] = v
		}
	}
}
