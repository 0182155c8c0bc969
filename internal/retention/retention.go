// Package retention keeps track of a PHB's logged events: how much of the
// event log can be dropped, and where to read an event back when a nack
// needs a payload the engine evicted from memory (fetch.go).
//
// Dropping: an event is needed on disk until its pubend has released it (every
// downstream acked it: the non-durable release point, docs/CONCEPTS.md I10). Below
// the first unreleased event, the log's only other content — high-water
// marks and the publishers remembered for deduplication — is summarised by
// the engine's snapshot (gd.Engine.Snapshot). So: write the snapshot
// durably, then drop the whole log segments below that first unreleased
// event. A crash between the two leaves snapshot and log overlapping, which
// restore handles.
package retention

import (
	"github.com/aerie-mq/aerie/internal/msg"
	"github.com/aerie-mq/aerie/internal/tick"
)

// Tracker remembers the log index of every event record not yet released,
// and a sparse tick index per pubend for fetching events back.
type Tracker struct {
	q     queue
	ticks map[msg.PubendID]*tickIndex
	// Pubends are numbered so that an entry holds no pointer: the queue
	// holds every unreleased event (hundreds of thousands at full rate) and
	// the garbage collector need not scan it.
	pubends []msg.PubendID
	number  map[msg.PubendID]uint32
	// The last pubend Appended saw: a group commit's records come in runs
	// of one pubend, and the two map lookups per event were 0.06 µs of a
	// PHB's cost per event.
	last     msg.PubendID
	lastP    uint32
	lastTick *tickIndex
}

type entry struct {
	index uint64
	t     tick.Tick
	p     uint32 // Tracker.pubends[p]
}

// Appended notes that r was appended to the log at index.
func (t *Tracker) Appended(index uint64, r msg.Record) {
	if r.Event == nil {
		return
	}
	if x := t.lastTick; x != nil && r.Pubend == t.last {
		t.q.push(entry{index: index, t: r.Event.Tick, p: t.lastP})
		x.note(r.Event.Tick, index)
		return
	}
	p, ok := t.number[r.Pubend]
	if !ok {
		if t.number == nil {
			t.number = map[msg.PubendID]uint32{}
		}
		p = uint32(len(t.pubends))
		t.pubends = append(t.pubends, r.Pubend)
		t.number[r.Pubend] = p
	}
	t.q.push(entry{index: index, t: r.Event.Tick, p: p})
	if t.ticks == nil {
		t.ticks = map[msg.PubendID]*tickIndex{}
	}
	x := t.ticks[r.Pubend]
	if x == nil {
		x = &tickIndex{}
		t.ticks[r.Pubend] = x
	}
	x.note(r.Event.Tick, index)
	t.last, t.lastP, t.lastTick = r.Pubend, p, x
}

// Cut returns the lowest log index that must be kept: that of the first
// event not yet released, or next (the log's next index) when all are.
// Events leave the tracker in log order, so an unreleased event of one
// pubend holds back the cut for all: conservative, never wrong.
func (t *Tracker) Cut(next uint64, released func(msg.PubendID) tick.Tick) uint64 {
	rel := make([]tick.Tick, len(t.pubends)) // released() once per pubend, not per event
	for i, p := range t.pubends {
		rel[i] = released(p)
	}
	for t.q.len() > 0 && t.q.front().t <= rel[t.q.front().p] {
		t.q.pop()
	}
	cut := next
	if t.q.len() > 0 {
		cut = t.q.front().index
	}
	for _, x := range t.ticks {
		x.dropBelow(cut)
	}
	return cut
}

// Pending returns the number of unreleased events tracked.
func (t *Tracker) Pending() int { return t.q.len() }

// queue is a FIFO of entries in fixed-size blocks: it grows without copying
// what it holds (one slice grown by append copied every entry at each
// doubling, a few percent of a busy PHB's CPU) and frees blocks as the
// front is released.
type queue struct {
	blocks [][]entry
	head   int // next entry of blocks[0]
	n      int
}

const queueBlock = 4096

func (q *queue) len() int { return q.n }

func (q *queue) push(e entry) {
	if k := len(q.blocks); k == 0 || len(q.blocks[k-1]) == queueBlock {
		q.blocks = append(q.blocks, make([]entry, 0, queueBlock))
	}
	last := &q.blocks[len(q.blocks)-1]
	*last = append(*last, e)
	q.n++
}

func (q *queue) front() entry { return q.blocks[0][q.head] }

func (q *queue) pop() {
	q.head++
	q.n--
	if q.head == len(q.blocks[0]) && (len(q.blocks) > 1 || q.head == queueBlock) {
		q.blocks[0] = nil
		q.blocks = q.blocks[1:]
		q.head = 0
	}
}

// Loaded is what a restarting broker finds in its log: the records to
// restore the engine from (snapshot first, then the log in order), the
// tracker of the events among them, and the log's bounds.
type Loaded struct {
	Records     []msg.Record
	Tracker     Tracker
	First, Next uint64
}
