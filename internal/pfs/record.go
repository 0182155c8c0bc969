package pfs

import (
	"encoding/binary"
	"errors"
	"fmt"

	"github.com/aerie-mq/aerie/internal/tick"
)

// SubID numbers a durable subscriber at its SHB.
type SubID uint64

const (
	kindMatch   = 0x01
	kindCover   = 0x02
	kindRestart = 0x03
	kindRelease = 0x04
)

// ErrBadRecord wraps every decoding failure of a record.
var ErrBadRecord = errors.New("pfs: bad record")

// link is one subscriber's entry in a match record.
type link struct {
	sub  SubID
	prev uint64 // log index of sub's previous match record + 1; 0: none
}

// record is one decoded record.
type record struct {
	kind  byte
	tick  tick.Tick
	links []link // match records only
}

func appendMatch(dst []byte, t tick.Tick, links []link) []byte {
	dst = append(dst, kindMatch)
	dst = binary.AppendUvarint(dst, uint64(t))
	dst = binary.AppendUvarint(dst, uint64(len(links)))
	for _, l := range links {
		dst = binary.AppendUvarint(dst, uint64(l.sub))
		dst = binary.AppendUvarint(dst, l.prev)
	}
	return dst
}

// appendTick encodes a cover, restart or release record.
func appendTick(dst []byte, kind byte, t tick.Tick) []byte {
	dst = append(dst, kind)
	return binary.AppendUvarint(dst, uint64(t))
}

// decode parses one record; links reuses buf.
func decode(b []byte, buf []link) (record, error) {
	if len(b) == 0 {
		return record{}, fmt.Errorf("%w: empty", ErrBadRecord)
	}
	r := record{kind: b[0]}
	b = b[1:]
	t, b, err := uvarint(b, "tick")
	if err != nil {
		return record{}, err
	}
	r.tick = tick.Tick(t)
	switch r.kind {
	case kindCover, kindRestart, kindRelease:
	case kindMatch:
		n, rest, err := uvarint(b, "count")
		if err != nil {
			return record{}, err
		}
		if n == 0 || n > uint64(len(rest))/2 {
			return record{}, fmt.Errorf("%w: %d subscribers in %d bytes", ErrBadRecord, n, len(rest))
		}
		b = rest
		r.links = buf[:0]
		for range n {
			var s, p uint64
			if s, b, err = uvarint(b, "subscriber"); err != nil {
				return record{}, err
			}
			if p, b, err = uvarint(b, "back-pointer"); err != nil {
				return record{}, err
			}
			r.links = append(r.links, link{sub: SubID(s), prev: p})
		}
	default:
		return record{}, fmt.Errorf("%w: unknown kind %#x", ErrBadRecord, r.kind)
	}
	if len(b) != 0 {
		return record{}, fmt.Errorf("%w: %d trailing bytes", ErrBadRecord, len(b))
	}
	return r, nil
}

func uvarint(b []byte, what string) (uint64, []byte, error) {
	v, n := binary.Uvarint(b)
	if n <= 0 {
		return 0, nil, fmt.Errorf("%w: %s: bad varint", ErrBadRecord, what)
	}
	return v, b[n:], nil
}
