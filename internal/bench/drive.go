package bench

import (
	"context"
	"errors"
	"fmt"
	"io"
	"sync"
	"time"
)

// loadSpec is one measured run of a workload against one target.
type loadSpec struct {
	subs     []Filter
	rate     int           // msgs/s on the fixed schedule; 0 = as fast as back-pressure allows
	duration time.Duration // how long to publish
	size     int
	keys     int // key = seq mod keys (0: key 0)
	ballast  int // subscriptions that match nothing published (ballaster)
	series   bool
	outage   *outageSpec
	idle     time.Duration // give up when nothing is delivered for this long
	progress io.Writer     // where a long subscription phase is reported (nil: nowhere)
	// sleepPace paces the fixed rate with time.Sleep, as before the
	// timerfd (pace_linux.go): for comparisons with older runs.
	sleepPace bool
}

// outageSpec cuts the subscribers' path after warm, for down, then
// measures how long the backlog takes to drain.
type outageSpec struct {
	warm, down time.Duration
}

// runResult is one repetition of one point.
type runResult struct {
	MsgsPerSec     float64
	P50, P99, P999 float64 // µs
	CPUPerMillion  float64
	PeakRSSMB      float64
	Published      int64
	Delivered      int64
	Expected       int64
	Dups, Gaps     int64
	Extra          map[string]float64
	coll           *collector
	start          int64
}

// drive subscribes, publishes on the spec's schedule, waits for delivery and
// measures the window from the first publish to the last delivery.
func drive(ctx context.Context, t Target, s loadSpec) (runResult, error) {
	coll := newCollector(s.series)
	if s.ballast > 0 {
		b, ok := t.(ballaster)
		if !ok {
			return runResult{}, fmt.Errorf("%d subscriptions over few connections: %w", s.ballast, errUnsupported)
		}
		if err := b.Ballast(ctx, s.ballast); err != nil {
			return runResult{}, err
		}
	}
	subscribing := time.Now()
	subs, err := subscribeAll(ctx, t, s.subs, s.keys, coll)
	if err != nil {
		return runResult{}, err
	}
	subscribeTime := time.Since(subscribing)
	if len(s.subs) >= 100 && s.progress != nil {
		fmt.Fprintf(s.progress, " %d subscribed in %s;", len(s.subs), subscribeTime.Round(100*time.Millisecond))
	}
	pub, err := t.Publisher(ctx, 0)
	if err != nil {
		return runResult{}, err
	}
	var heal, caught int64 // catch-up bookkeeping, under coll.mu
	if s.outage != nil {
		coll.onDelivery = func(d Delivery) {
			if heal != 0 && caught == 0 && d.Intended >= heal {
				caught = d.Recv
			}
		}
	}
	perKey := map[int]int64{}
	lc, counted := t.(linkCounter)
	var linkStart int64
	if counted {
		linkStart, counted = lc.LinkBytes()
	}
	pc, split := t.(procCPUer)
	var cpu0 map[string]time.Duration
	if split {
		if cpu0, err = pc.ProcCPU(); err != nil {
			return runResult{}, err
		}
	}
	w := startWindow(ctx)
	start := time.Now()
	var interval time.Duration
	if s.rate > 0 {
		interval = time.Second / time.Duration(s.rate)
	}
	end := start.Add(s.duration)
	var cutAt, healAt time.Time
	if o := s.outage; o != nil {
		cutAt = start.Add(o.warm)
		healAt = cutAt.Add(o.down)
		end = healAt.Add(3*o.down + 10*time.Second) // a bound; normally we stop soon after catching up
	}
	cut, healed := false, false
	var pace *sleeper // nil: time.Sleep
	if !s.sleepPace {
		pace = newSleeper()
		defer pace.close()
	}
	var seq uint64
	for {
		seq++
		intended := time.Now()
		if interval > 0 {
			intended = start.Add(time.Duration(seq-1) * interval)
			if d := time.Until(intended); d > 20*time.Microsecond {
				pace.sleep(d) // pacing the schedule, not synchronisation
			}
		}
		if !intended.Before(end) {
			seq--
			break
		}
		// A system that cannot sustain the fixed rate falls behind the
		// schedule; stop at the end of the wall-clock window rather than
		// let the run stretch, and report the shortfall.
		if interval > 0 && s.outage == nil && time.Now().After(end) {
			seq--
			break
		}
		if s.outage != nil {
			if !cut && !intended.Before(cutAt) {
				if err := t.Outage(true); err != nil {
					return runResult{}, err
				}
				cut = true
			}
			if !healed && !intended.Before(healAt) {
				if err := t.Outage(false); err != nil {
					return runResult{}, err
				}
				coll.mu.Lock()
				heal = intended.UnixNano()
				coll.mu.Unlock()
				healed = true
			}
			// Stop a second after the subscriber caught up: enough to show
			// it keeps up again, without publishing to the bound.
			if c := caughtAt(coll, &caught); healed && c != 0 && time.Since(time.Unix(0, c)) > time.Second {
				seq--
				break
			}
		}
		key := 0
		if s.keys > 0 {
			key = int(seq % uint64(s.keys))
		}
		perKey[key]++
		if err := pub.Publish(ctx, Msg{Seq: seq, Key: key, Intended: intended.UnixNano(), Size: s.size}); err != nil {
			return runResult{}, err
		}
		if err := ctx.Err(); err != nil {
			return runResult{}, err
		}
	}
	finishCtx, cancel := context.WithTimeout(ctx, max(30*time.Second, s.idle))
	defer cancel()
	if err := pub.Finish(finishCtx); err != nil {
		return runResult{}, err
	}
	var expected int64
	for _, f := range s.subs {
		if f.Keyed {
			expected += perKey[f.Key]
		} else {
			expected += int64(seq)
		}
	}
	waitErr := coll.waitFor(ctx, expected, s.idle)
	if waitErr != nil {
		waitErr = fmt.Errorf("%w%s", waitErr, endedSubs(subs))
	}
	var cpu1 map[string]time.Duration
	if split {
		if cpu1, err = pc.ProcCPU(); err != nil && waitErr == nil {
			waitErr = err
		}
	}
	cpu, _, rss := w.stop()
	coll.mu.Lock()
	defer coll.mu.Unlock()
	r := runResult{Published: int64(seq), Delivered: coll.delivered, Expected: expected, Dups: coll.dups, Gaps: coll.gaps,
		PeakRSSMB: float64(rss) / (1 << 20), coll: coll, start: start.UnixNano(), Extra: map[string]float64{}}
	if span := time.Duration(coll.lastRecv - start.UnixNano()); span > 0 {
		r.MsgsPerSec = float64(coll.delivered) / span.Seconds()
	}
	if coll.delivered > 0 {
		r.CPUPerMillion = cpu.Seconds() / float64(coll.delivered) * 1e6
	}
	if split && cpu1 != nil {
		perProcessCPU(&r, cpu, cpu0, cpu1)
	}
	r.P50 = float64(coll.hist.ValueAtQuantile(50))
	r.P99 = float64(coll.hist.ValueAtQuantile(99))
	r.P999 = float64(coll.hist.ValueAtQuantile(99.9))
	if counted && seq > 0 {
		n, _ := lc.LinkBytes()
		r.Extra["link_bytes_per_event"] = float64(n-linkStart) / float64(seq)
	}
	if len(s.subs) >= 100 {
		r.Extra["subscribe_s"] = subscribeTime.Seconds()
	}
	if s.rate > 0 && s.outage == nil {
		r.Extra["scheduled"] = float64(int64(s.duration / interval))
	}
	if s.outage != nil {
		if caught == 0 {
			return r, fmt.Errorf("never caught up after the outage (%d of %d delivered)", coll.delivered, expected)
		}
		catchup := time.Duration(caught - heal)
		backlog := s.rate * int(s.outage.down/time.Millisecond) / 1000
		r.Extra["outage_s"] = s.outage.down.Seconds()
		r.Extra["catchup_s"] = catchup.Seconds()
		r.Extra["backlog_events"] = float64(backlog)
		// While catching up the subscriber absorbs the outage's backlog and
		// what is published meanwhile: (down + catchup) of traffic in catchup.
		if rl, ok := t.(interface{ Relinked() time.Duration }); ok {
			r.Extra["relink_s"] = rl.Relinked().Seconds()
		}
		r.Extra["x_real_time"] = (s.outage.down + catchup).Seconds() / max(catchup.Seconds(), 1e-6)
		r.MsgsPerSec = float64(s.rate) * (s.outage.down + catchup).Seconds() / max(catchup.Seconds(), 1e-6)
	}
	if waitErr != nil {
		return r, waitErr
	}
	return r, nil
}

// procCPUer is a target whose parts run in separate processes: the CPU
// time so far of each, by role (phb, ib, shb or broker; subscribers).
type procCPUer interface {
	ProcCPU() (map[string]time.Duration, error)
}

// perProcessCPU sets r's CPU per million deliveries for each process
// (extra "<role>_cpu_s_per_million", the harness's as "harness_…"), and
// its CPUPerMillion to their sum, the whole system's as in one process.
func perProcessCPU(r *runResult, harness time.Duration, cpu0, cpu1 map[string]time.Duration) {
	if r.Delivered == 0 {
		return
	}
	perM := func(d time.Duration) float64 { return d.Seconds() / float64(r.Delivered) * 1e6 }
	total := harness
	r.Extra["harness_cpu_s_per_million"] = perM(harness)
	for role, c1 := range cpu1 {
		d := c1 - cpu0[role]
		total += d
		r.Extra[role+"_cpu_s_per_million"] = perM(d)
	}
	r.CPUPerMillion = perM(total)
}

func caughtAt(c *collector, caught *int64) int64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	return *caught
}

// subscribeAll opens the subscriptions with bounded parallelism: thousands
// of sequential handshakes would take longer than the measurement.
func subscribeAll(ctx context.Context, t Target, fs []Filter, keys int, coll *collector) ([]Sub, error) {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	const workers = 16
	idx := make(chan int)
	var wg sync.WaitGroup
	var mu sync.Mutex
	var errs []error
	opened := 0
	subs := make([]Sub, len(fs))
	for range min(workers, len(fs)) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range idx {
				stride := uint64(1)
				if fs[i].Keyed {
					stride = uint64(keys) // k = seq mod keys
				}
				sctx, c := context.WithTimeout(ctx, 30*time.Second)
				sub, err := t.Subscribe(sctx, fs[i], coll.sink(uint32(i), stride))
				c()
				subs[i] = sub
				mu.Lock()
				switch {
				case err == nil:
					opened++
				case ctx.Err() != nil && errors.Is(err, context.Canceled):
					// stopped by an earlier failure: not a failure of its own
				default:
					errs = append(errs, fmt.Errorf("subscriber %d: %w", i, err))
					cancel()
				}
				mu.Unlock()
			}
		}()
	}
	for i := range fs {
		select {
		case idx <- i:
		case <-ctx.Done():
		}
		if ctx.Err() != nil {
			break
		}
	}
	close(idx)
	wg.Wait()
	if len(errs) > 0 {
		return nil, errors.Join(errs[0], fmt.Errorf("%d of %d subscriptions failed (%d open when the first failure stopped the rest)", len(errs), len(fs), opened))
	}
	return subs, ctx.Err()
}

// endedSubs describes the subscriptions that ended on their own.
func endedSubs(subs []Sub) string {
	n, first := 0, ""
	for i, s := range subs {
		if s == nil {
			continue
		}
		if err := s.Err(); err != nil {
			if n == 0 {
				first = fmt.Sprintf("subscriber %d: %v", i, err)
			}
			n++
		}
	}
	if n == 0 {
		return "; every subscription still in force"
	}
	return fmt.Sprintf("; %d subscriptions ended, first %s", n, first)
}
