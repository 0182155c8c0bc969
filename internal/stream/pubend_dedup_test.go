package stream

import (
	"math/rand/v2"
	"testing"

	"github.com/aerie-mq/aerie/internal/msg"
	"github.com/aerie-mq/aerie/internal/tick"
)

// The dedup ring against the map-and-FIFO it replaced: the same seqs
// remembered, the same ones forgotten, for runs of consecutive seqs (the
// arithmetic lookup) broken by skips, repeats and retries (the index).
func TestDedupWindowMatchesReference(t *testing.T) {
	for _, window := range []int{1, 3, 64} {
		for trial := range 50 {
			rng := rand.New(rand.NewPCG(uint64(window), uint64(trial)))
			var w dedupWindow
			ref := map[uint64]dedupEntry{}
			var order []uint64
			seq := uint64(1)
			for step := range 2000 {
				switch r := rng.IntN(100); {
				case trial%2 == 0 || r < 90: // the next publish
					seq++
				case r < 95: // a skip
					seq += uint64(rng.IntN(10))
				default: // a retry of an older seq
					seq -= min(seq-1, uint64(rng.IntN(2*window+2)))
				}
				e := dedupEntry{seq: seq, t: tick.Tick(step), durable: rng.IntN(2) == 0}
				if i, ok := w.find(seq); ok {
					w.ring[i].t, w.ring[i].durable = e.t, e.durable
				} else {
					w.add(e, window)
				}
				if _, ok := ref[seq]; !ok {
					if len(order) == window {
						delete(ref, order[0])
						order = order[1:]
					}
					order = append(order, seq)
				}
				ref[seq] = e
				for s := seq - min(seq, uint64(3*window+10)); s <= seq+3; s++ {
					want, inRef := ref[s]
					i, ok := w.find(s)
					if ok != inRef || ok && w.ring[i] != want {
						t.Fatalf("window %d trial %d step %d: seq %d: ring has %v (%v), reference %v (%v)", window, trial, step, s, ok, w.ring[i], inRef, want)
					}
				}
			}
		}
	}
}

// Publishers interleaved one publish each, where the last window looked up
// is never the next one's: each retry still finds its own publisher's
// tick, and a publisher's seq is not taken for another's with the same seq.
func TestPubendDedupAcrossInterleavedPublishers(t *testing.T) {
	p := NewPubend("P1", 16)
	now := tick.Time(0)
	pubs := []string{"a", "b", "c"}
	ticks := map[string]map[uint64]tick.Tick{}
	for seq := uint64(1); seq <= 10; seq++ {
		for _, pub := range pubs {
			a := p.Assign(now, msg.Publish{Pubend: "P1", Publisher: pub, Seq: seq, Topic: "t"})
			if a.Event == nil {
				t.Fatalf("%s#%d taken for a retry", pub, seq)
			}
			p.MadeDurable(a.Event)
			if ticks[pub] == nil {
				ticks[pub] = map[uint64]tick.Tick{}
			}
			ticks[pub][seq] = a.Event.Tick
		}
	}
	for seq := uint64(1); seq <= 10; seq++ {
		for _, pub := range []string{"c", "a", "b"} {
			a := p.Assign(now, msg.Publish{Pubend: "P1", Publisher: pub, Seq: seq, Topic: "t"})
			if a.Event != nil || a.DupTick != ticks[pub][seq] || !a.DupDurable {
				t.Fatalf("retry of %s#%d: event %v, tick %d durable %v; want its tick %d", pub, seq, a.Event, a.DupTick, a.DupDurable, ticks[pub][seq])
			}
		}
	}
}
