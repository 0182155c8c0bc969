package congestion_test

import (
	"math"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/aerie-mq/aerie/internal/congestion"
	"github.com/aerie-mq/aerie/internal/msg"
	"github.com/aerie-mq/aerie/internal/tick"
)

// Eq. 1: every increase adds at least r_min; it is multiplicative only
// above r_decr.
func TestIncreaseProperties(t *testing.T) {
	cfg := congestion.DefaultConfig()
	rng := rand.New(rand.NewPCG(1, 2))
	for range 10000 {
		old := cfg.RateMinIncrease + rng.Float64()*1e5
		rDecr := rng.Float64() * old
		got := congestion.Increase(cfg, old, rDecr)
		if got < old+cfg.RateMinIncrease {
			t.Fatalf("Increase(%g, rDecr %g) = %g: below r_old + r_min", old, rDecr, got)
		}
		if want := old + cfg.IncreaseFactor*(old-rDecr); got < want {
			t.Fatalf("Increase(%g, rDecr %g) = %g: below the multiplicative term %g", old, rDecr, got, want)
		}
	}
}

// Eq. 2 and 3: a decrease never raises the rate, never cuts below f_decr1 of
// it, and after an increase (r_decr < r_old) never goes below r_decr.
func TestDecreaseProperties(t *testing.T) {
	cfg := congestion.DefaultConfig()
	rng := rand.New(rand.NewPCG(3, 4))
	for range 10000 {
		old := 1 + rng.Float64()*1e5
		rDecr := old
		if rng.IntN(2) == 0 {
			rDecr = rng.Float64() * old
		}
		got := congestion.Decrease(cfg, old, rDecr)
		if got > old || got < cfg.DecreaseFactor1*old {
			t.Fatalf("Decrease(%g, rDecr %g) = %g: outside [f_decr1·r_old, r_old]", old, rDecr, got)
		}
		if rDecr == old && got != cfg.DecreaseFactor1*old {
			t.Fatalf("Decrease(%g, rDecr = r_old) = %g: eq. 3 halves", old, got)
		}
		if rDecr < old && got < rDecr {
			t.Fatalf("Decrease(%g, rDecr %g) = %g: below the rate of the last decrease", old, rDecr, got)
		}
	}
}

// Whatever alerts arrive, even impossible ones, the rate never falls below
// r_min and a waiting publisher is acknowledged within 1/r_min seconds: the
// pubend is never stalled.
func TestRegulatorNeverStalls(t *testing.T) {
	cfg := congestion.DefaultConfig()
	rng := rand.New(rand.NewPCG(5, 6))
	r := congestion.NewRegulator(cfg)
	now := tick.Time(0)
	lastAck := now
	var seq uint64
	for range 20000 {
		now = now.Add(time.Duration(rng.IntN(50)) * time.Millisecond)
		if q, ok := r.Tick(now, "P", tick.FromMillis(now.Millis())); ok {
			seq = q.Seq
		}
		if rng.IntN(10) == 0 {
			rates := []float64{math.Inf(1), 0, rng.Float64() * 3, -1, math.NaN(), 1e300}
			u := msg.UCA{Pubend: "P", Seq: seq - uint64(rng.IntN(3)),
				MinRec: rates[rng.IntN(len(rates))], MinNonRec: rates[rng.IntN(len(rates))]}
			_, _ = r.OnUCA(now, u)
		}
		if l := r.Limit(); l != 0 && l < cfg.RateMinIncrease {
			t.Fatalf("limit %g below r_min %g", l, cfg.RateMinIncrease)
		}
		if r.Release(now, 1) == 1 {
			lastAck = now
		}
		if gap := now.Sub(lastAck); gap > time.Duration(float64(time.Second)/cfg.RateMinIncrease)+50*time.Millisecond {
			t.Fatalf("no publish ack for %v at limit %g", gap, r.Limit())
		}
	}
}

// Under a steady offered load above the limit, acks go at the limit: the
// publishers see the rate, nothing else.
func TestRegulatorPacesAtLimit(t *testing.T) {
	cfg := congestion.DefaultConfig()
	r := congestion.NewRegulator(cfg)
	r.Tick(0, "P", 0)
	if _, err := r.OnUCA(0, msg.UCA{Seq: 1, MinRec: math.Inf(1), MinNonRec: 0.5}); err != nil {
		t.Fatal(err)
	}
	limit := r.Limit() // r_min: nothing had been published
	acked := 0
	for ms := int64(0); ms < 10000; ms += 10 {
		acked += r.Release(tick.Time(ms*int64(time.Millisecond)), 1000)
	}
	if want := int(limit * 10); acked < want-1 || acked > want+int(max(1, limit/10))+1 {
		t.Fatalf("acked %d in 10s at limit %g/s, want about %d", acked, limit, want)
	}
}

// Fig. 5 loses nothing: the minimum of all UCAs an IB received equals the
// minimum of what it sent up and what it still holds for the next round;
// and what it sends up carries strictly increasing sequence numbers.
func TestAggregatorKeepsTheMinimum(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 8))
	for trial := range 200 {
		a := congestion.NewAggregator()
		inMin, outMin := math.Inf(1), math.Inf(1)
		var lastUp uint64
		for range 50 {
			u := msg.UCA{Seq: uint64(1 + rng.IntN(20)), MinRec: math.Inf(1), MinNonRec: rng.Float64() * 2}
			inMin = min(inMin, u.MinNonRec)
			up, ok, err := a.OnUCA(u)
			if err != nil {
				t.Fatal(err)
			}
			if ok {
				if up.Seq <= lastUp {
					t.Fatalf("trial %d: sent #%d after #%d", trial, up.Seq, lastUp)
				}
				lastUp = up.Seq
				outMin = min(outMin, up.MinNonRec)
			}
		}
		flush, ok, _ := a.OnUCA(msg.UCA{Seq: lastUp + 1, MinRec: math.Inf(1), MinNonRec: math.Inf(1)})
		if !ok {
			t.Fatal("a UCA of a new round did not go up")
		}
		if got := min(outMin, flush.MinNonRec); got != inMin {
			t.Fatalf("trial %d: minimum in %g, out %g", trial, inMin, got)
		}
	}
}

// Eq. 5 is a convex combination: t̄ stays between the smallest and largest
// samples (and 1, where it starts).
func TestMonitorSmoothingBounded(t *testing.T) {
	cfg := congestion.DefaultConfig()
	rng := rand.New(rand.NewPCG(9, 10))
	m := congestion.NewMonitor(cfg)
	dh := tick.Tick(0)
	for i := range 1000 {
		now := tick.Time(int64(i) * int64(100*time.Millisecond))
		dh += tick.FromMillis(int64(rng.IntN(300))) // samples in [0, 3)
		m.Observe(now, dh, dh)
		if r := m.Rate(); r < 0 || r > 3 {
			t.Fatalf("t̄ = %g outside [0, 3]", r)
		}
	}
}

// Eq. 10: the NACK window moves only by size_NACK and never below it.
func TestNackWindowSteps(t *testing.T) {
	cfg := congestion.DefaultConfig()
	rng := rand.New(rand.NewPCG(11, 12))
	w := congestion.NewNackWindow(cfg)
	prev := w.Size()
	for i := range 5000 {
		now := tick.Time(int64(i) * int64(10*time.Millisecond))
		w.Adjust(now, time.Duration(20+rng.IntN(500))*time.Millisecond)
		d := w.Size() - prev
		if d != 0 && d != cfg.NackSize && d != -cfg.NackSize {
			t.Fatalf("window moved by %v", d)
		}
		if w.Size() < cfg.NackSize {
			t.Fatalf("window %v below size_NACK", w.Size())
		}
		prev = w.Size()
	}
}

func TestConfigValidate(t *testing.T) {
	if err := congestion.DefaultConfig().Validate(); err != nil {
		t.Fatal(err)
	}
	for name, mut := range map[string]func(*congestion.Config){
		"zero DCQ":          func(c *congestion.Config) { c.DCQInterval = 0 },
		"decrease ≥ 1":      func(c *congestion.Config) { c.DecreaseFactor1 = 1 },
		"NaN smoothing":     func(c *congestion.Config) { c.Smoothing = math.NaN() },
		"window within lag": func(c *congestion.Config) { c.ReceiveWindow = c.KeepUpLag },
	} {
		c := congestion.DefaultConfig()
		mut(&c)
		if err := c.Validate(); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
}
