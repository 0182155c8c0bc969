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
//
// Memory: a pubend that keeps millions of events for a durable subscriber
// that is away must not pay for each. The tracker keeps one entry (a tick
// and its log index) per indexEvery events of a pubend, and the cut it
// computes is the index of that entry at or below the first unreleased
// event: a few events early, never late.
package retention

import (
	"sort"

	"github.com/aerie-mq/aerie/internal/msg"
	"github.com/aerie-mq/aerie/internal/tick"
)

// Tracker remembers, per pubend, a sparse index from the ticks of its
// logged events to their log indexes: for the cut, and for fetching events
// back.
type Tracker struct {
	ticks map[msg.PubendID]*tickIndex
	// The last pubend Appended saw: a group commit's records come in runs
	// of one pubend, and the map lookup per event was a PHB's cost per
	// event.
	last     msg.PubendID
	lastTick *tickIndex
}

// Appended notes that r was appended to the log at index.
func (t *Tracker) Appended(index uint64, r msg.Record) {
	if r.Event == nil {
		return
	}
	t.Noted(r.Pubend, r.Event.Tick, index)
}

// Noted notes that the event of pubend p at tick at was appended to the
// log at index (in log order).
func (t *Tracker) Noted(p msg.PubendID, at tick.Tick, index uint64) {
	if x := t.lastTick; x != nil && p == t.last {
		x.note(at, index)
		return
	}
	if t.ticks == nil {
		t.ticks = map[msg.PubendID]*tickIndex{}
	}
	x := t.ticks[p]
	if x == nil {
		x = &tickIndex{}
		t.ticks[p] = x
	}
	x.note(at, index)
	t.last, t.lastTick = p, x
}

// Mark is an entry of the sparse index: an event's tick and log index.
type Mark struct {
	T     tick.Tick
	Index uint64
}

// NotedRun notes, as Noted would one by one, a run of n events of pubend
// p logged after those noted, the last at tick last, given by marks: the
// first of them, then every IndexEvery-th (what a segment's summary keeps
// of them, internal/storage), in tick order.
func (t *Tracker) NotedRun(p msg.PubendID, marks []Mark, n int, last tick.Tick) {
	if n == 0 {
		return
	}
	x := t.ticks[p]
	if x == nil {
		if t.ticks == nil {
			t.ticks = map[msg.PubendID]*tickIndex{}
		}
		x = &tickIndex{}
		t.ticks[p] = x
	}
	t.last, t.lastTick = p, x
	for _, m := range marks {
		x.entries = append(x.entries, tickAt{m.T, m.Index})
	}
	// The run's events after its last mark count towards the next entry.
	x.seen, x.last = n%IndexEvery, last
}

// Cut returns the lowest log index that must be kept: at or below that of
// the first event not yet released, or next (the log's next index) when
// all are. Conservative, never wrong: the entry found for a pubend may lie
// up to indexEvery of its events before its first unreleased one.
func (t *Tracker) Cut(next uint64, released func(msg.PubendID) tick.Tick) uint64 {
	cut := next
	for p, x := range t.ticks {
		if len(x.entries) == 0 || x.last <= released(p) {
			continue // every event of p noted is released
		}
		cut = min(cut, x.cutAt(released(p)))
	}
	for _, x := range t.ticks {
		x.dropBelow(cut)
	}
	return cut
}

// Entries returns the number of index entries held, for the memory a
// pubend's retained events cost here.
func (t *Tracker) Entries() int {
	n := 0
	for _, x := range t.ticks {
		n += len(x.entries)
	}
	return n
}

// Loaded is what a restarting broker finds in its log: the records to
// restore the engine from (the snapshot's first, then the log's records
// that are not events, in log order, then per pubend a metadata record of
// the publishers its events remember), the events per pubend as their
// ticks with their sizes (msg.EventSize: what max_retain_bytes counts),
// the tracker of those events, and the log's bounds. Payloads stay on
// disk: the engine reads them back when a nack or a replay needs them.
type Loaded struct {
	Records     []msg.Record
	Events      map[msg.PubendID]*tick.Packed
	Tracker     Tracker
	First, Next uint64
	// Summarised and Read count the sealed segments taken from their
	// summaries and the segments read whole (the last one among them).
	Summarised, Read int
}

// tickIndex maps one pubend's ticks to log indexes, sparsely: entries in
// tick order (which is log order for one pubend).
type tickIndex struct {
	seen    int
	last    tick.Tick // the tick of the last event noted
	entries []tickAt
}

type tickAt struct {
	t     tick.Tick
	index uint64
}

// indexEvery is the spacing of the sparse tick index: one entry per this
// many events of a pubend. A fetch reads at most that many of the pubend's
// events (and the other pubends' records interleaved with them) before the
// first one it wants, for 16 bytes of memory per indexEvery events.
const indexEvery = 64

// IndexEvery is indexEvery, for those who keep marks for NotedRun.
const IndexEvery = indexEvery

func (x *tickIndex) note(t tick.Tick, index uint64) {
	if x.seen%indexEvery == 0 {
		x.entries = append(x.entries, tickAt{t, index})
	}
	x.seen++
	x.last = t
}

// start returns the log index from which a read finds every event with a
// tick at or above t: that of the last entry at or below t (0 when there
// is none: read from the log's first record).
func (x *tickIndex) start(t tick.Tick) uint64 {
	i := sort.Search(len(x.entries), func(i int) bool { return x.entries[i].t > t })
	if i == 0 {
		return 0
	}
	return x.entries[i-1].index
}

// cutAt returns the log index at or below that of the first event above
// rel: the last entry at or below rel, or else the first entry. Entries
// below the cut are dropped but for the last one, which is released, so
// when every entry lies above rel the first is the first event noted.
func (x *tickIndex) cutAt(rel tick.Tick) uint64 {
	if i := sort.Search(len(x.entries), func(i int) bool { return x.entries[i].t > rel }); i > 0 {
		return x.entries[i-1].index
	}
	return x.entries[0].index
}

// dropBelow forgets entries below log index cut, keeping the last one
// before it as a starting point for what lies between.
func (x *tickIndex) dropBelow(cut uint64) {
	i := sort.Search(len(x.entries), func(i int) bool { return x.entries[i].index >= cut })
	if i > 1 {
		n := copy(x.entries, x.entries[i-1:])
		x.entries = x.entries[:n]
		if cap(x.entries) > 64 && n < cap(x.entries)/4 {
			x.entries = append([]tickAt(nil), x.entries...)
		}
	}
}
