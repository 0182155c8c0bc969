package raftphb

import "go.etcd.io/raft/v3/raftpb"

// entryOverhead approximates what an entry costs in memory beside its
// data: the raftpb.Entry and its slice slot.
const entryOverhead = 64

// logBytes mirrors, in sizes only, the entries the replica's
// MemoryStorage holds, so that compaction can bound them in bytes as
// well as in count (node.Compaction.MaxBytes): at full speed a batch may
// carry a megabyte, and a count bound alone then lets the log hold a
// gigabyte.
type logBytes struct {
	first uint64 // Raft index of sizes[0]
	sizes []int64
	total int64
}

// reset empties it after a snapshot at index i.
func (l *logBytes) reset(i uint64) {
	l.first, l.sizes, l.total = i+1, l.sizes[:0], 0
}

// append mirrors MemoryStorage.Append: entries below the first one kept
// are ignored, a conflicting tail is replaced.
func (l *logBytes) append(es []*raftpb.Entry) {
	if len(es) == 0 {
		return
	}
	at := es[0].GetIndex()
	if at < l.first {
		skip := l.first - at
		if skip >= uint64(len(es)) {
			return
		}
		es, at = es[skip:], l.first
	}
	if k := at - l.first; k < uint64(len(l.sizes)) {
		for _, s := range l.sizes[k:] {
			l.total -= s
		}
		l.sizes = l.sizes[:k]
	}
	for _, e := range es {
		s := int64(len(e.GetData())) + entryOverhead
		l.sizes = append(l.sizes, s)
		l.total += s
	}
}

// compact drops the entries up to index i.
func (l *logBytes) compact(i uint64) {
	if i < l.first {
		return
	}
	n := min(i-l.first+1, uint64(len(l.sizes)))
	for _, s := range l.sizes[:n] {
		l.total -= s
	}
	l.sizes = append(l.sizes[:0], l.sizes[n:]...)
	l.first += n
}

// within returns the lowest index i such that the entries above i hold at
// most limit bytes (first-1: all of them do).
func (l *logBytes) within(limit int64) uint64 {
	var sum int64
	for k := len(l.sizes) - 1; k >= 0; k-- {
		if sum+l.sizes[k] > limit {
			return l.first + uint64(k)
		}
		sum += l.sizes[k]
	}
	return l.first - 1
}

// above returns the bytes of the entries above index i.
func (l *logBytes) above(i uint64) int64 {
	if i+1 <= l.first {
		return l.total
	}
	k := i + 1 - l.first
	if k >= uint64(len(l.sizes)) {
		return 0
	}
	var sum int64
	for _, s := range l.sizes[k:] {
		sum += s
	}
	return sum
}
