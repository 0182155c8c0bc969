package zap

import (
	"fmt"
	"sort"
	"time"
)

// The timing model's constants (see the package doc).
const (
	zapProb        = 0.55             // a dwell is a zap (else a watch)
	zapMean        = 2.5              // seconds, exponential
	watchScale     = 20.0             // seconds, Pareto x_m
	watchShape     = 1.2              // Pareto α
	watchCap       = 3 * 3600.0       // seconds
	surfProb       = 0.8              // after a zap, the neighbouring channel
	surfUpProb     = 0.75             // … and that one is the next one up
	zipfS          = 1.0              // channel popularity
	offProb        = 0.05             // a watch ends with power off
	offMean        = 20 * 60.0        // seconds, exponential
	firstOnWithin  = 60.0             // seconds: every box powers on by then
	volumeProb     = 0.15             // a volume change during a watch
	muteProb       = 0.03             // a mute and unmute during a watch
	Retention      = 3 * time.Second  // a change is recorded after this long on the channel (P2S §4.1)
	SendInterval   = 10 * time.Second // a box sends what it recorded this often (P2S §4.1)
	maxBoxes       = 1 << 24
	maxChannels    = 1000
	retentionMs    = int64(Retention / time.Millisecond)
	sendIntervalMs = int64(SendInterval / time.Millisecond)
)

// Config is what the event stream depends on, besides the seed.
type Config struct {
	Boxes      int       // set-top boxes, 1 … 2^24
	Publishers int       // box i is sent by publisher i mod Publishers
	Channels   int       // channels ch000 …, 2 … 1000
	Start      time.Time // model time zero
}

// Published is one event of the stream and the publisher that sends it.
type Published struct {
	Publisher int
	Event     Event
}

// Generator yields the events of Config's boxes in the order their
// publishers send them: by send time, and per box in the order it
// recorded them.
type Generator struct {
	cfg   Config
	rnd   rng
	zipf  zipf
	boxes []box
	// Every box sends every SendInterval at its own phase, so the order
	// of sends repeats each interval: order is the boxes by (phase, index),
	// and the next send is order[pos] in interval number cycle.
	order []int
	pos   int
	cycle int64
	out   []Published // one send's events, out[head:] not yet returned
	head  int
}

type box struct {
	ip        string
	on        bool
	ch        int   // the channel tuned (or tuned last, when off)
	reported  int   // the channel last recorded, -1 none
	next      int64 // ms: the next transition (power on, or the end of a dwell)
	dwellZap  bool  // the current dwell is a zap
	phase     int64 // ms: its sends are at phase + k·SendInterval
	cache     []record
	cacheHead int
}

// record is an event the box has decided on, and when it is recorded
// (a channel change only once the box has stayed Retention on the channel).
type record struct {
	at    int64 // ms: recorded at
	kind  Kind
	t     int64 // ms: DATE and TIME
	to    int
	from  int
	state string
}

// NewGenerator returns the generator of cfg's stream drawn from src.
func NewGenerator(cfg Config, src Source) (*Generator, error) {
	switch {
	case cfg.Boxes < 1 || cfg.Boxes > maxBoxes:
		return nil, fmt.Errorf("zap: %d boxes: want 1 … %d", cfg.Boxes, maxBoxes)
	case cfg.Publishers < 1 || cfg.Publishers > cfg.Boxes:
		return nil, fmt.Errorf("zap: %d publishers: want 1 … the number of boxes (%d)", cfg.Publishers, cfg.Boxes)
	case cfg.Channels < 2 || cfg.Channels > maxChannels:
		return nil, fmt.Errorf("zap: %d channels: want 2 … %d", cfg.Channels, maxChannels)
	}
	g := &Generator{cfg: cfg, rnd: rng{src}, zipf: newZipf(cfg.Channels, zipfS), boxes: make([]box, cfg.Boxes)}
	g.order = make([]int, cfg.Boxes)
	for i := range g.boxes {
		g.boxes[i] = box{
			ip:       BoxIP(i),
			ch:       g.zipf.draw(g.rnd),
			reported: -1,
			next:     int64(g.rnd.float() * firstOnWithin * 1000),
			phase:    int64(g.rnd.float() * float64(sendIntervalMs)),
		}
		g.order[i] = i
	}
	sort.Slice(g.order, func(a, b int) bool {
		x, y := &g.boxes[g.order[a]], &g.boxes[g.order[b]]
		return x.phase < y.phase || x.phase == y.phase && g.order[a] < g.order[b]
	})
	return g, nil
}

// Next returns the next event of the stream (which never ends).
func (g *Generator) Next() Published {
	for g.head == len(g.out) {
		g.out, g.head = g.out[:0], 0
		i := g.order[g.pos]
		b := &g.boxes[i]
		sendAt := b.phase + g.cycle*sendIntervalMs
		if g.pos++; g.pos == len(g.order) {
			g.pos, g.cycle = 0, g.cycle+1
		}
		g.advance(b, sendAt)
		for b.cacheHead < len(b.cache) && b.cache[b.cacheHead].at <= sendAt {
			g.out = append(g.out, Published{Publisher: i % g.cfg.Publishers, Event: g.event(b, b.cache[b.cacheHead])})
			b.cacheHead++
		}
		if b.cacheHead == len(b.cache) {
			b.cache, b.cacheHead = b.cache[:0], 0
		}
	}
	g.head++
	return g.out[g.head-1]
}

func (g *Generator) event(b *box, r record) Event {
	e := Event{Kind: r.kind, Time: g.cfg.Start.Add(time.Duration(r.t) * time.Millisecond).UTC(), Box: b.ip, Status: r.state}
	if r.kind == Change {
		e.To, e.From = ChannelName(r.to), NoChannel
		if r.from >= 0 {
			e.From = ChannelName(r.from)
		}
	}
	return e
}

// advance runs box b's timeline through every transition up to until.
func (g *Generator) advance(b *box, until int64) {
	for b.next <= until {
		t := b.next
		switch {
		case !b.on:
			b.on = true
			b.cache = append(b.cache, record{at: t, kind: Status, t: t, state: PowerOn})
			g.dwell(b, t)
		case !b.dwellZap && g.rnd.chance(offProb):
			b.on = false
			b.cache = append(b.cache, record{at: t, kind: Status, t: t, state: PowerOff})
			b.next = t + int64(g.rnd.exp(offMean)*1000) + 1
		default:
			b.ch = g.nextChannel(b)
			g.dwell(b, t)
		}
	}
}

// nextChannel is where the box goes at the end of a dwell.
func (g *Generator) nextChannel(b *box) int {
	n := g.cfg.Channels
	if b.dwellZap && g.rnd.chance(surfProb) {
		if g.rnd.chance(surfUpProb) {
			return (b.ch + 1) % n
		}
		return (b.ch + n - 1) % n
	}
	for {
		if k := g.zipf.draw(g.rnd); k != b.ch {
			return k
		}
	}
}

// dwell starts a dwell on b.ch at t: it records the change if the box
// stays Retention, and the status changes during a watch.
func (g *Generator) dwell(b *box, t int64) {
	b.dwellZap = g.rnd.chance(zapProb)
	var d float64
	if b.dwellZap {
		d = g.rnd.exp(zapMean)
	} else {
		d = min(g.rnd.pareto(watchScale, watchShape), watchCap)
	}
	dms := int64(d*1000) + 1
	if dms >= retentionMs && b.ch != b.reported {
		b.cache = append(b.cache, record{at: t + retentionMs, kind: Change, t: t, to: b.ch, from: b.reported})
		b.reported = b.ch
	}
	if !b.dwellZap {
		// Status changes come after the change is recorded, in time order.
		lo := t + retentionMs
		if span := t + dms - lo; span > 2 {
			var st []record
			if g.rnd.chance(volumeProb) {
				at := lo + 1 + int64(g.rnd.intn(int(span-1)))
				st = append(st, record{at: at, kind: Status, t: at, state: Volume(g.rnd.intn(101))})
			}
			if g.rnd.chance(muteProb) {
				a := lo + 1 + int64(g.rnd.intn(int(span-1)))
				c := lo + 1 + int64(g.rnd.intn(int(span-1)))
				a, c = min(a, c), max(a, c)
				st = append(st, record{at: a, kind: Status, t: a, state: Mute}, record{at: c, kind: Status, t: c, state: Unmute})
			}
			sortRecords(st)
			b.cache = append(b.cache, st...)
		}
	}
	b.next = t + dms
}

// sortRecords sorts a few records by time, stably.
func sortRecords(rs []record) {
	for i := 1; i < len(rs); i++ {
		for j := i; j > 0 && rs[j].t < rs[j-1].t; j-- {
			rs[j], rs[j-1] = rs[j-1], rs[j]
		}
	}
}
