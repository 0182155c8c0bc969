package stream

import (
	"sort"
	"strings"

	"github.com/aerie-mq/aerie/internal/msg"
	"github.com/aerie-mq/aerie/internal/tick"
)

// Pubend assigns ticks to the publishes of one publishing endpoint and
// remembers which publisher sequence numbers it has already taken, so that a
// retry after a lost ack gets the original tick back (issue 2 item 5).
//
// Tick rules (docs/CONCEPTS.md "Ticks", P2): a tick is (ms << 10 | seq), strictly above
// every tick assigned or announced before, and never at or below the durable
// high-water mark recovered after a restart — so a tick announced as silence
// is never reused for data (docs/CONCEPTS.md I9).
type Pubend struct {
	ID msg.PubendID
	// Next is the lowest tick that may still be assigned.
	Next tick.Tick
	// HWM is the durable high-water mark: silence is announced only up to it.
	HWM tick.Tick
	// HWMAsked is the highest HWM record queued for persistence.
	HWMAsked tick.Tick
	// Announced: every tick <= Announced is decided (S, D or L) in the istream.
	Announced tick.Tick
	// Pending holds assigned events awaiting fsync, in tick order.
	Pending []*msg.Event
	pendBuf []*msg.Event // Pending's array from its start, reused once Pending empties

	window int
	dedup  map[string]*dedupWindow
	// last is the window windowOf found last: a publish looks up its
	// publisher's three times (Assign, its remember, MadeDurable) and runs
	// of publishes come from one publisher, so most lookups are a string
	// compare, not a map access (those were 2 % of a PHB's CPU).
	last *dedupWindow
	// blocks are what the pubend's events are carved from: its events
	// are built and let go in tick order, which bounds what a block pins
	// beyond them (msg.EventBlocks).
	blocks msg.EventBlocks
}

// dedupWindow is one publisher's remembered seqs: a ring in the order they
// were first remembered, at most window long, oldest at head once full.
// A publisher numbers its publishes 1, 2, 3 …, so the ring's seqs are
// almost always consecutive and a seq's slot is found by subtraction; the
// first seq out of line (a publisher that skipped or went back) builds an
// index, kept from then on. The ring took the place of a map from seq to
// tick, whose insert and delete per publish were a few % of a PHB's CPU.
type dedupWindow struct {
	pub   string // the publisher: the map's key, a string of its own
	ring  []dedupEntry
	head  int
	index map[uint64]int // seq → slot in ring; nil while the seqs are consecutive
}

type dedupEntry struct {
	seq     uint64
	t       tick.Tick
	durable bool
}

// find returns seq's slot in the ring.
func (w *dedupWindow) find(seq uint64) (int, bool) {
	if w.index != nil {
		i, ok := w.index[seq]
		return i, ok
	}
	n := len(w.ring)
	if n == 0 {
		return 0, false
	}
	first := w.ring[w.head].seq // head is 0 until the ring is full
	if seq < first || seq-first >= uint64(n) {
		return 0, false
	}
	return (w.head + int(seq-first)) % n, true
}

// add remembers a seq not in the ring, forgetting the oldest once the ring
// holds window.
func (w *dedupWindow) add(e dedupEntry, window int) {
	if n := len(w.ring); w.index == nil && n > 0 && e.seq != w.ring[(w.head+n-1)%n].seq+1 {
		w.index = make(map[uint64]int, n+1)
		for i, r := range w.ring {
			w.index[r.seq] = i
		}
	}
	i := w.head
	if len(w.ring) < window {
		i = len(w.ring)
		w.ring = append(w.ring, e)
	} else {
		if w.index != nil {
			delete(w.index, w.ring[i].seq)
		}
		w.ring[i] = e
		w.head = (w.head + 1) % len(w.ring)
	}
	if w.index != nil {
		w.index[e.seq] = i
	}
}

// NewPubend returns a pubend that remembers the last window sequence numbers
// of each publisher.
func NewPubend(id msg.PubendID, window int) *Pubend {
	return &Pubend{ID: id, Next: 1, window: max(window, 1), dedup: map[string]*dedupWindow{}}
}

// Assignment is the outcome of Assign.
type Assignment struct {
	Event *msg.Event // the new event, nil for a duplicate
	// For a duplicate: the original tick and whether it is already durable
	// (then the caller acks at once; otherwise the original's ack follows).
	DupTick    tick.Tick
	DupDurable bool
}

// Assign takes a publish at local time now.
func (p *Pubend) Assign(now tick.Time, req msg.Publish) Assignment {
	if w := p.windowOf(req.Publisher); w != nil {
		if i, ok := w.find(req.Seq); ok {
			return Assignment{DupTick: w.ring[i].t, DupDurable: w.ring[i].durable}
		}
	}
	t := max(tick.FromMillis(now.Millis()), p.Next, p.Announced+1)
	p.Next = t + 1
	// The event's one encoding, built here and never again: the log record,
	// every frame downstream and the delivery carry these bytes.
	ev := p.blocks.NewEvent(p.ID, t, req.Publisher, req.Seq, req.Topic, req.Props, req.Payload)
	if c := cap(p.Pending); len(p.Pending) == c {
		p.Pending = append(p.Pending, ev)
		p.pendBuf = p.Pending[:0]
	} else {
		p.Pending = append(p.Pending, ev)
	}
	p.remember(req.Publisher, req.Seq, t, false)
	return Assignment{Event: ev}
}

// windowOf returns the publisher's window, nil if it has none yet.
func (p *Pubend) windowOf(pub string) *dedupWindow {
	if p.last != nil && pub == p.last.pub {
		return p.last
	}
	w := p.dedup[pub]
	if w != nil {
		p.last = w
	}
	return w
}

// Known reports whether the publisher's seq already has a tick (a retry).
func (p *Pubend) Known(publisher string, seq uint64) bool {
	w := p.windowOf(publisher)
	if w == nil {
		return false
	}
	_, ok := w.find(seq)
	return ok
}

func (p *Pubend) remember(pub string, seq uint64, t tick.Tick, durable bool) {
	w := p.windowOf(pub)
	if w == nil {
		// A copy: pub may view a whole publish's bytes (msg.ReadPublish),
		// which the key would keep alive.
		w = &dedupWindow{pub: strings.Clone(pub)}
		p.dedup[w.pub] = w
	}
	if i, ok := w.find(seq); ok {
		w.ring[i].t, w.ring[i].durable = t, durable
		return
	}
	w.add(dedupEntry{seq: seq, t: t, durable: durable}, p.window)
}

// MadeDurable pops the oldest pending event, which must be ev, and records
// that its publish is durable.
func (p *Pubend) MadeDurable(ev *msg.Event) bool {
	if len(p.Pending) == 0 || p.Pending[0] != ev {
		return false
	}
	p.Pending[0] = nil
	p.Pending = p.Pending[1:]
	if len(p.Pending) == 0 {
		p.Pending = p.pendBuf
	}
	p.HWM = max(p.HWM, ev.Tick)
	p.remember(ev.Publisher, ev.Seq, ev.Tick, true)
	return true
}

// SilenceLimit is the highest tick that may be announced as silence at local
// time now: not in the future, below every pending event, within the durable
// high-water mark.
func (p *Pubend) SilenceLimit(now tick.Time) tick.Tick {
	lim := min(tick.FromMillis(now.Millis()), p.HWM)
	if len(p.Pending) > 0 {
		lim = min(lim, p.Pending[0].Tick-1)
	}
	return lim
}

// Restore rebuilds the pubend from its log after a restart: the recovered
// events (tick order) and the highest HWM record. Ticks up to the HWM are
// never assigned again.
func (p *Pubend) Restore(events []*msg.Event, hwm tick.Tick) {
	for _, ev := range events {
		hwm = max(hwm, ev.Tick)
		p.remember(ev.Publisher, ev.Seq, ev.Tick, true)
	}
	p.HWM, p.HWMAsked, p.Announced = hwm, hwm, hwm
	p.Next = hwm + 1
}

// Meta returns the durable state to snapshot, with final as the release
// point. Only durable publishes are listed (call it with nothing pending).
func (p *Pubend) Meta(final tick.Tick) msg.PubendMeta {
	m := msg.PubendMeta{HWM: p.HWM, Final: final}
	pubs := make([]string, 0, len(p.dedup))
	for pub := range p.dedup {
		pubs = append(pubs, pub)
	}
	sort.Strings(pubs)
	for _, pub := range pubs {
		w := p.dedup[pub]
		for i := range w.ring {
			if e := w.ring[(w.head+i)%len(w.ring)]; e.durable {
				m.Dedup = append(m.Dedup, msg.DedupEntry{Publisher: pub, Seq: e.seq, Tick: e.t})
			}
		}
	}
	return m
}

// RestoreMeta loads a snapshot's dedup entries (before Restore).
func (p *Pubend) RestoreMeta(m msg.PubendMeta) {
	for _, d := range m.Dedup {
		p.remember(d.Publisher, d.Seq, d.Tick, true)
	}
}
