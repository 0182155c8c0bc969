package bench

import (
	"fmt"
	"syscall"
	"time"
)

// point is one measurement point of a workload (a topology and a load).
type point struct {
	label    string
	topo     Topology
	spec     loadSpec
	note     string
	headline bool // the point a JSON line leads with
}

// points lists a workload's measurement points.
func points(name string, o Options) []point {
	idle := 15 * time.Second
	all := []Filter{{}}
	switch name {
	case "throughput":
		s := loadSpec{subs: all, duration: o.Duration, size: o.Size, idle: idle}
		return []point{
			{label: "3hops", topo: Topology{Hops3: true, NoAck: true}, spec: s, headline: true,
				note: "1 pub → 1 sub through PHB → IB → SHB, as fast as a 1024-deep publish window allows (best effort: no acks, a round trip per 1024, as core NATS)"},
			{label: "1broker", topo: Topology{NoAck: true}, spec: s, note: "1 pub → 1 sub on one broker"},
		}
	case "latency":
		var ps []point
		for i, r := range o.Rates {
			ps = append(ps, point{label: fmt.Sprintf("rate=%d", r), topo: Topology{Hops3: true}, headline: i == len(o.Rates)-1,
				spec: loadSpec{subs: all, rate: r, duration: o.Duration, size: o.Size, series: true, idle: idle},
				note: "fixed schedule; latency from each message's intended send time (coordinated omission included)"})
		}
		return ps
	case "fanout":
		var ps []point
		limit := fdLimit()
		seen := map[int]bool{}
		for i, n := range o.FanoutN {
			note, n := fanoutFit(n, limit, o.Procs)
			if seen[n] {
				continue
			}
			seen[n] = true
			subs := make([]Filter, n)
			ps = append(ps, point{label: fmt.Sprintf("n=%d", n), topo: Topology{Hops3: true, SubBuffer: 64}, headline: i == len(o.FanoutN)-1,
				spec: loadSpec{subs: subs, rate: 2, duration: max(o.Duration, 2*time.Second), size: o.Size, idle: idle}, note: note})
		}
		return ps
	case "selective":
		subs := make([]Filter, o.Selective)
		for i := range subs {
			subs[i] = Filter{Keyed: true, Key: i}
		}
		ps := []point{{label: fmt.Sprintf("subs=%d", o.Selective), topo: Topology{Hops3: true, SubBuffer: 1024}, headline: true,
			spec: loadSpec{subs: subs, keys: o.Selective, duration: o.Duration, size: o.Size, idle: idle},
			note: fmt.Sprintf("%d subscribers, each selecting k = i; k = seq mod %d, so each event matches one", o.Selective, o.Selective)}}
		return append(ps, scalePoints(o, idle)...)
	case "overhead":
		// Same network and load in both modes; the fixed rate isolates CPU
		// per event and latency, the max point the ceiling.
		return []point{
			{label: fmt.Sprintf("rate=%d", o.Rates[len(o.Rates)-1]), topo: Topology{Hops3: true}, headline: true,
				spec: loadSpec{subs: all, rate: o.Rates[len(o.Rates)-1], duration: o.Duration, size: o.Size, idle: idle},
				note: overheadNote(o.Procs)},
			{label: "max", topo: Topology{Hops3: true}, spec: loadSpec{subs: all, duration: o.Duration, size: o.Size, idle: idle},
				note: "PHB → IB → SHB as fast as a 1024-deep publish window allows"},
		}
	case "mqtt":
		// Unmodified MQTT clients on both ends (paho), QoS 1 or 2 as the
		// system's name says: aerie through three hops, durable; then one
		// broker: aerie beside mochi (in process, in memory) and, with
		// --peer mosquitto, Debian's mosquitto (in memory).
		hops := "MQTT publish (paho, %d-deep window) → MQTT subscriber (paho), QoS 1 (-qos2: 2): aerie PHB → IB → SHB, acknowledged after the fsync%s"
		one := "the same on one broker: aerie acknowledges after the fsync; mochi and mosquitto keep messages in memory only%s"
		atMax, fixed := ", as fast as the window allows", fmt.Sprintf(", fixed schedule of %d/s", o.Rates[0])
		maxSpec := loadSpec{subs: all, duration: o.Duration, size: o.Size, idle: idle}
		rateSpec := loadSpec{subs: all, rate: o.Rates[0], duration: o.Duration, size: o.Size, idle: idle}
		return []point{
			{label: "max", topo: Topology{Hops3: true}, headline: true, spec: maxSpec, note: fmt.Sprintf(hops, mqttWindow, atMax)},
			{label: fmt.Sprintf("rate=%d", o.Rates[0]), topo: Topology{Hops3: true}, spec: rateSpec, note: fmt.Sprintf(hops, mqttWindow, fixed)},
			{label: "1broker max", spec: maxSpec, note: fmt.Sprintf(one, atMax)},
			{label: fmt.Sprintf("1broker rate=%d", o.Rates[0]), spec: rateSpec, note: fmt.Sprintf(one, fixed)},
		}
	case "catchup":
		warm := 2 * time.Second
		if o.Quick {
			warm = 500 * time.Millisecond
		}
		return []point{{label: fmt.Sprintf("outage=%s", o.Outage), topo: Topology{Hops3: true, Cuttable: true}, headline: true,
			spec: loadSpec{subs: all, rate: o.CatchRate, size: o.Size, idle: idle + o.Outage, outage: &outageSpec{warm: warm, down: o.Outage}},
			note: fmt.Sprintf("publishing %d msgs/s; the subscriber's path cut for %s", o.CatchRate, o.Outage)}}
	}
	return nil
}

func overheadNote(procs bool) string {
	if procs {
		return "PHB → IB → SHB at a fixed rate, each broker in its own process: GD vs best effort, CPU per event of each broker and latency"
	}
	return "PHB → IB → SHB at a fixed rate: GD vs best effort, CPU per event of the whole process and latency"
}

// scaleMeasured is how many of a scale point's subscriptions receive
// events (and are checked for exactly-once, in-order delivery).
const scaleMeasured = 100

// scalePoints: o.SelectiveScale subscriptions `k = i` behind the IB, of
// which scaleMeasured select keys that are published (k = seq mod
// scaleMeasured/f, so a fraction f of the events matches one) and the rest
// keys that never are. Every clause sits on the IB's edge to the SHB; the
// bytes on that link show whether the edge filters by content at that size.
func scalePoints(o Options, idle time.Duration) []point {
	if o.SelectiveScale <= 0 {
		return nil
	}
	m := min(scaleMeasured, o.SelectiveScale)
	subs := make([]Filter, m)
	for i := range subs {
		subs[i] = Filter{Keyed: true, Key: i}
	}
	var ps []point
	for _, f := range o.Matching {
		keys := max(m, int(float64(m)/f+0.5))
		ps = append(ps, point{label: fmt.Sprintf("scale=%d match=%g", o.SelectiveScale, f), topo: Topology{Hops3: true, SubBuffer: 1024, Counted: true},
			spec: loadSpec{subs: subs, keys: keys, ballast: o.SelectiveScale - m, duration: o.Duration, size: o.Size, idle: idle},
			note: fmt.Sprintf("%d subscriptions k = i behind the IB; %d of them select published keys (k = seq mod %d: %.3g of events match)", o.SelectiveScale, m, keys, float64(m)/float64(keys))})
	}
	return ps
}

// fanoutFit caps a fan-out point to the open-file limit: each in-process
// subscriber costs two descriptors (its end and the broker's), one with
// the brokers and subscribers in separate processes (the SHB's end; the
// subscribers' children hold subsPerChild each), plus fdMargin.
func fanoutFit(n, limit int, procs bool) (string, int) {
	note := fmt.Sprintf("%d subscriber connections at one SHB, 2 msgs/s each", n)
	if procs {
		note += "; brokers and subscribers in separate processes"
		if fit := limit - fdMargin; n > fit {
			return fmt.Sprintf("%d requested; the open-file limit (%d) fits %d connections at the SHB: raise it (ulimit -n %d) for all of them", n, limit, fit, n+fdMargin), fit
		}
		return note, n
	}
	if fit := (limit - fdMargin) / 2; n > fit {
		return fmt.Sprintf("%d requested; the open-file limit (%d) fits %d connections with both ends in this process (--procs puts the subscribers in their own processes)", n, limit, fit), fit
	}
	return note, n
}

// fdMargin leaves descriptors for the brokers' logs and listeners, the
// harness's probes and the runtime.
const fdMargin = 500

// fdLimit is the soft open-file limit (the Go runtime raises it to the
// hard limit at start-up).
func fdLimit() int {
	var rl syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &rl); err != nil {
		return 1024
	}
	return int(min(rl.Cur, 1<<20))
}
