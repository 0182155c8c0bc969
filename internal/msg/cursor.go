package msg

import (
	"encoding/binary"
	"fmt"
)

// cursor reads canonical fields from b at off. After the first failure it
// records the error, and every read returns a zero value.
type cursor struct {
	b   []byte
	off int
	err error
}

func (c *cursor) failf(format string, args ...any) {
	if c.err == nil {
		c.err = fmt.Errorf("%w: at offset %d: %s", ErrBadEvent, c.off, fmt.Sprintf(format, args...))
	}
	c.off = len(c.b)
}

func (c *cursor) byte() byte {
	if c.err != nil {
		return 0
	}
	if c.off >= len(c.b) {
		c.failf("truncated")
		return 0
	}
	v := c.b[c.off]
	c.off++
	return v
}

// uvarint reads a minimal-length unsigned varint.
func (c *cursor) uvarint() uint64 {
	if c.err != nil {
		return 0
	}
	v, n, why := Uvarint(c.b[c.off:])
	if why != "" {
		c.failf("%s", why)
		return 0
	}
	c.off += n
	return v
}

// raw reads a length-prefixed byte string without copying it.
func (c *cursor) raw() []byte {
	if c.err != nil {
		return nil
	}
	s, n, why := Field(c.b[c.off:])
	if why != "" {
		c.failf("%s", why)
		return nil
	}
	c.off += n
	return s
}

// Uvarint reads a minimal-length unsigned varint from the start of b, the
// rule for every integer of the event and wire encodings; why says what is
// wrong when b does not start with one.
func Uvarint(b []byte) (v uint64, n int, why string) {
	v, n = binary.Uvarint(b)
	switch {
	case n == 0:
		return 0, 0, "truncated varint"
	case n < 0:
		return 0, 0, "varint overflows 64 bits"
	case n > 1 && b[n-1] == 0:
		return 0, 0, "overlong varint"
	}
	return v, n, ""
}

// Field reads a length-prefixed byte string from the start of b without
// copying it; n counts the prefix and the bytes.
func Field(b []byte) (s []byte, n int, why string) {
	l, w, why := Uvarint(b)
	if why != "" {
		return nil, 0, why
	}
	if l > uint64(len(b)-w) {
		return nil, 0, fmt.Sprintf("string of %d bytes but only %d left", l, len(b)-w)
	}
	return b[w : w+int(l)], w + int(l), ""
}

// span reads a length-prefixed byte string and returns where it lies.
func (c *cursor) span() span {
	r := c.raw()
	return span{c.off - len(r), c.off}
}

// str reads a string as a copy.
func (c *cursor) str() string { return string(c.raw()) }

// props checks a property encoding: at least three bytes a property, names
// strictly increasing, known types, canonical values.
func (c *cursor) props() {
	n := c.uvarint()
	if c.err != nil {
		return
	}
	if n > uint64(len(c.b)-c.off)/3 {
		c.failf("%d properties cannot fit in %d bytes", n, len(c.b)-c.off)
		return
	}
	var prev []byte
	for i := uint64(0); i < n && c.err == nil; i++ {
		k := c.raw()
		if i > 0 && string(k) <= string(prev) {
			c.failf("property %q not after %q", k, prev)
			return
		}
		prev = k
		switch t := PropKind(c.byte()); t {
		case PropInt:
			c.uvarint()
		case PropFloat:
			if len(c.b)-c.off < 8 {
				c.failf("truncated float64")
				return
			}
			c.off += 8
		case PropBool:
			if v := c.byte(); v > 1 {
				c.failf("bool byte %d (want 0 or 1)", v)
			}
		case PropString:
			c.raw()
		default:
			if c.err == nil {
				c.failf("property %q has unknown type %d", k, t)
			}
		}
	}
}
