package msg

import "github.com/aerie-mq/aerie/internal/tick"

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
