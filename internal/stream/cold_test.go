package stream

import (
	"math/rand/v2"
	"testing"

	"github.com/aerie-mq/aerie/internal/match"
	"github.com/aerie-mq/aerie/internal/msg"
	"github.com/aerie-mq/aerie/internal/tick"
)

// coldAndHot returns two istreams that know the same ticks: in cold, up
// to coldHi as a restarted PHB knows its logged events (D ticks without
// their events, S between them); in hot, the same as runs with the events
// at hand, every one of which passes filter topics "a.*". Above coldHi
// both know the same runs: silence, events that pass or not, Q gaps.
func coldAndHot(rng *rand.Rand) (cold, hot *Istream, coldHi tick.Tick) {
	cold, hot = &Istream{}, &Istream{}
	var d tick.Packed
	t := tick.Tick(1)
	for range rng.IntN(2000) {
		t += tick.Tick(rng.IntN(5))
		if rng.IntN(3) > 0 {
			d.Add(t, 1)
			hot.K.AddData(t, &msg.Event{Tick: t, Topic: "a.x"})
		} else {
			hot.K.AddSilence(tick.Range{Lo: t, Hi: t}, nil)
		}
		t++
	}
	coldHi = t - 1
	if coldHi > 0 {
		// Silence wherever hot has no D.
		for x := tick.Tick(1); x <= coldHi; x++ {
			if k, _ := hot.K.Get(x); k == tick.Q {
				hot.K.AddSilence(tick.Range{Lo: x, Hi: x}, nil)
			}
		}
		cold.K.SetCold(d, coldHi)
	}
	for range rng.IntN(50) {
		t += tick.Tick(rng.IntN(3)) // a Q gap now and then
		var ev *msg.Event
		switch rng.IntN(3) {
		case 0:
			ev = &msg.Event{Tick: t, Topic: "a.y"}
		case 1:
			ev = &msg.Event{Tick: t, Topic: "b.y"}
		}
		for _, in := range []*Istream{cold, hot} {
			if ev != nil {
				in.K.AddData(t, ev)
			} else {
				in.K.AddSilence(tick.Range{Lo: t, Hi: t + 3}, nil)
			}
		}
		t += 4
	}
	if coldHi > 0 && rng.IntN(3) == 0 {
		f := tick.Tick(rng.IntN(int(coldHi)))
		cold.K.SetFinal(f)
		hot.K.SetFinal(f)
	}
	return cold, hot, coldHi
}

// TestVouchOverColdTicks: Vouch's walks over a restarted PHB's cold
// events (tick.Knowledge.ColdSpan) end where walks tick by tick over the
// same events at hand do.
func TestVouchOverColdTicks(t *testing.T) {
	pat, err := match.ParsePattern("a.*")
	if err != nil {
		t.Fatal(err)
	}
	for seed := uint64(0); seed < 300; seed++ {
		rng := rand.New(rand.NewPCG(seed, 3))
		cold, hot, hi := coldAndHot(rng)
		oc, oh := &Ostream{}, &Ostream{}
		oc.SetFilter(pat, 1, 0)
		oh.SetFilter(pat, 1, 0)
		var ack, floor tick.Tick
		for step := 0; step < 20; step++ {
			ack += tick.Tick(rng.IntN(int(hi/4) + 3))
			if rng.IntN(4) == 0 {
				floor = max(floor, tick.Tick(rng.IntN(int(hi)+1)))
			}
			oc.CleanAck, oh.CleanAck = ack, ack
			oc.Vouch(&cold.K, floor)
			oh.Vouch(&hot.K, floor)
			if oc.Vouched != oh.Vouched || oc.vouchWalked != oh.vouchWalked || oc.vouchBlock != oh.vouchBlock {
				t.Fatalf("seed %d step %d (cold to %d): vouched %d walked %d block %d over cold ticks; %d %d %d tick by tick",
					seed, step, hi, oc.Vouched, oc.vouchWalked, oc.vouchBlock, oh.Vouched, oh.vouchWalked, oh.vouchBlock)
			}
		}
	}
}

// TestAckPrefixSkipsWhatEveryoneAcked: NextAckPrefix, which takes every
// tick up to the lowest of the live ostreams' ack prefixes at once, ends
// where its walk tick by tick (the function as it was) does.
func TestAckPrefixSkipsWhatEveryoneAcked(t *testing.T) {
	pat, err := match.ParsePattern("a.*")
	if err != nil {
		t.Fatal(err)
	}
	for seed := uint64(0); seed < 300; seed++ {
		rng := rand.New(rand.NewPCG(seed, 5))
		_, in, hi := coldAndHot(rng)
		var outs []*Ostream
		for range rng.IntN(3) {
			o := &Ostream{Gone: rng.IntN(4) == 0, AckPrefix: tick.Tick(rng.IntN(int(hi) + 300))}
			o.SetFilter(pat, 1, 0)
			outs = append(outs, o)
		}
		in.AckPrefix = tick.Tick(rng.IntN(int(hi)/2 + 1))
		local, delivered := rng.IntN(2) == 0, tick.Tick(rng.IntN(int(hi)+300))
		got, want := NextAckPrefix(in, outs, local, delivered), walkAckPrefix(in, outs, local, delivered)
		if got != want {
			t.Fatalf("seed %d: ack prefix %d, tick by tick %d", seed, got, want)
		}
	}
}

// walkAckPrefix is NextAckPrefix as it was before it took what every
// live ostream acked at once.
func walkAckPrefix(in *Istream, outs []*Ostream, hasLocal bool, localDelivered tick.Tick) tick.Tick {
	res := max(in.AckPrefix, in.K.Final())
	limit := tick.Max
	if hasLocal {
		limit = localDelivered
	}
	var qLimit tick.Tick
	live := false
	for _, o := range outs {
		switch {
		case o.Gone:
		case live:
			qLimit = min(qLimit, o.AckPrefix)
		default:
			qLimit, live = o.AckPrefix, true
		}
	}
	qLimit = min(qLimit, limit)
	if res >= limit {
		return res
	}
	stopped := false
	in.K.Visit(tick.Range{Lo: res + 1, Hi: limit}, func(p tick.Range, k tick.Kind, ev *msg.Event) bool {
		if p.Lo > res+1 {
			if qLimit < p.Lo-1 {
				res = max(res, qLimit)
				stopped = true
				return false
			}
		}
		if k == tick.D {
			for _, o := range outs {
				if !o.Gone && !o.Anti(p.Lo, k, ev) {
					res = max(res, p.Lo-1)
					stopped = true
					return false
				}
			}
		}
		res = p.Hi
		return true
	})
	if !stopped {
		res = max(res, qLimit)
	}
	return res
}
