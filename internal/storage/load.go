package storage

import (
	"bytes"
	"errors"
	"fmt"
	"strings"

	"github.com/aerie-mq/aerie/internal/eventlog"
	"github.com/aerie-mq/aerie/internal/msg"
	"github.com/aerie-mq/aerie/internal/retention"
	"github.com/aerie-mq/aerie/internal/tick"
)

// DedupKept is how many of each publisher's latest logged events a
// restart reports per pubend for deduplication (retention.Loaded's
// metadata records): gd.Config.DedupWindow's default, the most a pubend
// remembers.
const DedupKept = 4096

// errSegmentEnd stops a replay at the end of the segment being read.
var errSegmentEnd = errors.New("storage: end of segment")

// load reads what a restart needs: the snapshot's records, then, segment
// by segment, the summary of a sealed segment when it holds (summary.go)
// and the records of any other, the last one always. Events become ticks
// and sizes; the store's summary of the active segment starts with its
// records. A sealed segment read whole gets its summary written again.
func (s *Store) load() (retention.Loaded, error) {
	var ld retention.Loaded
	payloads, err := eventlog.ReadSnapshot(s.fs, s.snapPath)
	if err != nil {
		return ld, err
	}
	for i, p := range payloads {
		r, err := msg.DecodeRecord(p)
		if err != nil {
			return ld, fmt.Errorf("storage: snapshot %s record %d: %w", s.snapPath, i, err)
		}
		ld.Records = append(ld.Records, r)
	}
	a := loader{ld: &ld, dedup: map[msg.PubendID]*dedupLog{}, pending: map[*dedupRing][]sumPair{}}
	s.sum.names = names{}
	segs := s.log.Segments()
	for i, seg := range segs {
		last := i == len(segs)-1
		if !last {
			if ok, err := a.fromSummary(s, seg); err != nil {
				return ld, err
			} else if ok {
				ld.Summarised++
				continue
			}
		}
		ld.Read++
		if err := a.fill(); err != nil {
			return ld, err
		}
		var entries []sumEntry
		err := s.log.Replay(seg.Base, func(index uint64, p []byte) error {
			if index >= seg.Next && !last {
				return errSegmentEnd
			}
			e, err := entryOf(p, &s.sum.scratch, s.sum.names)
			if err != nil {
				return fmt.Errorf("log record %d: %w", index, err)
			}
			if err := a.entry(index, e); err != nil {
				return err
			}
			entries = append(entries, e)
			return nil
		})
		s.sum.scratch = msg.Event{}
		if err != nil && !errors.Is(err, errSegmentEnd) {
			return ld, fmt.Errorf("storage: %w", err)
		}
		if last {
			s.sum.base, s.sum.entries, s.sum.activeBase = seg.Base, entries, seg.Base
		} else if id, err := idOf(s.log, seg); err == nil {
			_ = writeSummary(s.fs, seg.Path, id, entries) // the next restart reads it
		}
	}
	removeSummaries(s.fs, s.log.Dir(), func(base uint64) bool {
		for _, seg := range segs[:len(segs)-1] {
			if seg.Base == base {
				return true
			}
		}
		return false
	})
	if err := a.finish(); err != nil {
		return ld, err
	}
	return ld, nil
}

// loader gathers what a restart needs of the log's records, in log order.
type loader struct {
	ld    *retention.Loaded
	dedup map[msg.PubendID]*dedupLog
	order []msg.PubendID // the pubends of dedup, first seen first
	// pending are, per dedup ring, the tails the summaries taken since
	// the rings were last filled keep for it, oldest first (fill): only
	// the newest DedupKept events among them are decoded.
	pending      map[*dedupRing][]sumPair
	pendingOrder []*dedupRing
}

// dedupLog keeps a pubend's latest DedupKept events of each publisher.
type dedupLog struct {
	pubs  map[string]*dedupRing
	order []string
}

type dedupRing struct {
	name string  // the publisher
	ring []seqAt // without the name: no pointer written per event
	head int     // the oldest, once the ring is full
}

type seqAt struct {
	seq uint64
	t   tick.Tick
}

// fromSummary takes the sealed segment seg from its summary, if it has one
// that holds; it reports whether it did. An error is a record in a valid
// summary that does not decode (the log itself is damaged), or a summary
// whose checksum holds that does not parse (a bug in what wrote it). A pubend's
// events are taken in their packed form (tick.Packed.AppendFrom) with the
// marks of the tracker's sparse index (retention.Tracker.NotedRun), and
// its publishers' latest events wait for fill: no event is decoded one by
// one.
func (a *loader) fromSummary(s *Store, seg eventlog.SegmentInfo) (bool, error) {
	b, err := readSummary(s.fs, seg.Path)
	if err != nil || b == nil {
		return false, nil
	}
	id, err := idOf(s.log, seg)
	if err != nil {
		return false, nil
	}
	if err := checkSummary(b, id); err != nil {
		return false, nil // torn, stale or another segment's: read the segment
	}
	// Past its checksum, a summary that does not parse is a bug in what
	// wrote it, not damage: refused, as its segment may have been taken
	// in part.
	sum, err := decodeSummary(b, id)
	if err != nil {
		return false, fmt.Errorf("storage: %s: %w", summaryName(seg.Path), err)
	}
	return true, a.take(sum, summaryName(seg.Path))
}

// take takes the content of a summary (name: its file).
func (a *loader) take(sum summary, name string) error {
	for _, r := range sum.records {
		rec, err := msg.DecodeRecord(r.raw)
		if err != nil {
			return fmt.Errorf("storage: log record %d (from %s): %w", r.index, name, err)
		}
		if err := a.record(r.index, rec); err != nil {
			return err
		}
	}
	events := make([]*tick.Packed, len(sum.pubends))
	for _, x := range sum.pairs {
		ev, w := a.lookup(sum.pubends[x.pubend], sum.publishers[x.publisher])
		events[x.pubend] = ev
		if a.pending[w] == nil {
			a.pendingOrder = append(a.pendingOrder, w)
		}
		// A copy, so that the summary's bytes are not kept; and only the
		// tails the newest DedupKept events need.
		x.tail = bytes.Clone(x.tail)
		tails, newer := append(a.pending[w], x), 0
		for i := len(tails) - 1; i > 0; i-- {
			if newer += tails[i].n; newer >= DedupKept {
				tails = append(tails[:0], tails[i:]...)
				break
			}
		}
		a.pending[w] = tails
	}
	for k, r := range sum.runs {
		p, x := sum.pubends[k], events[k]
		if x == nil {
			return fmt.Errorf("storage: %s: %w: pubend %s without publishers", name, errBadSummary, p)
		}
		if t := r.marks[0].T; t <= x.Last() {
			return fmt.Errorf("storage: log record %d: pubend %s's tick %d after its tick %d: the log is out of tick order", r.marks[0].Index, p, t, x.Last())
		}
		n := x.Len()
		if rest, err := x.AppendFrom(r.packed); err != nil || len(rest) != 0 || x.Len()-n != r.events {
			return fmt.Errorf("storage: %s: %w: pubend %s's ticks", name, errBadSummary, p)
		}
		a.ld.Tracker.NotedRun(p, r.marks, r.events, x.Last())
	}
	return nil
}

// fill puts in the dedup rings the newest events of the tails waiting in
// pending, oldest first.
func (a *loader) fill() error {
	for _, w := range a.pendingOrder {
		tails := a.pending[w]
		i, need := len(tails), DedupKept
		for i > 0 && need > 0 {
			i--
			need -= tails[i].n
		}
		skip := max(0, -need) // of the oldest tail taken
		for _, x := range tails[i:] {
			err := dedupTail(x, func(seq uint64, t tick.Tick) {
				if skip > 0 {
					skip--
					return
				}
				w.push(seqAt{seq, t})
			})
			if err != nil {
				return fmt.Errorf("storage: publisher %s: %w", w.name, err)
			}
		}
	}
	clear(a.pending)
	a.pendingOrder = a.pendingOrder[:0]
	return nil
}

// entry takes one record of a segment read whole.
func (a *loader) entry(index uint64, e sumEntry) error {
	if e.raw == nil {
		return a.event(index, e.pubend, e.t, e.size, e.publisher, e.seq)
	}
	r, err := msg.DecodeRecord(e.raw)
	if err != nil {
		return fmt.Errorf("log record %d: %w", index, err)
	}
	return a.record(index, r)
}

func (a *loader) record(index uint64, r msg.Record) error {
	if r.Event != nil {
		return a.event(index, r.Pubend, r.Event.Tick, int64(msg.EventSize(r.Event.Topic, r.Event.Props, r.Event.Payload)), r.Event.Publisher, r.Event.Seq)
	}
	a.ld.Records = append(a.ld.Records, r)
	return nil
}

func (a *loader) event(index uint64, p msg.PubendID, t tick.Tick, size int64, publisher string, seq uint64) error {
	x, w := a.lookup(p, publisher)
	return a.add(index, p, t, size, seq, x, w)
}

func (a *loader) add(index uint64, p msg.PubendID, t tick.Tick, size int64, seq uint64, x *tick.Packed, w *dedupRing) error {
	if t <= x.Last() {
		return fmt.Errorf("storage: log record %d: pubend %s's tick %d after its tick %d: the log is out of tick order", index, p, t, x.Last())
	}
	x.Add(t, size)
	a.ld.Tracker.Noted(p, t, index)
	w.push(seqAt{seq, t})
	return nil
}

// push keeps e, the publisher's latest event, forgetting the oldest of
// more than DedupKept.
func (w *dedupRing) push(e seqAt) {
	if len(w.ring) < DedupKept {
		w.ring = append(w.ring, e)
	} else {
		w.ring[w.head] = e
		w.head = (w.head + 1) % len(w.ring)
	}
}

// lookup returns pubend p's events and publisher's dedup ring at p,
// making them on first sight.
func (a *loader) lookup(p msg.PubendID, publisher string) (*tick.Packed, *dedupRing) {
	if a.ld.Events == nil {
		a.ld.Events = map[msg.PubendID]*tick.Packed{}
	}
	x := a.ld.Events[p]
	if x == nil {
		x = &tick.Packed{}
		a.ld.Events[p] = x
	}
	d := a.dedup[p]
	if d == nil {
		d = &dedupLog{pubs: map[string]*dedupRing{}}
		a.dedup[p] = d
		a.order = append(a.order, p)
	}
	w := d.pubs[publisher]
	if w == nil {
		// One copy of the name per publisher, not one per event.
		w = &dedupRing{name: strings.Clone(publisher)}
		d.pubs[w.name] = w
		d.order = append(d.order, w.name)
	}
	return x, w
}

// finish appends, per pubend, a metadata record of the publishers its
// events remember, oldest first.
func (a *loader) finish() error {
	if err := a.fill(); err != nil {
		return err
	}
	for _, p := range a.order {
		d := a.dedup[p]
		var m msg.PubendMeta
		for _, pub := range d.order {
			w := d.pubs[pub]
			for i := range w.ring {
				e := w.ring[(w.head+i)%len(w.ring)]
				m.Dedup = append(m.Dedup, msg.DedupEntry{Publisher: pub, Seq: e.seq, Tick: e.t})
			}
		}
		a.ld.Records = append(a.ld.Records, msg.Record{Pubend: p, Meta: &m})
	}
	return nil
}

// Records reads every record the log holds, events whole, in log order:
// what a restart used to restore from, for checks (the simulator's oracle
// compares it with what the pubend restored; tests).
func (s *Store) Records() ([]msg.Record, error) {
	var out []msg.Record
	err := s.log.Replay(s.log.FirstIndex(), func(i uint64, p []byte) error {
		r, err := msg.DecodeRecord(p)
		if err != nil {
			return fmt.Errorf("log record %d: %w", i, err)
		}
		out = append(out, r)
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("storage: %w", err)
	}
	return out, nil
}
