package msg

import (
	"encoding/binary"
)

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
