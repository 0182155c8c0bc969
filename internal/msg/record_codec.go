package msg

import (
	"encoding/binary"
	"errors"
	"fmt"
	"slices"

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
//	event record: 0x01 | event      (the event's one encoding: event_codec.go)
//	durable record: 0x05 | "" | name | pattern | selector | flags (1 deleted) |
//	              n | (pubend | tick)*   (pubends sorted, each once)
//
// Varints have their minimal length, as everywhere in an event; equal records
// encode equally.
const (
	recEvent   byte = 1
	recHWM     byte = 2
	recMeta    byte = 3
	recFilter  byte = 4
	recDurable byte = 5
)

// EncodeRecord appends r's encoding to dst.
func EncodeRecord(dst []byte, r Record) ([]byte, error) {
	if m := r.Meta; m != nil {
		dst = append(dst, recMeta)
		dst = appendStr(dst, string(r.Pubend))
		dst = binary.AppendUvarint(dst, uint64(m.HWM))
		dst = binary.AppendUvarint(dst, uint64(m.Final))
		dst = binary.AppendUvarint(dst, uint64(len(m.Dedup)))
		for _, d := range m.Dedup {
			dst = appendStr(dst, d.Publisher)
			dst = binary.AppendUvarint(dst, d.Seq)
			dst = binary.AppendUvarint(dst, uint64(d.Tick))
		}
		return dst, nil
	}
	if d := r.Durable; d != nil {
		dst = append(dst, recDurable)
		dst = appendStr(dst, "")
		dst = appendStr(dst, d.Name)
		dst = appendStr(dst, d.Pattern)
		dst = appendStr(dst, d.Selector)
		var flags byte
		if d.Deleted {
			flags = 1
		}
		dst = append(dst, flags)
		ps := make([]PubendID, 0, len(d.Released))
		for p := range d.Released {
			ps = append(ps, p)
		}
		slices.Sort(ps)
		dst = binary.AppendUvarint(dst, uint64(len(ps)))
		for _, p := range ps {
			dst = appendStr(dst, string(p))
			dst = binary.AppendUvarint(dst, uint64(d.Released[p]))
		}
		return dst, nil
	}
	if f := r.Filter; f != nil {
		if len(f.Selectors) != len(f.Patterns) {
			return nil, fmt.Errorf("%w: filter with %d patterns and %d selectors", ErrBadRecord, len(f.Patterns), len(f.Selectors))
		}
		dst = append(dst, recFilter)
		dst = appendStr(dst, string(r.Pubend))
		dst = appendStr(dst, string(f.Down))
		dst = binary.AppendUvarint(dst, uint64(f.From))
		var flags byte
		if f.Reset {
			flags |= 1
		}
		if f.All {
			flags |= 2
		}
		if f.Delta {
			flags |= 4
		} else if len(f.Remove) > 0 {
			return nil, fmt.Errorf("%w: whole filter version with %d removed clauses", ErrBadRecord, len(f.Remove))
		}
		dst = append(dst, flags)
		dst = appendStr(dst, string(f.Member))
		dst = binary.AppendUvarint(dst, f.Inc)
		dst = binary.AppendUvarint(dst, f.Seq)
		dst = binary.AppendUvarint(dst, uint64(len(f.Patterns)))
		for i := range f.Patterns {
			dst = appendStr(dst, f.Patterns[i])
			dst = appendStr(dst, f.Selectors[i])
		}
		if f.Delta {
			dst = binary.AppendUvarint(dst, uint64(len(f.Remove)))
			for _, c := range f.Remove {
				dst = appendStr(dst, c.Pattern)
				dst = appendStr(dst, c.Selector)
			}
		}
		return dst, nil
	}
	if r.Event == nil {
		dst = append(dst, recHWM)
		dst = appendStr(dst, string(r.Pubend))
		return binary.AppendUvarint(dst, uint64(r.HWM)), nil
	}
	// The event's own encoding, as built at the PHB: not encoded again.
	return AppendEvent(append(dst, recEvent), r.Event), nil
}

// ViewEventRecord fills ev with a view of the event record b, without a
// copy (ViewEventTo: b must not be written while ev is used), and reports
// whether b is an event record at all; other records are left to
// DecodeRecord.
func ViewEventRecord(ev *Event, b []byte) (bool, error) {
	if len(b) == 0 || b[0] != recEvent {
		return false, nil
	}
	n, err := ViewEventTo(ev, b[1:])
	if err != nil {
		return false, fmt.Errorf("%w: event: %w", ErrBadRecord, err)
	}
	if n != len(b)-1 {
		return false, fmt.Errorf("%w: %d trailing bytes", ErrBadRecord, len(b)-1-n)
	}
	return true, nil
}

// DecodeRecord decodes one record; it never panics on bad input. An event
// record's event owns a copy of its bytes (b may be reused). The encoding is
// checked to be canonical, as on the wire.
func DecodeRecord(b []byte) (Record, error) {
	if len(b) > 0 && b[0] == recEvent {
		ev, n, err := ReadEvent(b[1:])
		if err != nil {
			return Record{}, fmt.Errorf("%w: event: %w", ErrBadRecord, err)
		}
		if n != len(b)-1 {
			return Record{}, fmt.Errorf("%w: %d trailing bytes", ErrBadRecord, len(b)-1-n)
		}
		return Record{Pubend: ev.Pubend, Event: ev}, nil
	}
	d := cursor{b: b}
	kind := d.byte()
	pubend := PubendID(d.str())
	var r Record
	switch kind {
	case recHWM:
		r = Record{Pubend: pubend, HWM: tick.Tick(d.uvarint())}
	case recFilter:
		f := &FilterVersion{Down: NodeID(d.str()), From: tick.Tick(d.uvarint())}
		flags := d.byte()
		f.Reset, f.All, f.Delta = flags&1 != 0, flags&2 != 0, flags&4 != 0
		if flags > 7 {
			d.failf("unknown filter flags %d", flags)
		}
		f.Member, f.Inc, f.Seq = NodeID(d.str()), d.uvarint(), d.uvarint()
		n := d.uvarint()
		if n > uint64(len(b)) {
			return Record{}, fmt.Errorf("%w: %d clauses in %d bytes", ErrBadRecord, n, len(b))
		}
		for i := uint64(0); i < n && d.err == nil; i++ {
			f.Patterns = append(f.Patterns, d.str())
			f.Selectors = append(f.Selectors, d.str())
		}
		if f.Delta && d.err == nil {
			n := d.uvarint()
			if n > uint64(len(b)) {
				return Record{}, fmt.Errorf("%w: %d removed clauses in %d bytes", ErrBadRecord, n, len(b))
			}
			for i := uint64(0); i < n && d.err == nil; i++ {
				f.Remove = append(f.Remove, Clause{d.str(), d.str()})
			}
		}
		r = Record{Pubend: pubend, Filter: f}
	case recDurable:
		r = Record{Durable: decodeDurable(&d, len(b))}
		if pubend != "" {
			d.failf("durable record for pubend %q", pubend)
		}
	case recMeta:
		m := &PubendMeta{HWM: tick.Tick(d.uvarint()), Final: tick.Tick(d.uvarint())}
		n := d.uvarint()
		if n > uint64(len(b)) {
			return Record{}, fmt.Errorf("%w: %d dedup entries in %d bytes", ErrBadRecord, n, len(b))
		}
		for i := uint64(0); i < n && d.err == nil; i++ {
			m.Dedup = append(m.Dedup, DedupEntry{Publisher: d.str(), Seq: d.uvarint(), Tick: tick.Tick(d.uvarint())})
		}
		r = Record{Pubend: pubend, Meta: m}
	default:
		d.failf("unknown record kind %d", kind)
	}
	if d.err == nil && d.off < len(b) {
		d.failf("%d trailing bytes", len(b)-d.off)
	}
	if d.err != nil {
		return Record{}, fmt.Errorf("%w: %w", ErrBadRecord, d.err)
	}
	return r, nil
}

// decodeDurable reads a durable record's body, checking that its pubends
// are sorted and distinct (canonical: equal states encode equally).
func decodeDurable(d *cursor, size int) *DurableSub {
	ds := &DurableSub{Name: d.str(), Pattern: d.str(), Selector: d.str()}
	flags := d.byte()
	if flags > 1 {
		d.failf("unknown durable flags %d", flags)
	}
	ds.Deleted = flags&1 != 0
	n := d.uvarint()
	if n > uint64(size) {
		d.failf("%d token entries in %d bytes", n, size)
		return ds
	}
	var last PubendID
	for i := uint64(0); i < n && d.err == nil; i++ {
		p, t := PubendID(d.str()), tick.Tick(d.uvarint())
		if i > 0 && p <= last {
			d.failf("token pubends out of order at %q", p)
		}
		if ds.Released == nil {
			ds.Released = Token{}
		}
		ds.Released[p], last = t, p
	}
	return ds
}
