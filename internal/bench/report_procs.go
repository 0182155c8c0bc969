package bench

import (
	"fmt"
	"io"
	"strings"
)

// processRoles are the separate processes whose CPU is reported, in
// report order, with their names in the text.
var processRoles = []struct{ key, name string }{
	{"phb", "PHB"}, {"ib", "IB"}, {"shb", "SHB"}, {"broker", "broker"},
	{"subscribers", "subscribers"}, {"harness", "harness (publisher)"},
}

// addGDRatios gives each aerie result of the overhead workload, for every
// broker, its CPU per event divided by best effort's on the same point
// (extra "<role>_gd_ratio"): 1.05 is a GD overhead of 5 %.
func addGDRatios(rs []Result) {
	for i, gd := range rs {
		if gd.Workload != "overhead" || gd.System != SysAerie || gd.Runs == 0 {
			continue
		}
		for _, be := range rs {
			if be.Workload != gd.Workload || be.Point != gd.Point || be.System != SysAerieBestEffort || be.Runs == 0 {
				continue
			}
			for _, role := range []string{"phb", "ib", "shb"} {
				k := role + "_cpu_s_per_million"
				if g, b := gd.Extra[k], be.Extra[k]; g > 0 && b > 0 {
					rs[i].Extra[role+"_gd_ratio"] = g / b
				}
			}
		}
	}
}

// writeProcessCPU writes, for each result measured with separate
// processes, its CPU per million deliveries by process and, for GD, the
// ratio to best effort per broker.
func writeProcessCPU(w io.Writer, rep *Report) {
	for _, r := range rep.Results {
		if r.Runs == 0 {
			continue
		}
		var parts []string
		for _, p := range processRoles {
			if v, ok := r.Extra[p.key+"_cpu_s_per_million"]; ok {
				parts = append(parts, fmt.Sprintf("%s %s", p.name, rng(r, p.key+"_cpu_s_per_million", v, 2)))
			}
		}
		if len(parts) == 0 {
			continue
		}
		fmt.Fprintf(w, "\n%s %s %s: CPU-s per M deliveries by process: %s\n", r.Workload, r.Point, r.System, strings.Join(parts, ", "))
		var ratios []string
		for _, p := range processRoles {
			if v, ok := r.Extra[p.key+"_gd_ratio"]; ok {
				ratios = append(ratios, fmt.Sprintf("%s %.3f× (%+.1f %%)", p.name, v, (v-1)*100))
			}
		}
		if len(ratios) > 0 {
			fmt.Fprintf(w, "%s %s: GD ÷ best effort, CPU per event: %s\n", r.Workload, r.Point, strings.Join(ratios, ", "))
		}
	}
}
