package gd

import (
	"github.com/aerie-mq/aerie/internal/msg"
	"github.com/aerie-mq/aerie/internal/tick"
)

// Knowledge runs (docs/PROTOCOL.md, KnowledgeRun). The engine renders
// knowledge as it becomes known: one Knowledge per D tick and neighbour
// (stream.Render), and a PHB's group commit or an IB's burst makes many of
// them in one Ready. Ready joins the consecutive ones of one pubend to one
// neighbour into one msg.KnowledgeRun, which says exactly what its pieces
// say (msg.KnowledgeRun.Split), so that a run costs one frame, one queue
// slot and one pass of the receiving engine instead of one per event.
// Doing it on the engine's outputs keeps the rendering rules in one place
// and the result deterministic: the same inputs make the same runs.

const (
	// RunEventsMax bounds the events of one run: a receiver decodes a run
	// in one allocation, and a slow peer's queue counts a run as one frame.
	RunEventsMax = 256
	// RunBytesMax bounds the event bytes of one run. A receiver sees none
	// of a run's events before its last byte arrives, so on a link capped
	// at 100 KB/s (Gryphon CC §5) a run delays its first event by up to
	// RunBytesMax / 100 KB/s; and an event received in a run views the
	// run's frame (wire.Reader.ViewFrames), so a cached event pins at most
	// this much more than itself. 16 KiB holds about 50 events of 256 bytes
	// of payload: the per-frame costs are already small against the events.
	RunBytesMax = 16 << 10
)

// runScratch is coalesce's reused memory.
type runScratch struct {
	head   []int32 // per Send index: the index of its run's first piece, -1 if none
	events []int32 // per first piece: events in its run
	pieces []int32 // per first piece: pieces in its run
	bytes  []int32 // per first piece: event bytes in its run
	built  []*msg.KnowledgeRun
	open   []openRun
	block  []msg.KnowledgeRun // runs are carved from blocks, like knowledgeMsg
	slab   []*msg.Event       // and their events from slabs
}

// openRun is a run that the next Knowledge to `to` may extend.
type openRun struct {
	to   msg.NodeID
	head int32
	k    *msg.Knowledge // its first piece
	end  tick.Tick      // its last tick so far
}

// coalesce joins the runs of send in place and returns it shortened:
// every other message keeps its place, order per neighbour is kept, and a
// run takes the place of its first piece. Messages to other neighbours may
// come to lie between a run's pieces (links to different neighbours are
// not ordered with each other), messages to the same one never.
func (e *Engine) coalesce(send []msg.Envelope) []msg.Envelope {
	if len(send) < 2 || !e.groupRuns(send) {
		return send
	}
	sc := &e.runs
	w := 0
	for i, env := range send {
		h := sc.head[i]
		if h < 0 || sc.pieces[h] < 2 {
			send[w] = env
			w++
			continue
		}
		k := env.Msg.(*msg.Knowledge)
		if int(h) == i {
			r := e.newRun(k, int(sc.events[h]))
			sc.built[h] = r
			send[w] = msg.Envelope{From: env.From, To: env.To, Msg: r}
			w++
			continue
		}
		r := sc.built[h]
		r.End = k.End
		if k.Event != nil {
			r.Events = append(r.Events, k.Event)
		}
	}
	clear(send[w:])
	clear(sc.built)
	return send[:w]
}

// groupRuns finds the runs of send: sc.head maps each message to its run's
// first piece. It reports whether any run has two pieces or more.
func (e *Engine) groupRuns(send []msg.Envelope) bool {
	sc := &e.runs
	sc.reset(len(send))
	found := false
	for i, env := range send {
		k := runPiece(env.Msg)
		j := sc.openTo(env.To)
		if k != nil && j >= 0 && sc.extends(j, k) {
			o := &sc.open[j]
			h := o.head
			sc.head[i] = h
			sc.pieces[h]++
			sc.bytes[h] += int32(eventBytes(k))
			if k.Event != nil {
				sc.events[h]++
			}
			o.end = k.End
			found = true
			continue
		}
		if j >= 0 {
			sc.open = append(sc.open[:j], sc.open[j+1:]...)
		}
		if k == nil {
			continue
		}
		sc.head[i] = int32(i)
		sc.pieces[i] = 1
		sc.bytes[i] = int32(eventBytes(k))
		if k.Event != nil {
			sc.events[i] = 1
		}
		sc.open = append(sc.open, openRun{to: env.To, head: int32(i), k: k, end: k.End})
	}
	sc.open = sc.open[:0]
	return found
}

// runPiece returns m as a Knowledge that may be a piece of a run: a
// first-time one that carries ticks, whose D (if any) is at its event's own
// tick, as a run places it. Answers to nacks stay one per event: a subend
// under congestion control times its nack repeats by the answers as they
// arrive (Gryphon CC §3.2), and a run of them would arrive all at once,
// late, on the capped links where retransmissions matter.
func runPiece(m msg.Msg) *msg.Knowledge {
	k, ok := m.(*msg.Knowledge)
	if !ok || k == nil || k.Retrans || k.Start > k.End || (k.Event != nil && k.VTick != k.Event.Tick) {
		return nil
	}
	return k
}

func eventBytes(k *msg.Knowledge) int {
	if k.Event == nil {
		return 0
	}
	return k.Event.Size()
}

// extends reports whether k continues open run j: the same pubend and
// final prefix, from the tick after its end, and within the bounds of a
// run.
func (sc *runScratch) extends(j int, k *msg.Knowledge) bool {
	o := &sc.open[j]
	h := o.head
	return k.Pubend == o.k.Pubend && k.Final == o.k.Final && k.Unvouched == o.k.Unvouched &&
		k.Start == o.end+1 && sc.events[h] < RunEventsMax && int(sc.bytes[h])+eventBytes(k) <= RunBytesMax
}

func (sc *runScratch) openTo(to msg.NodeID) int {
	for j := range sc.open {
		if sc.open[j].to == to {
			return j
		}
	}
	return -1
}

func (sc *runScratch) reset(n int) {
	sc.head = resize(sc.head, n)
	for i := range sc.head {
		sc.head[i] = -1
	}
	sc.events = resize(sc.events, n)
	sc.pieces = resize(sc.pieces, n)
	sc.bytes = resize(sc.bytes, n)
	if cap(sc.built) < n {
		sc.built = make([]*msg.KnowledgeRun, n)
	}
	sc.built = sc.built[:n]
}

// resize returns s with length n, reusing its memory when it is large
// enough; the values are not cleared.
func resize(s []int32, n int) []int32 {
	if cap(s) < n {
		return make([]int32, n)
	}
	return s[:n]
}

// newRun starts a run at its first piece k, with room for n events. Runs
// and their event slices come from blocks (one allocation per many runs);
// a block lives as long as one of its runs does, and nothing writes a sent
// run.
func (e *Engine) newRun(k *msg.Knowledge, n int) *msg.KnowledgeRun {
	sc := &e.runs
	if len(sc.block) == cap(sc.block) {
		sc.block = make([]msg.KnowledgeRun, 0, 64)
	}
	if cap(sc.slab)-len(sc.slab) < n {
		sc.slab = make([]*msg.Event, 0, max(n, 1024))
	}
	at := len(sc.slab)
	sc.slab = sc.slab[:at+n]
	sc.block = append(sc.block, msg.KnowledgeRun{Pubend: k.Pubend, Final: k.Final, Start: k.Start, End: k.End,
		Retrans: k.Retrans, Events: sc.slab[at : at : at+n], Unvouched: k.Unvouched})
	r := &sc.block[len(sc.block)-1]
	if k.Event != nil {
		r.Events = append(r.Events, k.Event)
	}
	return r
}
