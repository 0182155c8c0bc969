package msg

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"sort"

	"github.com/aerie-mq/aerie/internal/tick"
)

// ErrBadRecord reports a record that does not decode.
var ErrBadRecord = errors.New("msg: bad record")

// Record encoding (the payload of one event-log frame; the log adds length
// and CRC). Integers are unsigned varints unless noted; strings and byte
// strings are a varint length and the bytes.
//
//	HWM record:   0x02 | pubend | hwm
//	filter record: 0x04 | pubend | down | from | flags (1 reset, 2 all) |
//	              member | inc | seq | n | (pattern | selector)*
//	meta record:  0x03 | pubend | hwm | final | n | (publisher | seq | tick)*
//	event record: 0x01 | pubend | tick | publisher | seq | topic |
//	              nprops | (name | type | value)* | payload
//	prop types:   0x01 int64 (zigzag varint) | 0x02 float64 (8 bytes LE) |
//	              0x03 bool (1 byte) | 0x04 string
//
// Properties are written in name order, so equal records encode equally.
const (
	recEvent  byte = 1
	recHWM    byte = 2
	recMeta   byte = 3
	recFilter byte = 4

	propInt    byte = 1
	propFloat  byte = 2
	propBool   byte = 3
	propString byte = 4
)

// EncodeRecord appends r's encoding to dst.
func EncodeRecord(dst []byte, r Record) ([]byte, error) {
	if m := r.Meta; m != nil {
		dst = append(dst, recMeta)
		dst = appendString(dst, string(r.Pubend))
		dst = binary.AppendUvarint(dst, uint64(m.HWM))
		dst = binary.AppendUvarint(dst, uint64(m.Final))
		dst = binary.AppendUvarint(dst, uint64(len(m.Dedup)))
		for _, d := range m.Dedup {
			dst = appendString(dst, d.Publisher)
			dst = binary.AppendUvarint(dst, d.Seq)
			dst = binary.AppendUvarint(dst, uint64(d.Tick))
		}
		return dst, nil
	}
	if f := r.Filter; f != nil {
		if len(f.Selectors) != len(f.Patterns) {
			return nil, fmt.Errorf("%w: filter with %d patterns and %d selectors", ErrBadRecord, len(f.Patterns), len(f.Selectors))
		}
		dst = append(dst, recFilter)
		dst = appendString(dst, string(r.Pubend))
		dst = appendString(dst, string(f.Down))
		dst = binary.AppendUvarint(dst, uint64(f.From))
		var flags byte
		if f.Reset {
			flags |= 1
		}
		if f.All {
			flags |= 2
		}
		dst = append(dst, flags)
		dst = appendString(dst, string(f.Member))
		dst = binary.AppendUvarint(dst, f.Inc)
		dst = binary.AppendUvarint(dst, f.Seq)
		dst = binary.AppendUvarint(dst, uint64(len(f.Patterns)))
		for i := range f.Patterns {
			dst = appendString(dst, f.Patterns[i])
			dst = appendString(dst, f.Selectors[i])
		}
		return dst, nil
	}
	if r.Event == nil {
		dst = append(dst, recHWM)
		dst = appendString(dst, string(r.Pubend))
		return binary.AppendUvarint(dst, uint64(r.HWM)), nil
	}
	ev := r.Event
	dst = append(dst, recEvent)
	dst = appendString(dst, string(ev.Pubend))
	dst = binary.AppendUvarint(dst, uint64(ev.Tick))
	dst = appendString(dst, ev.Publisher)
	dst = binary.AppendUvarint(dst, ev.Seq)
	dst = appendString(dst, ev.Topic)
	names := make([]string, 0, len(ev.Props))
	for k := range ev.Props {
		names = append(names, k)
	}
	sort.Strings(names)
	dst = binary.AppendUvarint(dst, uint64(len(names)))
	for _, k := range names {
		dst = appendString(dst, k)
		switch v := ev.Props[k].(type) {
		case int64:
			dst = append(dst, propInt)
			dst = binary.AppendVarint(dst, v)
		case float64:
			dst = append(dst, propFloat)
			dst = binary.LittleEndian.AppendUint64(dst, math.Float64bits(v))
		case bool:
			dst = append(dst, propBool)
			if v {
				dst = append(dst, 1)
			} else {
				dst = append(dst, 0)
			}
		case string:
			dst = append(dst, propString)
			dst = appendString(dst, v)
		default:
			return nil, fmt.Errorf("%w: property %q has unsupported type %T", ErrBadRecord, k, v)
		}
	}
	return appendString(dst, string(ev.Payload)), nil
}

func appendString(dst []byte, s string) []byte {
	dst = binary.AppendUvarint(dst, uint64(len(s)))
	return append(dst, s...)
}

// DecodeRecord decodes one record; it never panics on bad input.
func DecodeRecord(b []byte) (Record, error) {
	d := decoder{b: b}
	kind := d.byte()
	pubend := PubendID(d.string())
	var r Record
	switch kind {
	case recHWM:
		r = Record{Pubend: pubend, HWM: tick.Tick(d.uvarint())}
	case recFilter:
		f := &FilterVersion{Down: NodeID(d.string()), From: tick.Tick(d.uvarint())}
		flags := d.byte()
		f.Reset, f.All = flags&1 != 0, flags&2 != 0
		if flags > 3 {
			d.fail(fmt.Sprintf("unknown filter flags %d", flags))
		}
		f.Member, f.Inc, f.Seq = NodeID(d.string()), d.uvarint(), d.uvarint()
		n := d.uvarint()
		if n > uint64(len(b)) {
			return Record{}, fmt.Errorf("%w: %d clauses in %d bytes", ErrBadRecord, n, len(b))
		}
		for i := uint64(0); i < n && d.err == nil; i++ {
			f.Patterns = append(f.Patterns, d.string())
			f.Selectors = append(f.Selectors, d.string())
		}
		r = Record{Pubend: pubend, Filter: f}
	case recMeta:
		m := &PubendMeta{HWM: tick.Tick(d.uvarint()), Final: tick.Tick(d.uvarint())}
		n := d.uvarint()
		if n > uint64(len(b)) {
			return Record{}, fmt.Errorf("%w: %d dedup entries in %d bytes", ErrBadRecord, n, len(b))
		}
		for i := uint64(0); i < n && d.err == nil; i++ {
			m.Dedup = append(m.Dedup, DedupEntry{Publisher: d.string(), Seq: d.uvarint(), Tick: tick.Tick(d.uvarint())})
		}
		r = Record{Pubend: pubend, Meta: m}
	case recEvent:
		ev := &Event{Pubend: pubend}
		ev.Tick = tick.Tick(d.uvarint())
		ev.Publisher = d.string()
		ev.Seq = d.uvarint()
		ev.Topic = d.string()
		n := d.uvarint()
		if n > uint64(len(b)) {
			return Record{}, fmt.Errorf("%w: %d properties in %d bytes", ErrBadRecord, n, len(b))
		}
		if n > 0 {
			ev.Props = make(map[string]any, n)
		}
		for i := uint64(0); i < n && d.err == nil; i++ {
			k := d.string()
			switch t := d.byte(); t {
			case propInt:
				ev.Props[k] = d.varint()
			case propFloat:
				ev.Props[k] = math.Float64frombits(d.fixed64())
			case propBool:
				ev.Props[k] = d.byte() != 0
			case propString:
				ev.Props[k] = d.string()
			default:
				d.fail(fmt.Sprintf("property %q has unknown type %d", k, t))
			}
		}
		if p := d.string(); len(p) > 0 {
			ev.Payload = []byte(p)
		}
		r = Record{Pubend: pubend, Event: ev}
	default:
		d.fail(fmt.Sprintf("unknown record kind %d", kind))
	}
	if d.err == nil && len(d.b) > 0 {
		d.fail(fmt.Sprintf("%d trailing bytes", len(d.b)))
	}
	if d.err != nil {
		return Record{}, d.err
	}
	return r, nil
}

type decoder struct {
	b   []byte
	err error
}

func (d *decoder) fail(why string) {
	if d.err == nil {
		d.err = fmt.Errorf("%w: %s", ErrBadRecord, why)
	}
	d.b = nil
}

func (d *decoder) byte() byte {
	if len(d.b) < 1 {
		d.fail("truncated")
		return 0
	}
	c := d.b[0]
	d.b = d.b[1:]
	return c
}

func (d *decoder) uvarint() uint64 {
	v, n := binary.Uvarint(d.b)
	if n <= 0 {
		d.fail("bad varint")
		return 0
	}
	d.b = d.b[n:]
	return v
}

func (d *decoder) varint() int64 {
	v, n := binary.Varint(d.b)
	if n <= 0 {
		d.fail("bad varint")
		return 0
	}
	d.b = d.b[n:]
	return v
}

func (d *decoder) fixed64() uint64 {
	if len(d.b) < 8 {
		d.fail("truncated float")
		return 0
	}
	v := binary.LittleEndian.Uint64(d.b)
	d.b = d.b[8:]
	return v
}

func (d *decoder) string() string {
	n := d.uvarint()
	if n > uint64(len(d.b)) {
		d.fail("string longer than record")
		return ""
	}
	s := string(d.b[:n])
	d.b = d.b[n:]
	return s
}
