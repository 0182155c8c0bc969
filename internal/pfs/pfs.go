package pfs

import (
	"errors"
	"fmt"
	"slices"
	"sort"

	"github.com/aerie-mq/aerie/internal/eventlog"
	"github.com/aerie-mq/aerie/internal/tick"
	"github.com/aerie-mq/aerie/internal/vfs"
)

var (
	// ErrReleased is returned by Read for a range that reaches ticks whose
	// records Release removed: what matched there is no longer known.
	ErrReleased = errors.New("pfs: range released")
	// ErrOrder is returned by Match and Cover for a tick below one already
	// recorded: records are appended in tick order.
	ErrOrder = errors.New("pfs: tick out of order")
)

// PFS is the persistent filtering subsystem of one pubend at one SHB.
type PFS struct {
	dir string
	log *eventlog.Log
	// first is the log index of ticks[0]; ticks[i] is the tick of record
	// first+i. Ticks never decrease (records are appended in tick order),
	// so Release finds its cut by binary search.
	first uint64
	ticks []tick.Tick
	// last is each subscriber's latest match record, as log index + 1.
	last map[SubID]uint64
	// covered is the last cover (lastTimestamp); durable is the part of it
	// that a Sync made durable.
	covered, durable tick.Tick
	// released bounds the ticks of removed records: reads must start above.
	// It never exceeds covered.
	released tick.Tick
	// scratch buffers, reused to keep appends and reads allocation-light.
	buf   []byte
	links []link
	// mutSkipBackPointer breaks the PFS on purpose for the property test's
	// mutation check: new match records do not link to the subscriber's
	// previous one (Gryphon DS §4.2's back-pointer), so reads lose matches.
	mutSkipBackPointer bool
}

// Batch is the answer to Read: within Known, the ticks in Matched matched
// the subscriber (fetch them) and every other tick is silence for it. Ticks
// above Known.Hi are not known yet (Known is empty when nothing is).
type Batch struct {
	Known   tick.Range
	Matched []tick.Tick // ascending
}

// Open opens (or creates) the PFS in dir, repairing a torn tail as the
// eventlog does and rebuilding the subscribers' last records and the last
// cover from what survived.
func Open(fsys vfs.FS, dir string, opts eventlog.Options) (*PFS, eventlog.Recovery, error) {
	l, rec, err := eventlog.Open(fsys, dir, opts)
	if err != nil {
		return nil, rec, fmt.Errorf("pfs: open %s: %w", dir, err)
	}
	p := &PFS{dir: dir, log: l, first: l.FirstIndex(), last: map[SubID]uint64{}}
	dead, err := p.replay()
	if err == nil && dead {
		// The SHB filters the uncovered ticks again and records them
		// anew, possibly lower than the dead records: say so in the log,
		// so that the next Open skips the dead records too.
		err = p.append(record{kind: kindRestart, tick: p.covered}, appendTick(p.buf[:0], kindRestart, p.covered))
	}
	if err != nil {
		l.Close()
		return nil, rec, fmt.Errorf("pfs: open %s: %w", dir, err)
	}
	p.durable = p.covered
	return p, rec, nil
}

// replay rebuilds the index from the log. Match records after the last
// cover that a restart record (or the end of the log) follows are dead:
// their ticks were never covered, so the SHB filtered them again after a
// crash. Subscribers' chains skip them (their links are staged until a cover
// and dropped at a restart) and their ticks count as the cover's, so that
// ticks stay in order. It reports whether the log ends with dead records.
func (p *PFS) replay() (dead bool, err error) {
	var staged []link
	live := 0 // ticks[live:] are not covered yet
	err = p.log.Replay(p.first, func(i uint64, payload []byte) error {
		r, err := decode(payload, p.links)
		if err != nil {
			return fmt.Errorf("record %d: %w", i, err)
		}
		p.links = r.links
		if r.kind == kindRelease {
			// Not in tick order: it names an older tick. Its slot takes the
			// tick before it, which keeps Release's search sorted.
			p.released = max(p.released, r.tick)
			// Everything released was covered, even if the cover record
			// went with the removed segments.
			p.covered = max(p.covered, r.tick)
			r.tick = 0
			if n := len(p.ticks); n > 0 {
				r.tick = p.ticks[n-1]
			}
		}
		if r.kind == kindRestart {
			for j := live; j < len(p.ticks); j++ {
				p.ticks[j] = p.covered
			}
			staged = staged[:0]
		}
		if err := p.inOrder(r.tick); err != nil {
			return fmt.Errorf("record %d: %w", i, err)
		}
		p.ticks = append(p.ticks, r.tick)
		switch r.kind {
		case kindMatch:
			for _, x := range r.links {
				staged = append(staged, link{sub: x.sub, prev: i + 1})
			}
		case kindCover:
			for _, x := range staged {
				p.last[x.sub] = x.prev
			}
			staged, p.covered, live = staged[:0], r.tick, len(p.ticks)
		case kindRestart:
			live = len(p.ticks)
		}
		return nil
	})
	if err != nil {
		return false, err
	}
	if p.first > 0 && len(p.ticks) > 0 && p.released == 0 {
		// Records were removed but the release record that said how far
		// did not survive: they lie at or below the first one left.
		p.released = p.ticks[0]
	}

	for j := live; j < len(p.ticks); j++ {
		p.ticks[j] = p.covered
		dead = true
	}
	return dead, nil
}

// inOrder checks that a record at tick t may follow those indexed.
func (p *PFS) inOrder(t tick.Tick) error {
	if n := len(p.ticks); n > 0 && t < p.ticks[n-1] {
		return fmt.Errorf("%w: tick %d follows tick %d", ErrOrder, t, p.ticks[n-1])
	}
	return nil
}

// note adds record i, appended in order, to the in-memory index.
func (p *PFS) note(i uint64, r record) {
	p.ticks = append(p.ticks, r.tick)
	switch r.kind {
	case kindMatch:
		for _, l := range r.links {
			p.last[l.sub] = i + 1
		}
	case kindCover:
		p.covered = max(p.covered, r.tick)
	}
}

// Match records that the event at tick t matched subs (sorted, without
// duplicates, not empty). t must lie above the last cover and at or above
// every recorded tick.
func (p *PFS) Match(t tick.Tick, subs []SubID) error {
	if !strictlyIncreasing(subs) {
		return fmt.Errorf("pfs: match at tick %d: subscribers %v must be sorted, distinct and not empty", t, subs)
	}
	if t <= p.covered {
		return fmt.Errorf("%w: match at tick %d, already covered to %d", ErrOrder, t, p.covered)
	}
	links := p.links[:0]
	for _, s := range subs {
		prev := p.last[s]
		if p.mutSkipBackPointer {
			prev = 0
		}
		links = append(links, link{sub: s, prev: prev})
	}
	p.links = links
	return p.append(record{kind: kindMatch, tick: t, links: links}, appendMatch(p.buf[:0], t, links))
}

func strictlyIncreasing(subs []SubID) bool {
	for i := 1; i < len(subs); i++ {
		if subs[i] <= subs[i-1] {
			return false
		}
	}
	return len(subs) > 0
}

// Cover records that every tick up to t has been filtered: from now on a
// tick <= t without a match for a subscriber is silence for it. A cover at
// or below the last one changes nothing.
func (p *PFS) Cover(t tick.Tick) error {
	if t <= p.covered {
		return nil
	}
	return p.append(record{kind: kindCover, tick: t}, appendTick(p.buf[:0], kindCover, t))
}

func (p *PFS) append(r record, b []byte) error {
	p.buf = b
	if err := p.inOrder(r.tick); err != nil {
		return err
	}
	i, err := p.log.Append(b)
	if err != nil {
		return fmt.Errorf("pfs: %s: %w", p.dir, err)
	}
	p.note(i, r)
	return nil
}

// Sync makes every record appended so far durable (one fsync: group
// commit). After it returns nil, DurableCovered is the last cover.
func (p *PFS) Sync() error {
	covered := p.covered
	if err := p.log.Sync(); err != nil {
		return fmt.Errorf("pfs: %s: %w", p.dir, err)
	}
	p.durable = covered
	return nil
}

// Covered returns the last cover (the paper's lastTimestamp).
func (p *PFS) Covered() tick.Tick { return p.covered }

// DurableCovered returns the last cover a Sync made durable: what survives a
// crash. An SHB persists its latestDelivered no further than this.
func (p *PFS) DurableCovered() tick.Tick { return p.durable }

// Read tells subscriber s what the ticks of r are for it (see Batch): it
// walks s's back-pointers from its last match down to r.Lo. At most limit
// matched ticks are returned (limit <= 0: no limit); Known then ends just
// before the first one left out, so a catch-up reads on from there.
func (p *PFS) Read(s SubID, r tick.Range, limit int) (Batch, error) {
	b := Batch{Known: tick.Range{Lo: r.Lo, Hi: min(r.Hi, p.covered)}}
	if b.Known.Empty() {
		return Batch{Known: tick.Range{Lo: r.Lo, Hi: r.Lo - 1}}, nil
	}
	if r.Lo <= p.released {
		return Batch{}, fmt.Errorf("%w: subscriber %d, ticks from %d, released to %d", ErrReleased, s, r.Lo, p.released)
	}
	for i := p.last[s]; i > 0; {
		idx := i - 1
		if idx < p.first {
			break // removed records lie at or below p.released, below r
		}
		t := p.ticks[idx-p.first]
		if t < r.Lo {
			break
		}
		prev, err := p.prevOf(idx, s)
		if err != nil {
			return Batch{}, err
		}
		if t <= b.Known.Hi {
			b.Matched = append(b.Matched, t)
		}
		i = prev
	}
	slices.Reverse(b.Matched)
	if limit > 0 && len(b.Matched) > limit {
		b.Known.Hi = b.Matched[limit] - 1
		b.Matched = b.Matched[:limit]
	}
	return b, nil
}

var errStop = errors.New("stop")

// prevOf reads match record idx back from the log and returns s's
// back-pointer in it.
func (p *PFS) prevOf(idx uint64, s SubID) (uint64, error) {
	var prev uint64
	found := false
	err := p.log.Replay(idx, func(_ uint64, payload []byte) error {
		r, err := decode(payload, p.links)
		if err != nil {
			return err
		}
		p.links = r.links
		for _, l := range r.links {
			if l.sub == s {
				prev, found = l.prev, true
			}
		}
		return errStop
	})
	if err != nil && !errors.Is(err, errStop) {
		return 0, fmt.Errorf("pfs: %s: record %d: %w", p.dir, idx, err)
	}
	if !found {
		return 0, fmt.Errorf("pfs: %s: record %d does not list subscriber %d: %w", p.dir, idx, s, ErrBadRecord)
	}
	if prev > idx {
		return 0, fmt.Errorf("pfs: %s: record %d points forward to %d: %w", p.dir, idx, prev-1, ErrBadRecord)
	}
	return prev, nil
}

// Release frees the storage of records at or below tick t: the release
// protocol made those ticks final for every subscriber, so reads start above
// t from now on. Only whole segments go (eventlog.TruncateFront), so some
// released records may stay. A release record, synced before any file is
// removed, keeps the bound across a restart.
func (p *PFS) Release(t tick.Tick) error {
	t = min(t, p.covered) // nothing uncovered is final
	if t <= p.released {
		return nil
	}
	cut := p.first + uint64(sort.Search(len(p.ticks), func(i int) bool { return p.ticks[i] > t }))
	if !p.log.Removable(cut) {
		return nil
	}
	if err := p.append(record{kind: kindRelease, tick: p.ticks[len(p.ticks)-1]}, appendTick(p.buf[:0], kindRelease, t)); err != nil {
		return err
	}
	if err := p.Sync(); err != nil {
		return err
	}
	p.released = t
	if err := p.log.TruncateFront(cut); err != nil {
		return fmt.Errorf("pfs: %s: release to tick %d: %w", p.dir, t, err)
	}
	first := p.log.FirstIndex()
	p.ticks = append(p.ticks[:0], p.ticks[first-p.first:]...)
	p.first = first
	return nil
}

// Forget drops subscriber s (its durable subscription ended). Its old
// records stay until released; a restart may list it again, which the
// caller ignores for subscribers it no longer has.
func (p *PFS) Forget(s SubID) { delete(p.last, s) }

// Records returns how many records are retained (the storage it costs).
func (p *PFS) Records() int { return len(p.ticks) }

// Close closes the log.
func (p *PFS) Close() error { return p.log.Close() }
