package retention

import (
	"sort"

	"github.com/aerie-mq/aerie/internal/msg"
	"github.com/aerie-mq/aerie/internal/tick"
)

// indexEvery is the spacing of the sparse tick index: one entry per this
// many events of a pubend. A fetch reads at most that many of the pubend's
// events (and the other pubends' records interleaved with them) before the
// first one it wants, for 16 bytes of memory per indexEvery events.
const indexEvery = 64

// tickIndex maps one pubend's ticks to log indexes, sparsely: entries in
// tick order (which is log order for one pubend).
type tickIndex struct {
	seen    int
	entries []tickAt
}

type tickAt struct {
	t     tick.Tick
	index uint64
}

func (x *tickIndex) note(t tick.Tick, index uint64) {
	if x.seen%indexEvery == 0 {
		x.entries = append(x.entries, tickAt{t, index})
	}
	x.seen++
}

// start returns the log index of the last entry with a tick at or below t
// (0 when there is none: read from the log's first record).
func (x *tickIndex) start(t tick.Tick) uint64 {
	i := sort.Search(len(x.entries), func(i int) bool { return x.entries[i].t > t })
	if i == 0 {
		return 0
	}
	return x.entries[i-1].index
}

// dropBelow forgets entries below log index cut, keeping the last one
// before it as a starting point for what lies between.
func (x *tickIndex) dropBelow(cut uint64) {
	i := sort.Search(len(x.entries), func(i int) bool { return x.entries[i].index >= cut })
	if i > 1 {
		x.entries = append(x.entries[:0], x.entries[i-1:]...)
	}
}

// FetchStart returns the log index from which a read finds every logged
// event of p with a tick at or above lo. It never returns an index below
// the log's first, which the caller clamps to.
func (t *Tracker) FetchStart(p msg.PubendID, lo tick.Tick) uint64 {
	if x := t.ticks[p]; x != nil {
		return x.start(lo)
	}
	return 0
}
