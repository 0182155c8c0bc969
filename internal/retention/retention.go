// Package retention keeps track of a PHB's logged events: how much of the
// event log can be dropped, and where to read an event back when a nack
// needs a payload the engine evicted from memory (fetch.go).
//
// Dropping: an event is needed on disk until its pubend has released it (every
// downstream acked it: the non-durable release point, MODEL.md I10). Below
// the first unreleased event, the log's only other content — high-water
// marks and the publishers remembered for deduplication — is summarised by
// the engine's snapshot (gd.Engine.Snapshot). So: write the snapshot
// durably, then drop the whole log segments below that first unreleased
// event. A crash between the two leaves snapshot and log overlapping, which
// restore handles.
package retention

import (
	"fmt"

	"github.com/aerie-mq/aerie/internal/eventlog"
	"github.com/aerie-mq/aerie/internal/msg"
	"github.com/aerie-mq/aerie/internal/tick"
	"github.com/aerie-mq/aerie/internal/vfs"
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
}

type entry struct {
	index uint64
	t     tick.Tick
	p     uint32 // Tracker.pubends[p]
}

// Appended notes that r was appended to the log at index.
func (t *Tracker) Appended(index uint64, r msg.Record) {
	if r.Event != nil {
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
	}
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

// Engine is what retention needs from the GD engine.
type Engine interface {
	Snapshot() ([]msg.Record, bool)
	Released(msg.PubendID) tick.Tick
}

// Trim writes a snapshot and drops the log segments below the cut, when at
// least one whole segment can go. It reports how many records the log no
// longer holds.
func Trim(fsys vfs.FS, snapPath string, l *eventlog.Log, tr *Tracker, eng Engine) (dropped uint64, err error) {
	cut := tr.Cut(l.NextIndex(), eng.Released)
	if !l.Removable(cut) {
		return 0, nil
	}
	snap, ok := eng.Snapshot()
	if !ok {
		return 0, nil // a batch is in flight: the engine and the log differ
	}
	payloads := make([][]byte, 0, len(snap))
	for _, r := range snap {
		b, err := msg.EncodeRecord(nil, r)
		if err != nil {
			return 0, fmt.Errorf("retention: %w", err)
		}
		payloads = append(payloads, b)
	}
	if err := eventlog.WriteSnapshot(fsys, snapPath, payloads); err != nil {
		return 0, err
	}
	before := l.FirstIndex()
	if err := l.TruncateFront(cut); err != nil {
		return 0, fmt.Errorf("retention: %w", err)
	}
	return l.FirstIndex() - before, nil
}

// Load reads the snapshot and the log for a restart: snapshot records
// first, then every record the log still holds, in order.
func Load(fsys vfs.FS, snapPath string, l *eventlog.Log, tr *Tracker) ([]msg.Record, error) {
	payloads, err := eventlog.ReadSnapshot(fsys, snapPath)
	if err != nil {
		return nil, err
	}
	var recs []msg.Record
	for i, p := range payloads {
		r, err := msg.DecodeRecord(p)
		if err != nil {
			return nil, fmt.Errorf("retention: snapshot %s record %d: %w", snapPath, i, err)
		}
		recs = append(recs, r)
	}
	err = l.Replay(l.FirstIndex(), func(i uint64, p []byte) error {
		r, err := msg.DecodeRecord(p)
		if err != nil {
			return fmt.Errorf("log record %d: %w", i, err)
		}
		tr.Appended(i, r)
		recs = append(recs, r)
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("retention: %w", err)
	}
	return recs, nil
}
