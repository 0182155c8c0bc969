package msg

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"
	"unsafe"

	"github.com/aerie-mq/aerie/internal/tick"
)

// The one encoding of an event (docs/PROTOCOL.md §2, "Event"). The PHB
// builds it once, when it assigns the tick (NewEvent); the event log record,
// the Knowledge, Payloads and Delivery frames all carry these bytes as they
// are, and every broker downstream keeps the bytes it received: nobody
// re-encodes an event. Integers are unsigned varints of minimal length
// unless noted; strings and byte strings are a varint length and the bytes:
//
//	event: pubend | tick | publisher | seq | topic | props | payload
//	props: nprops | (name | ptype | value)*     names strictly increasing (bytewise)
//	ptype: 0x01 int64 (zigzag varint) | 0x02 float64 (8 bytes LE) |
//	       0x03 bool (one byte, 0 or 1) | 0x04 string
//
// The encoding is canonical: ReadEvent and ReadProps refuse everything the
// encoder never writes (overlong varints, bools other than 0 and 1, unsorted
// or repeated names, unknown types), so an event has exactly one encoding and
// Event.Equal can compare encodings.

// ErrBadEvent reports an event or property encoding that does not decode.
var ErrBadEvent = errors.New("msg: bad event encoding")

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

// NewEvent builds an event and its encoding, once: every field of the
// result shares the one buffer, which nothing writes again (events are
// immutable; Payload must not be modified). Two allocations, the Event and
// its bytes; a PHB carves both from blocks instead (EventBlocks.NewEvent).
func NewEvent(pubend PubendID, t tick.Tick, publisher string, seq uint64, topic string, props Props, payload []byte) *Event {
	ev := new(Event)
	n := eventBound(pubend, publisher, topic, props, payload)
	buildEvent(ev, make([]byte, 0, n), pubend, t, publisher, seq, topic, props, payload)
	return ev
}

// eventBound is an upper bound of the encoding's length: its strings and
// six varints at their longest.
func eventBound(pubend PubendID, publisher, topic string, props Props, payload []byte) int {
	return len(pubend) + len(publisher) + len(topic) + len(props.enc) + len(payload) + 6*binary.MaxVarintLen64
}

// buildEvent writes the event's encoding into b (empty, with room for
// eventBound bytes, so that nothing reallocates) and fills ev with views of
// it; it returns the bytes written.
func buildEvent(ev *Event, b []byte, pubend PubendID, t tick.Tick, publisher string, seq uint64, topic string, props Props, payload []byte) int {
	// The layout is known as the bytes are written: nothing to parse back
	// (props is canonical by construction: PropsOf or a checked read).
	l := eventLayout{t: uint64(t), seq: seq}
	b, l.pubend = appendSpan(b, string(pubend))
	b = binary.AppendUvarint(b, uint64(t))
	b, l.publisher = appendSpan(b, publisher)
	b = binary.AppendUvarint(b, seq)
	b, l.topic = appendSpan(b, topic)
	if props.enc != "" {
		l.props = span{len(b), len(b) + len(props.enc)}
	}
	b = AppendProps(b, props)
	b, l.payload = appendSpan(b, unsafeString(payload))
	l.end = len(b)
	l.build(ev, b)
	return l.end
}

// EventBlocks carves the events a PHB builds, Event structs and encodings
// alike, from blocks shared by the events after them, one allocation for
// many events where NewEvent makes two per event (they were 2 of the 2.3
// allocations per event of a PHB's publish path, and with them the
// garbage collector's work per event). The zero value is ready to use; it
// is not safe for concurrent use.
//
// What a block pins: a block stays in memory while any event carved from
// it does, and the Events keep their encodings' blocks. One EventBlocks
// serves one pubend (stream.Pubend), whose events are built in tick order
// and let go in tick order too (acked in best-effort mode at once; in GD
// mode made durable, then trimmed from the caches from the oldest tick), so
// what is held beyond the live events is the part of the oldest block whose
// events are gone and the unused rest of the newest: two blocks per pubend
// at most, up to 40 KiB. Blocks start small (2 KiB of bytes, 8 Events)
// and double up to their largest as a pubend publishes, so a pubend that
// published a few events pins a few KiB, not 40; an event too large for a
// fair share of a block gets memory of its own, as from NewEvent.
type EventBlocks struct {
	enc    []byte  // the current block of encodings: bytes from len on are free
	events []Event // the current block of Events: from len on are free
}

// SmallAllocMax is the largest allocation the Go runtime serves from its
// size classes (32 KiB less its 8-byte malloc header): a larger one is a
// large object, given pages of its own, zeroed and freed page by page,
// which costs several times as much per byte. Blocks and frames that are
// allocated per burst of events stay within it.
const SmallAllocMax = 32<<10 - 8

const (
	encBlockMin   = 2 << 10
	encBlockMax   = SmallAllocMax
	encOwnMin     = encBlockMax / 8
	eventBlockMin = 8
	eventBlockMax = 64 // 8 KiB of 128-byte Events
)

// NewEvent is msg.NewEvent, the result carved from the blocks.
func (k *EventBlocks) NewEvent(pubend PubendID, t tick.Tick, publisher string, seq uint64, topic string, props Props, payload []byte) *Event {
	if len(k.events) == cap(k.events) {
		k.events = make([]Event, 0, min(max(2*cap(k.events), eventBlockMin), eventBlockMax))
	}
	k.events = k.events[:len(k.events)+1]
	ev := &k.events[len(k.events)-1]
	n := eventBound(pubend, publisher, topic, props, payload)
	if n > encOwnMin {
		buildEvent(ev, make([]byte, 0, n), pubend, t, publisher, seq, topic, props, payload)
		return ev
	}
	if cap(k.enc)-len(k.enc) < n {
		// The rest of the block (under encOwnMin bytes, an eighth of the
		// largest) is left unused.
		k.enc = make([]byte, 0, max(min(max(2*cap(k.enc), encBlockMin), encBlockMax), n))
	}
	at := len(k.enc)
	// Capped at the bound: the encoding cannot run into the bytes after
	// it, which the next event takes.
	used := buildEvent(ev, k.enc[at:at:at+n], pubend, t, publisher, seq, topic, props, payload)
	k.enc = k.enc[:at+used]
	return ev
}

// appendSpan appends s as a str field and returns where its bytes lie.
func appendSpan(b []byte, s string) ([]byte, span) {
	b = binary.AppendUvarint(b, uint64(len(s)))
	lo := len(b)
	b = append(b, s...)
	return b, span{lo, len(b)}
}

// Encoding is the event's canonical encoding when it was built by NewEvent
// or decoded, nil for an Event written as a literal (AppendEvent encodes
// those field by field). The bytes are shared: do not modify them.
func (e *Event) Encoding() []byte { return e.enc }

// Size is the length of the event's encoding.
func (e *Event) Size() int {
	if e.enc != nil {
		return len(e.enc)
	}
	return len(e.Pubend) + len(e.Publisher) + EventSize(e.Topic, e.Props, e.Payload) + 4*binary.MaxVarintLen64
}

// AppendEvent appends the event's canonical encoding: the bytes it was built
// or received with, copied as they are.
func AppendEvent(dst []byte, e *Event) []byte {
	if e.enc != nil {
		return append(dst, e.enc...)
	}
	dst = appendStr(dst, string(e.Pubend))
	dst = binary.AppendUvarint(dst, uint64(e.Tick))
	dst = appendStr(dst, e.Publisher)
	dst = binary.AppendUvarint(dst, e.Seq)
	dst = appendStr(dst, e.Topic)
	dst = AppendProps(dst, e.Props)
	return appendStr(dst, unsafeString(e.Payload))
}

// ReadEvent reads one event from the start of b, checking that its encoding
// is canonical, and returns it with the number of bytes read. The event owns
// a copy of those bytes (b may be reused); its strings, properties and
// payload are views of that copy: two allocations per event, whatever its
// shape. Errors wrap ErrBadEvent and give the offset in b; ReadEvent never
// panics.
func ReadEvent(b []byte) (*Event, int, error) {
	ev := new(Event)
	n, err := ReadEventTo(ev, b)
	if err != nil {
		return nil, 0, err
	}
	return ev, n, nil
}

// ReadEventTo is ReadEvent into an Event the caller allocated (with the
// message that carries it, say): one allocation, the bytes.
func ReadEventTo(ev *Event, b []byte) (int, error) {
	l, err := parseEvent(b)
	if err != nil {
		return 0, err
	}
	l.build(ev, append(make([]byte, 0, l.end), b[:l.end]...))
	return l.end, nil
}

// ViewEventTo is ReadEventTo without the copy: the event's fields view b
// itself, which must never be written again (a reader's write-once frame
// memory, wire.Reader.ViewFrames). No allocation.
func ViewEventTo(ev *Event, b []byte) (int, error) {
	l, err := parseEvent(b)
	if err != nil {
		return 0, err
	}
	l.build(ev, b[:l.end:l.end])
	return l.end, nil
}

// viewEvent makes an event whose fields are views of enc, which must start
// with one event encoding; it checks that encoding.
func viewEvent(enc []byte) (*Event, int, error) {
	l, err := parseEvent(enc)
	if err != nil {
		return nil, 0, err
	}
	ev := new(Event)
	l.build(ev, enc)
	return ev, l.end, nil
}

// eventLayout is where the fields of one event encoding lie.
type eventLayout struct {
	t, seq                            uint64
	pubend, publisher, topic, payload span
	props                             span // empty for no properties
	end                               int
}

type span struct{ lo, hi int }

// parseEvent finds the fields of the event encoding at the start of b and
// checks that it is canonical. It is run on every event at every broker
// downstream of its PHB and again at the client, so a quick pass comes
// first (parseQuick: no error values, one-byte varints inline); only an
// encoding it refuses is read again by the checking cursor, for the words
// of the error (and the quick pass refuses nothing the cursor accepts:
// FuzzParseQuickAgrees).
func parseEvent(b []byte) (eventLayout, error) {
	if l, ok := parseQuick(b); ok {
		return l, nil
	}
	return parseChecked(b)
}

func parseChecked(b []byte) (eventLayout, error) {
	c := cursor{b: b}
	var l eventLayout
	l.pubend = c.span()
	l.t = c.uvarint()
	l.publisher = c.span()
	l.seq = c.uvarint()
	l.topic = c.span()
	p0 := c.off
	c.props()
	if c.off-p0 > 1 {
		l.props = span{p0, c.off}
	}
	l.payload = c.span()
	if c.err != nil {
		return eventLayout{}, c.err
	}
	l.end = c.off
	return l, nil
}

// parseQuick is parseChecked's checks without its errors: ok false for
// anything the cursor refuses (and, should the two ever differ, the
// cursor's verdict stands: parseEvent asks it then).
func parseQuick(b []byte) (l eventLayout, ok bool) {
	q := quick{b: b}
	l.pubend = q.span()
	l.t = q.uvarint()
	l.publisher = q.span()
	l.seq = q.uvarint()
	l.topic = q.span()
	p0 := q.off
	q.props()
	if q.off-p0 > 1 {
		l.props = span{p0, q.off}
	}
	l.payload = q.span()
	l.end = q.off
	return l, !q.bad
}

// quick reads canonical fields from b at off, as cursor does, recording
// only that something was wrong: bad, after which every read fails.
type quick struct {
	b   []byte
	off int
	bad bool
}

func (q *quick) fail() {
	q.bad = true
	q.off = len(q.b)
}

func (q *quick) uvarint() uint64 {
	if q.off < len(q.b) && q.b[q.off] < 0x80 { // most lengths and counts
		q.off++
		return uint64(q.b[q.off-1])
	}
	v, n, why := Uvarint(q.b[q.off:])
	if why != "" {
		q.fail()
		return 0
	}
	q.off += n
	return v
}

func (q *quick) span() span {
	l := q.uvarint()
	if l > uint64(len(q.b)-q.off) {
		q.fail()
		return span{}
	}
	lo := q.off
	q.off += int(l)
	return span{lo, q.off}
}

func (q *quick) props() {
	n := q.uvarint()
	if q.bad || n > uint64(len(q.b)-q.off)/3 {
		q.fail()
		return
	}
	var prev span
	for i := uint64(0); i < n && !q.bad; i++ {
		k := q.span()
		if i > 0 && string(q.b[k.lo:k.hi]) <= string(q.b[prev.lo:prev.hi]) {
			q.fail()
			return
		}
		prev = k
		if q.off >= len(q.b) {
			q.fail()
			return
		}
		t := PropKind(q.b[q.off])
		q.off++
		switch t {
		case PropInt:
			q.uvarint()
		case PropFloat:
			if len(q.b)-q.off < 8 {
				q.fail()
				return
			}
			q.off += 8
		case PropBool:
			if q.off >= len(q.b) || q.b[q.off] > 1 {
				q.fail()
				return
			}
			q.off++
		case PropString:
			q.span()
		default:
			q.fail()
			return
		}
	}
}

// build fills ev with views of enc, which holds the parsed bytes at the start.
func (l *eventLayout) build(ev *Event, enc []byte) {
	*ev = Event{
		Pubend: PubendID(unsafeString(enc[l.pubend.lo:l.pubend.hi])), Tick: tick.Tick(l.t),
		Publisher: unsafeString(enc[l.publisher.lo:l.publisher.hi]), Seq: l.seq,
		Topic: unsafeString(enc[l.topic.lo:l.topic.hi]),
		Props: Props{enc: unsafeString(enc[l.props.lo:l.props.hi])},
		enc:   enc[:l.end:l.end],
	}
	if l.payload.hi > l.payload.lo {
		ev.Payload = enc[l.payload.lo:l.payload.hi:l.payload.hi]
	}
}

// ReadPublish reads a Publish body (after its frame's type byte) from the
// start of b: pubend | publisher | seq | topic | props | payload, the
// fields of an event but its tick. The result owns one copy of those bytes
// (b may be reused), which its strings, properties and payload view.
// Errors wrap ErrBadEvent and give the offset in b; it never panics.
func ReadPublish(b []byte) (Publish, int, error) { return readPublish(b, false) }

// ViewPublish is ReadPublish without the copy: the publish's fields view b,
// which must never be written again (wire.Reader.ViewFrames).
func ViewPublish(b []byte) (Publish, int, error) { return readPublish(b, true) }

func readPublish(b []byte, view bool) (Publish, int, error) {
	// A quick pass first, as parseEvent does: the PHB reads every publish.
	l, ok := parsePublishQuick(b)
	if !ok {
		var err error
		if l, err = parsePublishChecked(b); err != nil {
			return Publish{}, 0, err
		}
	}
	own := b[:l.end:l.end]
	if !view {
		own = append(make([]byte, 0, l.end), own...)
	}
	p := Publish{Pubend: PubendID(unsafeString(own[l.pubend.lo:l.pubend.hi])), Publisher: unsafeString(own[l.publisher.lo:l.publisher.hi]),
		Seq: l.seq, Topic: unsafeString(own[l.topic.lo:l.topic.hi]), Props: Props{enc: unsafeString(own[l.props.lo:l.props.hi])}}
	if l.payload.hi > l.payload.lo {
		p.Payload = own[l.payload.lo:l.payload.hi:l.payload.hi]
	}
	return p, l.end, nil
}

// parsePublishChecked finds the fields of a Publish body (an event's but
// its tick, which the layout leaves 0) with the checking cursor.
func parsePublishChecked(b []byte) (eventLayout, error) {
	c := cursor{b: b}
	var l eventLayout
	l.pubend, l.publisher = c.span(), c.span()
	l.seq = c.uvarint()
	l.topic = c.span()
	p0 := c.off
	c.props()
	if c.off-p0 > 1 {
		l.props = span{p0, c.off}
	}
	l.payload = c.span()
	if c.err != nil {
		return eventLayout{}, c.err
	}
	l.end = c.off
	return l, nil
}

// parsePublishQuick is parsePublishChecked without errors, as parseQuick
// is parseChecked (FuzzParseQuickAgrees holds the two to one verdict).
func parsePublishQuick(b []byte) (l eventLayout, ok bool) {
	q := quick{b: b}
	l.pubend, l.publisher = q.span(), q.span()
	l.seq = q.uvarint()
	l.topic = q.span()
	p0 := q.off
	q.props()
	if q.off-p0 > 1 {
		l.props = span{p0, q.off}
	}
	l.payload = q.span()
	l.end = q.off
	return l, !q.bad
}

// AppendPublish appends a Publish body (the layout of ReadPublish).
func AppendPublish(dst []byte, p *Publish) []byte {
	dst = appendStr(dst, string(p.Pubend))
	dst = appendStr(dst, p.Publisher)
	dst = binary.AppendUvarint(dst, p.Seq)
	dst = appendStr(dst, p.Topic)
	dst = AppendProps(dst, p.Props)
	return appendStr(dst, unsafeString(p.Payload))
}

// unsafeString views b as a string without copying. Only for bytes nothing
// writes again: an event's own encoding, or a payload being copied out.
func unsafeString(b []byte) string {
	if len(b) == 0 {
		return ""
	}
	return unsafe.String(&b[0], len(b))
}

func appendStr(b []byte, s string) []byte {
	return append(binary.AppendUvarint(b, uint64(len(s))), s...)
}

func b2u8(v bool) byte {
	if v {
		return 1
	}
	return 0
}

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

// EventSize is an upper bound of the bytes an event with these fields
// takes in a log record or a delivery frame, not counting fixed headers.
func EventSize(topic string, props Props, payload []byte) int {
	n := len(topic) + len(payload)
	it := props.Iter()
	for k, v, ok := it.Next(); ok; k, v, ok = it.Next() {
		n += len(k) + 11 + len(v.str) // name length prefix, type byte, up to a 9-byte number
	}
	return n
}
