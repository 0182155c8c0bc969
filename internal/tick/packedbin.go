package tick

import (
	"encoding/binary"
	"errors"
	"math/bits"
)

// The binary form of a Packed: its blocks as they are held, so that a
// reader takes them back with a copy of their bytes rather than decoding
// and encoding each tick again (a restarting PHB reads millions of them
// from its log's segment summaries, internal/storage).
//
//	blocks | block*blocks
//	block: first | last - first | n | sum (varint) | last weight (varint) | len | data
//
// data is the block's ticks as Packed holds them (packedBlock): per tick
// uvarint(t - the previous tick, or - first for the first) then varint(weight
// - the previous weight, or - 0).

// ErrBadPacked reports a binary form that does not hold together.
var ErrBadPacked = errors.New("tick: bad packed ticks")

// AppendBinary appends p's binary form to b.
func (p *Packed) AppendBinary(b []byte) []byte {
	b = binary.AppendUvarint(b, uint64(len(p.blocks)))
	for i := range p.blocks {
		blk := &p.blocks[i]
		if blk.skip > 0 {
			// Ticks were dropped from its front: written as the block
			// of the ticks it holds.
			var q Packed
			blk.each(0, func(t Tick, w int64) bool { q.Add(t, w); return true })
			blk = &q.blocks[0]
		}
		b = binary.AppendUvarint(b, uint64(blk.first))
		b = binary.AppendUvarint(b, uint64(blk.last-blk.first))
		b = binary.AppendUvarint(b, uint64(blk.n))
		b = binary.AppendVarint(b, blk.sum)
		b = binary.AppendVarint(b, blk.lastW)
		b = binary.AppendUvarint(b, uint64(len(blk.data)))
		b = append(b, blk.data...)
	}
	return b
}

// AppendFrom appends to p the ticks of the binary form at the front of
// b (AppendBinary), which must all lie above p's, and returns the rest of
// b. It copies the blocks' bytes and does not decode their ticks: it
// checks that the blocks follow one another, and that each holds as many
// varints as it says, but a block whose ticks contradict its first, last
// and sum (which no AppendBinary writes) is taken as it is. On an error,
// p is as it was.
func (p *Packed) AppendFrom(b []byte) ([]byte, error) {
	d := binReader{b: b}
	nb := d.uvarint()
	if d.bad || nb > uint64(len(d.b))/7 { // a block takes 7 bytes at least
		return b, ErrBadPacked
	}
	type hdr struct {
		first, last Tick
		n           int32
		sum, lastW  int64
		data        []byte
	}
	hs := make([]hdr, nb)
	total := 0
	prev, n, sum := p.Last(), p.n, p.sum
	for i := range hs {
		h := &hs[i]
		h.first = Tick(d.uvarint())
		span := d.uvarint()
		h.last = h.first + Tick(span)
		cnt := d.uvarint()
		h.sum, h.lastW = d.varint(), d.varint()
		h.data = d.bytes()
		if d.bad || h.last < h.first || cnt == 0 || cnt > packedBlockTicks || (p.n > 0 || i > 0) && h.first <= prev ||
			h.data[0] != 0 || varints(h.data) != 2*cnt || h.data[len(h.data)-1]&0x80 != 0 {
			return b, ErrBadPacked
		}
		h.n = int32(cnt)
		prev = h.last
		n += int(cnt)
		sum += h.sum
		total += len(h.data)
	}
	if len(hs) == 0 {
		return d.b, nil
	}
	if k := len(p.blocks); k > 0 {
		last := &p.blocks[k-1]
		if h := hs[0]; int(last.n+h.n) <= packedBlockTicks {
			// Two short blocks make one: the first tick of h is written
			// again from the last one held, the rest are as they are. A
			// set taken in many small pieces costs no more than one
			// built by Add.
			w0, k2 := binary.Varint(h.data[1:])
			if k2 <= 0 {
				return b, ErrBadPacked
			}
			data := make([]byte, 0, len(last.data)+2*binary.MaxVarintLen64+len(h.data))
			data = append(data, last.data...)
			data = binary.AppendUvarint(data, uint64(h.first-last.last))
			data = binary.AppendVarint(data, w0-last.lastW)
			data = append(data, h.data[1+k2:]...)
			last.data = data[:len(data):len(data)]
			last.last, last.lastW = h.last, h.lastW
			last.n += h.n
			last.sum += h.sum
			total -= len(h.data)
			hs = hs[1:]
		} else {
			last.data = last.data[:len(last.data):len(last.data)] // an Add to it copies it
		}
	}
	buf := make([]byte, 0, total)
	p.blocks = append(p.blocks, make([]packedBlock, len(hs))...)
	blocks := p.blocks[len(p.blocks)-len(hs):]
	for i, h := range hs {
		at := len(buf)
		buf = append(buf, h.data...)
		blocks[i] = packedBlock{first: h.first, last: h.last, data: buf[at:len(buf):len(buf)], n: h.n, sum: h.sum, lastW: h.lastW}
	}
	p.n, p.sum = n, sum
	return d.b, nil
}

// varints returns the number of varints b ends (the bytes without their
// high bit), eight bytes at a time.
func varints(b []byte) uint64 {
	var n int
	for len(b) >= 8 {
		n += bits.OnesCount64(^binary.LittleEndian.Uint64(b) & 0x8080808080808080)
		b = b[8:]
	}
	for _, c := range b {
		if c&0x80 == 0 {
			n++
		}
	}
	return uint64(n)
}

// binReader reads a binary form's fields; a read past its end sets bad.
type binReader struct {
	b   []byte
	bad bool
}

func (d *binReader) uvarint() uint64 {
	v, k := binary.Uvarint(d.b)
	if k <= 0 {
		d.bad = true
		return 0
	}
	d.b = d.b[k:]
	return v
}

func (d *binReader) varint() int64 {
	v, k := binary.Varint(d.b)
	if k <= 0 {
		d.bad = true
		return 0
	}
	d.b = d.b[k:]
	return v
}

// bytes reads a length then that many bytes (at least one).
func (d *binReader) bytes() []byte {
	n := d.uvarint()
	if d.bad || n == 0 || n > uint64(len(d.b)) {
		d.bad = true
		return []byte{0}
	}
	p := d.b[:n:n]
	d.b = d.b[n:]
	return p
}
