package msg

import (
	"encoding/binary"
	"errors"
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
