package tick

import (
	"encoding/binary"
	"sort"
)

// Packed is an ascending set of ticks, each with a weight (what the caller
// counts it for: a pubend counts an event's size), packed as varint deltas:
// two to four bytes a tick where a run of the knowledge stream takes 32.
// Ticks are added at the end and dropped from the front; lookups walk one
// block of at most packedBlock ticks after a binary search over the blocks.
// A Knowledge keeps its cold ticks in one (Knowledge.Freeze), and so does a
// restarting PHB's log reader for the events it found (internal/storage).
type Packed struct {
	blocks []packedBlock
	n      int   // ticks held
	sum    int64 // their weights
}

// packedBlock holds up to packedBlockTicks ticks: per tick, uvarint(t -
// the previous tick, or - first for the first) then varint(weight - the
// previous weight, or - 0): events of one stream often weigh alike. The
// first skip ticks (skipOff bytes, ending at tick skipPrev of weight
// skipW) were dropped.
type packedBlock struct {
	first, last Tick
	data        []byte
	n, skip     int32
	skipOff     int32
	sum         int64 // weights of the ticks held (not the skipped)
	lastW       int64
	skipPrev    Tick
	skipW       int64
}

// packedBlockTicks is the number of ticks per block: a lookup decodes at
// most that many; a block costs 88 bytes besides its ticks'.
const packedBlockTicks = 256

// Len returns the number of ticks held.
func (p *Packed) Len() int { return p.n }

// Sum returns the total weight of the ticks held.
func (p *Packed) Sum() int64 { return p.sum }

// Bytes returns the memory the set takes, roughly.
func (p *Packed) Bytes() int {
	n := cap(p.blocks) * 88 // a packedBlock
	for i := range p.blocks {
		n += cap(p.blocks[i].data)
	}
	return n
}

// First returns the lowest tick held (0 if none).
func (p *Packed) First() Tick {
	if p.n == 0 {
		return 0
	}
	var first Tick
	p.blocks[0].each(0, func(t Tick, _ int64) bool { first = t; return false })
	return first
}

// Last returns the highest tick held (0 if none).
func (p *Packed) Last() Tick {
	if p.n == 0 {
		return 0
	}
	return p.blocks[len(p.blocks)-1].last
}

// Add appends t with weight w; t must lie above every tick held (a tick
// at or below Last is ignored: the set stays ascending).
func (p *Packed) Add(t Tick, w int64) {
	if p.n > 0 && t <= p.Last() {
		return
	}
	k := len(p.blocks)
	if k == 0 || p.blocks[k-1].n == packedBlockTicks {
		if k > 0 {
			b := &p.blocks[k-1]
			b.data = append(make([]byte, 0, len(b.data)), b.data...) // full: no spare capacity kept
		}
		p.blocks = append(p.blocks, packedBlock{first: t, last: t, data: make([]byte, 0, 3*packedBlockTicks)})
		k++
	}
	b := &p.blocks[k-1]
	b.data = binary.AppendUvarint(b.data, uint64(t-b.last))
	b.data = binary.AppendVarint(b.data, w-b.lastW)
	b.last, b.lastW = t, w
	b.n++
	b.sum += w
	p.n++
	p.sum += w
}

// DropTo drops every tick at or below t.
func (p *Packed) DropTo(t Tick) {
	i := 0
	for i < len(p.blocks) && p.blocks[i].last <= t {
		p.n -= int(p.blocks[i].n - p.blocks[i].skip)
		p.sum -= p.blocks[i].sum
		i++
	}
	if i > 0 {
		n := copy(p.blocks, p.blocks[i:])
		clear(p.blocks[n:])
		p.blocks = p.blocks[:n]
	}
	if len(p.blocks) == 0 {
		p.blocks, p.n, p.sum = nil, 0, 0
		return
	}
	b := &p.blocks[0]
	if b.first > t {
		return
	}
	// Skip the dropped ticks of the first block once, so that later walks
	// start past them.
	off, prev, pw := int(b.skipOff), b.skipPrev, b.skipW
	if b.skip == 0 {
		prev, pw = b.first, 0
	}
	for off < len(b.data) {
		d, k := binary.Uvarint(b.data[off:])
		if k <= 0 {
			break // a block AppendFrom took that does not hold together
		}
		dw, k2 := binary.Varint(b.data[off+k:])
		if k2 <= 0 || prev+Tick(d) > t {
			break
		}
		prev += Tick(d)
		pw += dw
		off += k + k2
		b.skip++
		b.sum -= pw
		p.n--
		p.sum -= pw
	}
	b.skipOff, b.skipPrev, b.skipW = int32(off), prev, pw
	b.first = prev + 1 // no tick held lies below
}

// each calls fn for the block's ticks at or above from, in order, until fn
// returns false; it reports whether fn asked to go on.
func (b *packedBlock) each(from Tick, fn func(t Tick, w int64) bool) bool {
	off, prev, w := int(b.skipOff), b.skipPrev, b.skipW
	if b.skip == 0 {
		prev, w = b.first, 0
	}
	for off < len(b.data) {
		d, k := binary.Uvarint(b.data[off:])
		if k <= 0 {
			break // a block AppendFrom took that does not hold together
		}
		dw, k2 := binary.Varint(b.data[off+k:])
		if k2 <= 0 {
			break
		}
		off += k + k2
		prev += Tick(d)
		w += dw
		if prev >= from && !fn(prev, w) {
			return false
		}
	}
	return true
}

// Each calls fn for every tick at or above from, ascending, with its
// weight, until fn returns false.
func (p *Packed) Each(from Tick, fn func(t Tick, w int64) bool) {
	i := sort.Search(len(p.blocks), func(i int) bool { return p.blocks[i].last >= from })
	for ; i < len(p.blocks); i++ {
		if !p.blocks[i].each(from, fn) {
			return
		}
	}
}

// Has reports whether t is held.
func (p *Packed) Has(t Tick) bool {
	found := false
	p.Each(t, func(x Tick, _ int64) bool {
		found = x == t
		return false
	})
	return found
}

// Count returns the number of ticks held in r.
func (p *Packed) Count(r Range) int {
	n := 0
	p.Each(r.Lo, func(x Tick, _ int64) bool {
		if x > r.Hi {
			return false
		}
		n++
		return true
	})
	return n
}
