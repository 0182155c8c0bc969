package match

import (
	"fmt"
	"github.com/aerie-mq/aerie/internal/msg"
	"math/rand/v2"
	"slices"
	"syscall"
	"testing"
)

var benchSizes = []int{1_000, 10_000, 100_000, 1_000_000}

// benchSubs builds n subscriptions with the mix documented in
// docs/BENCHMARKS.md §5. Identical selector texts share one *Selector.
func benchSubs(n int) []bruteSub {
	r := rand.New(rand.NewPCG(uint64(n), 7))
	cache := map[string]*Selector{}
	out := make([]bruteSub, n)
	for i := range out {
		pat, src := WorkloadSubscription(r)
		s, ok := cache[src]
		if !ok {
			s = MustSelector(src)
			cache[src] = s
		}
		out[i] = bruteSub{id: uint64(i), pat: MustPattern(pat), sel: s}
	}
	return out
}

type benchEvent struct {
	topic string
	props msg.Props
}

func benchEvents() []benchEvent {
	r := rand.New(rand.NewPCG(1, 2))
	ev := make([]benchEvent, 1024)
	for i := range ev {
		topic, p := WorkloadEvent(r)
		ev[i] = benchEvent{topic, pm(p)}
	}
	return ev
}

func BenchmarkIndexMatch(b *testing.B) {
	events := benchEvents()
	for _, n := range benchSizes {
		b.Run(fmt.Sprintf("N=%d", n), func(b *testing.B) {
			subs := benchSubs(n)
			ix := NewIndex()
			for _, s := range subs {
				ix.Add(s.id, s.pat, s.sel)
			}
			subs = nil
			matched := 0
			fn := func(uint64) { matched++ }
			ix.Match(events[0].topic, events[0].props, fn) // sort range lists
			b.ReportAllocs()
			b.ResetTimer()
			i := 0
			for b.Loop() {
				e := &events[i&1023]
				ix.Match(e.topic, e.props, fn)
				i++
			}
			b.ReportMetric(float64(matched)/float64(i), "matches/event")
		})
	}
}

func BenchmarkBruteForce(b *testing.B) {
	events := benchEvents()
	for _, n := range benchSizes {
		b.Run(fmt.Sprintf("N=%d", n), func(b *testing.B) {
			subs := benchSubs(n)
			matched := 0
			b.ReportAllocs()
			b.ResetTimer()
			i := 0
			for b.Loop() {
				e := &events[i&1023]
				for j := range subs {
					s := &subs[j]
					if s.pat.MatchTopic(e.topic) && (s.sel == nil || s.sel.Match(e.topic, e.props)) {
						matched++
					}
				}
				i++
			}
			b.ReportMetric(float64(matched)/float64(i), "matches/event")
		})
	}
}

// BenchmarkIndexMatchCollect is BenchmarkIndexMatch with the callback the
// broker uses (internal/gd appends the matched slots, then sorts them), so
// the per-match cost of the caller is counted too.
func BenchmarkIndexMatchCollect(b *testing.B) {
	events := benchEvents()
	for _, n := range benchSizes {
		b.Run(fmt.Sprintf("N=%d", n), func(b *testing.B) {
			ix := NewIndex()
			for _, s := range benchSubs(n) {
				ix.Add(s.id, s.pat, s.sel)
			}
			var matched []uint64
			fn := func(id uint64) { matched = append(matched, id) }
			ix.Match(events[0].topic, events[0].props, fn)
			total := 0
			b.ReportAllocs()
			b.ResetTimer()
			i := 0
			for b.Loop() {
				e := &events[i&1023]
				matched = matched[:0]
				ix.Match(e.topic, e.props, fn)
				slices.Sort(matched)
				total += len(matched)
				i++
			}
			b.ReportMetric(float64(total)/float64(i), "matches/event")
		})
	}
}

// BenchmarkIndexChurn measures one unsubscribe, one subscribe and one
// event at 100k subscriptions: the subscription's slot is re-filed with a
// fresh selector of the same mix each time.
func BenchmarkIndexChurn(b *testing.B) {
	const n = 100_000
	events := benchEvents()
	subs := benchSubs(n)
	ix := NewIndex()
	for _, s := range subs {
		ix.Add(s.id, s.pat, s.sel)
	}
	fn := func(uint64) {}
	ix.Match(events[0].topic, events[0].props, fn)
	b.ReportAllocs()
	b.ResetTimer()
	i := 0
	for b.Loop() {
		s := &subs[(i*7919)%n]
		ix.Remove(s.id)
		ix.Add(s.id, s.pat, MustSelector(s.sel.String()))
		e := &events[i&1023]
		ix.Match(e.topic, e.props, fn)
		i++
	}
}

// cpuNanos is the CPU time (user + system) this process has used.
func cpuNanos() int64 {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return ru.Utime.Nano() + ru.Stime.Nano()
}

// BenchmarkIndexMatchCPU is BenchmarkIndexMatch that also reports the CPU
// time the process spent per event (cpu-ns/event). On a shared machine the
// wall-clock ns/op includes time spent descheduled; the CPU time does not,
// so it is the steadier measure of the cost per event per core.
func BenchmarkIndexMatchCPU(b *testing.B) {
	events := benchEvents()
	for _, n := range benchSizes {
		b.Run(fmt.Sprintf("N=%d", n), func(b *testing.B) {
			ix := NewIndex()
			for _, s := range benchSubs(n) {
				ix.Add(s.id, s.pat, s.sel)
			}
			matched := 0
			fn := func(uint64) { matched++ }
			ix.Match(events[0].topic, events[0].props, fn)
			b.ReportAllocs()
			b.ResetTimer()
			i := 0
			cpu0 := cpuNanos()
			for b.Loop() {
				e := &events[i&1023]
				ix.Match(e.topic, e.props, fn)
				i++
			}
			b.ReportMetric(float64(cpuNanos()-cpu0)/float64(i), "cpu-ns/event")
			b.ReportMetric(float64(matched)/float64(i), "matches/event")
		})
	}
}

// BenchmarkBruteForceCPU is BenchmarkBruteForce reporting cpu-ns/event too.
func BenchmarkBruteForceCPU(b *testing.B) {
	events := benchEvents()
	for _, n := range benchSizes {
		b.Run(fmt.Sprintf("N=%d", n), func(b *testing.B) {
			subs := benchSubs(n)
			matched := 0
			b.ReportAllocs()
			b.ResetTimer()
			i := 0
			cpu0 := cpuNanos()
			for b.Loop() {
				e := &events[i&1023]
				for j := range subs {
					s := &subs[j]
					if s.pat.MatchTopic(e.topic) && (s.sel == nil || s.sel.Match(e.topic, e.props)) {
						matched++
					}
				}
				i++
			}
			b.ReportMetric(float64(cpuNanos()-cpu0)/float64(i), "cpu-ns/event")
			b.ReportMetric(float64(matched)/float64(i), "matches/event")
		})
	}
}
