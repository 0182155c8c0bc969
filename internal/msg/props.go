package msg

import (
	"encoding/binary"
	"fmt"
	"math"
	"slices"
	"strings"
)

// PropKind is the type of a property value.
type PropKind uint8

// Property kinds: their values are the ptype bytes of the encoding.
const (
	PropInt    PropKind = 1 // int64
	PropFloat  PropKind = 2 // float64
	PropBool   PropKind = 3 // bool
	PropString PropKind = 4 // string
)

// Value is one property value, read from the encoding without allocating.
type Value struct {
	Kind PropKind
	bits uint64 // int64, float64 bits or bool (0/1)
	str  string
}

// Int is the value of a PropInt.
func (v Value) Int() int64 { return int64(v.bits) }

// Float is the value of a PropFloat.
func (v Value) Float() float64 { return math.Float64frombits(v.bits) }

// Bool is the value of a PropBool.
func (v Value) Bool() bool { return v.bits != 0 }

// Str is the value of a PropString.
func (v Value) Str() string { return v.str }

// Any boxes the value as int64, float64, bool or string.
func (v Value) Any() any {
	switch v.Kind {
	case PropInt:
		return v.Int()
	case PropFloat:
		return v.Float()
	case PropBool:
		return v.Bool()
	case PropString:
		return v.str
	}
	return nil
}

// Props is a read-only view of an event's properties in their canonical
// encoding (nprops, then name, type and value of each, names in increasing
// order). Lookups and iteration read the bytes and do not allocate. The zero
// Props has no properties. Every Props is valid: it is built by PropsOf or
// checked by ReadProps / ReadEvent.
type Props struct {
	enc string // "" when there are no properties, else the full encoding
}

// PropsOf encodes a property map. Values must be int64, float64, bool or
// string; int, int32 and float32 are converted to int64 and float64 (as a
// client publishes them). It walks the map once: a publish with one
// property pays one iteration, no sort and no second lookup (it was 8 %
// of a best-effort event's CPU as a check, a walk, a sort and a lookup
// per name).
func PropsOf(m map[string]any) (Props, error) {
	if len(m) == 0 {
		return Props{}, nil
	}
	var small [8]prop
	ps := small[:0]
	n := 1
	for k, v := range m {
		p := prop{name: k}
		switch x := v.(type) {
		case int64:
			p.kind, p.bits = PropInt, uint64(x)
		case int:
			p.kind, p.bits = PropInt, uint64(int64(x))
		case int32:
			p.kind, p.bits = PropInt, uint64(int64(x))
		case float64:
			p.kind, p.bits = PropFloat, math.Float64bits(x)
		case float32:
			p.kind, p.bits = PropFloat, math.Float64bits(float64(x))
		case bool:
			p.kind, p.bits = PropBool, uint64(b2u8(x))
		case string:
			p.kind, p.str = PropString, x
			n += len(x) + 10
		default:
			return Props{}, &PropTypeError{Name: k, Value: v}
		}
		n += len(k) + 11
		ps = append(ps, p)
	}
	if len(ps) > 1 {
		slices.SortFunc(ps, func(a, b prop) int { return strings.Compare(a.name, b.name) })
	}
	b := binary.AppendUvarint(make([]byte, 0, n), uint64(len(ps)))
	for _, p := range ps {
		b = append(appendStr(b, p.name), byte(p.kind))
		switch p.kind {
		case PropInt:
			b = binary.AppendVarint(b, int64(p.bits))
		case PropFloat:
			b = binary.LittleEndian.AppendUint64(b, p.bits)
		case PropBool:
			b = append(b, byte(p.bits))
		case PropString:
			b = appendStr(b, p.str)
		}
	}
	return Props{enc: unsafeString(b)}, nil // b is ours, and written no more
}

// PropTypeError is PropsOf's refusal of a value it cannot encode; it is
// an ErrBadEvent.
type PropTypeError struct {
	Name  string
	Value any
}

func (e *PropTypeError) Error() string {
	return fmt.Sprintf("%v: property %q has unsupported type %T (want an integer, float, bool or string)", ErrBadEvent, e.Name, e.Value)
}

func (e *PropTypeError) Unwrap() error { return ErrBadEvent }

// prop is one property on its way into an encoding (PropsOf).
type prop struct {
	name string
	kind PropKind
	bits uint64
	str  string
}

// MustProps is PropsOf for values known to be valid (tests, the simulator);
// it panics on an unsupported type.
func MustProps(m map[string]any) Props {
	p, err := PropsOf(m)
	if err != nil {
		panic(err)
	}
	return p
}

// Len is the number of properties.
func (p Props) Len() int {
	if p.enc == "" {
		return 0
	}
	n, _ := uvarintStr(p.enc)
	return int(n)
}

// Encoded is the canonical encoding ("" for no properties; a reader wants
// the single byte 0 then, which AppendProps writes).
func (p Props) Encoded() string { return p.enc }

// Get returns the value of the property name.
func (p Props) Get(name string) (Value, bool) {
	it := p.Iter()
	for {
		k, v, ok := it.Next()
		if !ok || k > name {
			return Value{}, false
		}
		if k == name {
			return v, true
		}
	}
}

// Map copies the properties into a map (for APIs that hand maps to users).
func (p Props) Map() map[string]any {
	if p.enc == "" {
		return nil
	}
	m := make(map[string]any, p.Len())
	it := p.Iter()
	for k, v, ok := it.Next(); ok; k, v, ok = it.Next() {
		m[k] = v.Any()
	}
	return m
}

// String renders " name=value" for each property, in name order.
func (p Props) String() string {
	var b strings.Builder
	it := p.Iter()
	for k, v, ok := it.Next(); ok; k, v, ok = it.Next() {
		fmt.Fprintf(&b, " %s=%v", k, v.Any())
	}
	return b.String()
}

// PropIter walks the properties in name order: for k, v, ok := it.Next(); ok; … .
type PropIter struct {
	s    string
	left uint64
}

// Iter starts a walk over p.
func (p Props) Iter() PropIter {
	if p.enc == "" {
		return PropIter{}
	}
	n, w := uvarintStr(p.enc)
	return PropIter{s: p.enc[w:], left: n}
}

// Next returns the next property. The encoding was checked when p was made,
// but Next stays in bounds regardless: it stops rather than panics.
func (it *PropIter) Next() (name string, v Value, ok bool) {
	if it.left == 0 {
		return "", Value{}, false
	}
	it.left--
	s := it.s
	l, w := uvarintStr(s)
	if w <= 0 || l >= uint64(len(s)-w) {
		it.left = 0
		return "", Value{}, false
	}
	name, s = s[w:w+int(l)], s[w+int(l):]
	v.Kind = PropKind(s[0])
	s = s[1:]
	switch v.Kind {
	case PropInt:
		u, w := uvarintStr(s)
		if w <= 0 {
			it.left = 0
			return "", Value{}, false
		}
		v.bits, s = uint64(int64(u>>1)^-int64(u&1)), s[w:]
	case PropFloat:
		if len(s) < 8 {
			it.left = 0
			return "", Value{}, false
		}
		for i := 7; i >= 0; i-- {
			v.bits = v.bits<<8 | uint64(s[i])
		}
		s = s[8:]
	case PropBool:
		if len(s) < 1 {
			it.left = 0
			return "", Value{}, false
		}
		v.bits, s = uint64(s[0]), s[1:]
	case PropString:
		l, w := uvarintStr(s)
		if w <= 0 || l > uint64(len(s)-w) {
			it.left = 0
			return "", Value{}, false
		}
		v.str, s = s[w:w+int(l)], s[w+int(l):]
	default:
		it.left = 0
		return "", Value{}, false
	}
	it.s = s
	return name, v, true
}

// uvarintStr is binary.Uvarint over a string (no conversion, no allocation).
func uvarintStr(s string) (uint64, int) {
	var x uint64
	var sh uint
	for i := 0; i < len(s) && i < binary.MaxVarintLen64; i++ {
		c := s[i]
		if c < 0x80 {
			return x | uint64(c)<<sh, i + 1
		}
		x |= uint64(c&0x7f) << sh
		sh += 7
	}
	return 0, 0
}

// AppendProps appends p's encoding (a single 0 for no properties).
func AppendProps(dst []byte, p Props) []byte {
	if p.enc == "" {
		return append(dst, 0)
	}
	return append(dst, p.enc...)
}

// ReadProps reads a property encoding from the start of b, checking that it
// is canonical; it returns the properties (a copy: b may be reused) and the
// bytes read. Errors wrap ErrBadEvent and give the offset in b.
func ReadProps(b []byte) (Props, int, error) {
	c := cursor{b: b}
	c.props()
	if c.err != nil {
		return Props{}, 0, c.err
	}
	if c.off == 1 {
		return Props{}, 1, nil
	}
	return Props{enc: string(b[:c.off])}, c.off, nil
}
