package congestion_test

// Golden stories of Gryphon CC (Middleware 2003 §3) told through the four
// state machines; `go test ./internal/congestion -run TestStories -rewrite`
// regenerates the outputs. Times are milliseconds from 0 (t=…), ticks are
// pubend milliseconds (pos=…, dh=…), rates are events/s at the pubend and
// tick-seconds per second at SHBs.
//
// Commands:
//
//	regulator [dcq= noUCA=]          a fresh pubend regulator (durations in ms)
//	tick t= pos=                     Regulator.Tick: prints a DCQ when one is due
//	offer t= to= every= n=           publishers offer n events every `every` ms from t
//	                                 to `to`; prints acks released and the limit
//	alert t= seq= [rec=] [nonrec=]   a UCA reaches the pubend (rates default ∞)
//	monitor [broker]                 a fresh SHB monitor (with BrokerConfig: broker)
//	dh from= to= every= dh= rate= [step=] [dcq=] [heard=dh]
//	                                 observe the doubt horizon every `every` ms,
//	                                 moving at `rate` tick-s/s from dh (in steps
//	                                 of `step` ms of ticks, as coalesced silence
//	                                 arrives, when given); with dcq=
//	                                 a DCQ (position = the time) arrives every dcq ms.
//	                                 The SHB has heard of ticks up to the time
//	                                 (first-time traffic arrives), or with
//	                                 heard=dh only up to its doubt horizon
//	ib                               a fresh intermediate broker's aggregator
//	uca seq= [rec=] [nonrec=]        a UCA from below reaches the IB
//	nwnd                             a fresh NACK window
//	rounds from= to= rtt= [rtt2= at=] Adjust every 10 ms; the RTT becomes rtt2 at `at`

import (
	"fmt"
	"math"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/cockroachdb/datadriven"

	"github.com/aerie-mq/aerie/internal/congestion"
	"github.com/aerie-mq/aerie/internal/msg"
	"github.com/aerie-mq/aerie/internal/tick"
)

type story struct {
	cfg     congestion.Config
	reg     *congestion.Regulator
	mon     *congestion.Monitor
	ib      *congestion.Aggregator
	nw      *congestion.NackWindow
	waiting int
	dcqSeq  uint64
	out     strings.Builder
}

func ms(v int64) tick.Time { return tick.Time(v * int64(time.Millisecond)) }
func tk(v int64) tick.Tick { return tick.FromMillis(v) }
func rate(r float64) string {
	if math.IsInf(r, 1) {
		return "∞"
	}
	return fmt.Sprintf("%.3f", r)
}
func (s *story) p(f string, a ...any) { fmt.Fprintf(&s.out, f+"\n", a...) }

func TestStories(t *testing.T) {
	datadriven.Walk(t, "testdata", func(t *testing.T, path string) {
		s := &story{cfg: congestion.DefaultConfig()}
		datadriven.RunTest(t, path, func(t *testing.T, td *datadriven.TestData) string {
			s.out.Reset()
			s.run(t, td)
			if s.out.Len() == 0 {
				return "ok\n"
			}
			return s.out.String()
		})
	})
}

func (s *story) run(t *testing.T, td *datadriven.TestData) {
	num := func(key string, def int64) int64 {
		for _, a := range td.CmdArgs {
			if a.Key == key {
				v, err := strconv.ParseInt(a.Vals[0], 10, 64)
				if err != nil {
					t.Fatalf("%s: %v", td.Pos, err)
				}
				return v
			}
		}
		return def
	}
	flt := func(key string) float64 {
		for _, a := range td.CmdArgs {
			if a.Key == key {
				v, err := strconv.ParseFloat(a.Vals[0], 64)
				if err != nil {
					t.Fatalf("%s: %v", td.Pos, err)
				}
				return v
			}
		}
		return math.Inf(1)
	}
	switch td.Cmd {
	case "regulator":
		s.cfg.DCQInterval = time.Duration(num("dcq", s.cfg.DCQInterval.Milliseconds())) * time.Millisecond
		s.cfg.NoUCAInterval = time.Duration(num("noUCA", s.cfg.NoUCAInterval.Milliseconds())) * time.Millisecond
		s.reg, s.waiting = congestion.NewRegulator(s.cfg), 0
	case "tick":
		if q, ok := s.reg.Tick(ms(num("t", 0)), "P", tk(num("pos", 0))); ok {
			s.dcqSeq = q.Seq
			s.p("DCQ #%d pos=%d", q.Seq, q.Position.Millis())
		}
		s.p("limit %s", limit(s.reg.Limit()))
	case "offer":
		from, to, every, n := num("t", 0), num("to", 0), num("every", 100), int(num("n", 1))
		released := 0
		dcqs := 0
		for now := from; now < to; now += every {
			if _, ok := s.reg.Tick(ms(now), "P", tk(now)); ok {
				dcqs++
			}
			s.waiting += n
			r := s.reg.Release(ms(now), s.waiting)
			s.waiting -= r
			released += r
		}
		s.p("acked %d (%.1f/s), waiting %d, DCQs %d, limit %s", released,
			float64(released)/(float64(to-from)/1000), s.waiting, dcqs, limit(s.reg.Limit()))
	case "alert":
		u := msg.UCA{Pubend: "P", Seq: uint64(num("seq", 0)), MinRec: flt("rec"), MinNonRec: flt("nonrec")}
		d, err := s.reg.OnUCA(ms(num("t", 0)), u)
		if err != nil {
			s.p("error: %v", err)
		}
		s.p("%s: limit %s", d, limit(s.reg.Limit()))
	case "monitor":
		cfg := s.cfg
		if td.HasArg("broker") {
			cfg = congestion.BrokerConfig()
		}
		s.mon, s.dcqSeq = congestion.NewMonitor(cfg), 0
	case "dh":
		from, to, every, dcq := num("from", 0), num("to", 0), num("every", 100), num("dcq", 0)
		dh0 := float64(num("dh", 0))
		r := flt("rate")
		step := float64(num("step", 0))
		at := func(now int64) tick.Tick {
			adv := r * float64(now-from)
			if step > 0 {
				adv = math.Floor(adv/step) * step
			}
			return tk(int64(dh0 + adv))
		}
		for now := from; now <= to; now += every {
			dh := at(now)
			heard := tk(now)
			if td.HasArg("heard") {
				heard = dh
			}
			s.mon.Observe(ms(now), dh, heard)
			if dcq > 0 && now%dcq == 0 {
				s.dcqSeq++
				u, ok := s.mon.OnDCQ(ms(now), msg.DCQ{Pubend: "P", Seq: s.dcqSeq, Position: tk(now)}, dh)
				if ok {
					s.p("t=%d dh=%d: UCA #%d rec=%s nonrec=%s", now, dh.Millis(), u.Seq, rate(u.MinRec), rate(u.MinNonRec))
				}
			}
		}
		last := at(to)
		s.p("t̄=%.3f recovering=%v lag=%v", s.mon.Rate(), s.mon.Recovering(), s.mon.Lag(last))
	case "ib":
		s.ib = congestion.NewAggregator()
	case "uca":
		u := msg.UCA{Pubend: "P", Seq: uint64(num("seq", 0)), MinRec: flt("rec"), MinNonRec: flt("nonrec")}
		up, ok, err := s.ib.OnUCA(u)
		switch {
		case err != nil:
			s.p("error: %v", err)
		case ok:
			s.p("up: %v", up)
		default:
			s.p("folded")
		}
	case "nwnd":
		s.nw = congestion.NewNackWindow(s.cfg)
	case "rounds":
		from, to := num("from", 0), num("to", 0)
		rtt, rtt2, at := num("rtt", 100), num("rtt2", 0), num("at", math.MaxInt64)
		sizes := []string{}
		for now := from; now <= to; now += 10 {
			d := rtt
			if now >= at {
				d = rtt2
			}
			if s.nw.Adjust(ms(now), time.Duration(d)*time.Millisecond) {
				sizes = append(sizes, fmt.Sprintf("%d", s.nw.Size().Milliseconds()))
			}
		}
		s.p("window (ms): %s", strings.Join(sizes, " "))
		s.p("size %dms", s.nw.Size().Milliseconds())
	default:
		t.Fatalf("%s: unknown command %q", td.Pos, td.Cmd)
	}
}

func limit(r float64) string {
	if r == 0 {
		return "unlimited"
	}
	return fmt.Sprintf("%.2f/s", r)
}
