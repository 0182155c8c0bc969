package wire

import (
	"encoding/binary"
	"fmt"
	"math"
	"slices"
	"unsafe"

	"github.com/aerie-mq/aerie/internal/msg"
	"github.com/aerie-mq/aerie/internal/tick"
)

// Decode decodes one frame without its length prefix: the type byte and the
// body. The message is a struct value (msg.Nack, not *msg.Nack), except a
// Knowledge, which is a *msg.Knowledge allocated together with its event
// (one allocation fewer per event at every hop); it shares no memory with
// frame, which the caller may reuse. Counts of zero
// decode as nil maps and slices, an empty payload as a nil slice.
//
// Errors wrap ErrUnknownType or ErrMalformed with the type and the offset in
// frame where decoding failed. Decode never panics.
func Decode(frame []byte) (msg.Msg, error) { return decode(frame, false) }

// DecodeView is Decode for a frame whose memory is never written again:
// the events and publishes it carries view the frame instead of copying
// their bytes (Reader.ViewFrames).
func DecodeView(frame []byte) (msg.Msg, error) { return decode(frame, true) }

func decode(frame []byte, view bool) (msg.Msg, error) {
	if len(frame) == 0 {
		return nil, fmt.Errorf("%w: empty frame (no type byte)", ErrMalformed)
	}
	t := Type(frame[0])
	d := decoder{b: frame, off: 1, typ: t, view: view}
	var m msg.Msg
	// The message families of docs/PROTOCOL.md §4.
	switch t {
	case TypeHello, TypeHeartbeat, TypeGoodbye, TypeAuth, TypeAuthOK:
		m = d.link()
	case TypeKnowledge, TypeKnowledgeRun, TypeNack, TypeAck, TypeAckExpected, TypeResync:
		m = d.gd()
	case TypeSummary, TypeSummaryDelta, TypeSubReq, TypeSubReply, TypeRelay, TypeLinkStatus, TypeRefetch, TypePayloads,
		TypeReplay, TypeReplayData, TypeRaft, TypeRaftChunk, TypeRaftChunkAck, TypeForward:
		var err error
		if m, err = d.subControl(); err != nil {
			return nil, err
		}
	case TypeDCQ, TypeUCA:
		m = d.congestion()
	case TypePublish, TypePublishNoAck, TypePublishRun, TypePublishRunNoAck, TypeSubscribe, TypeUnsubscribe, TypeSubAck, TypeSubConsumed:
		m = d.clientToBroker()
	case TypePubAck, TypePubAckRange, TypePubReject, TypeSubStarted, TypeSubRejected, TypeDelivery, TypeDeliveryRun, TypeGap, TypeProgress:
		m = d.brokerToClient()
	default:
		return nil, fmt.Errorf("%w: 0x%02x at offset 0", ErrUnknownType, uint8(t))
	}
	if d.err == nil && d.off != len(d.b) {
		d.failf("%d trailing bytes", len(d.b)-d.off)
	}
	if d.err != nil {
		return nil, d.err
	}
	return m, nil
}

// notIn fails a frame whose type the family's reader does not know (decode
// dispatches no such frame to it).
func (d *decoder) notIn(family string) msg.Msg {
	d.failf("not a %s message", family)
	return nil
}

// link reads a link-management message (docs/PROTOCOL.md §4 "Link
// management").
func (d *decoder) link() msg.Msg {
	switch d.typ {
	case TypeHello:
		v := d.uvarint()
		if v > math.MaxUint16 {
			d.failf("version %d does not fit 16 bits", v)
		}
		return msg.Hello{Version: uint16(v), Role: msg.Role(d.byte()), ID: d.string(), Incarnation: d.uvarint()}
	case TypeHeartbeat:
		return msg.Heartbeat{}
	case TypeGoodbye:
		return msg.Goodbye{Reason: d.string()}
	case TypeAuth:
		return msg.Auth{User: d.string(), Password: d.string()}
	case TypeAuthOK:
		return msg.AuthOK{User: d.string()}
	}
	return d.notIn("link-management")
}

// gd reads a guaranteed-delivery message (docs/PROTOCOL.md §4 "Broker ↔
// broker: guaranteed delivery").
func (d *decoder) gd() msg.Msg {
	switch d.typ {
	case TypeKnowledge:
		return d.knowledge()
	case TypeKnowledgeRun:
		return d.knowledgeRun()
	case TypeNack:
		return msg.Nack{Pubend: msg.PubendID(d.string()), Start: d.tick(), End: d.tick()}
	case TypeAck:
		return d.ack()
	case TypeAckExpected:
		return msg.AckExpected{Pubend: msg.PubendID(d.string()), T: d.tick()}
	case TypeResync:
		return msg.Resync{Pubend: msg.PubendID(d.string()), Upto: d.tick()}
	}
	return d.notIn("guaranteed-delivery")
}

// subControl reads a subscription-control message, or one of the cell's
// messages and the payload and replay requests that §4 "Broker ↔ broker:
// subscription control" lists with them (docs/PROTOCOL.md). The error is
// that of a relayed or forwarded message.
func (d *decoder) subControl() (msg.Msg, error) {
	switch d.typ {
	case TypeSummary:
		return d.summary(), nil
	case TypeSummaryDelta:
		return msg.SummaryDelta{Seq: d.uvarint(), All: d.bool(), Add: d.clauses(), Remove: d.clauses()}, nil
	case TypeSubReq:
		return msg.SubReq{Pubend: msg.PubendID(d.string()), Sub: msg.SubID(d.string()), Path: d.path()}, nil
	case TypeSubReply:
		return msg.SubReply{Pubend: msg.PubendID(d.string()), Sub: msg.SubID(d.string()), Start: d.tick(), Path: d.path()}, nil
	case TypeRelay:
		return d.relay()
	case TypeLinkStatus:
		return msg.LinkStatus{Unreachable: d.path()}, nil
	case TypeRefetch:
		return msg.Refetch{Pubend: msg.PubendID(d.string()), Ranges: d.ranges(), Path: d.path()}, nil
	case TypePayloads:
		return d.payloads(), nil
	case TypeReplay:
		return msg.Replay{Pubend: msg.PubendID(d.string()), Sub: msg.SubID(d.string()), From: d.tick(), To: d.tick(),
			Clauses: d.clauses(), Path: d.path()}, nil
	case TypeReplayData:
		return d.replayData(), nil
	case TypeRaft:
		// A copy: the member keeps entries it is handed, the frame is
		// reused by the reader.
		return msg.Raft{Data: slices.Clone(d.raw())}, nil
	case TypeRaftChunk:
		return d.raftChunk(), nil
	case TypeRaftChunkAck:
		return msg.RaftChunkAck{From: d.uvarint(), To: d.uvarint(), Seq: d.uvarint(), Next: d.uvarint()}, nil
	case TypeForward:
		return d.forward()
	}
	return d.notIn("subscription-control"), nil
}

func (d *decoder) summary() msg.Summary {
	s := msg.Summary{All: d.bool()}
	if n := d.count(2, "clauses"); n > 0 {
		s.Patterns = make([]string, n)
		s.Selectors = make([]string, n)
		any := false
		for i := range s.Patterns {
			s.Patterns[i] = d.string()
			s.Selectors[i] = d.string()
			any = any || s.Selectors[i] != ""
		}
		if !any {
			s.Selectors = nil // the pattern-only form, as most summaries are
		}
	}
	return s
}

// relay reads a Relay and the GD message it carries; the error is the
// carried message's.
func (d *decoder) relay() (msg.Msg, error) {
	to := msg.NodeID(d.string())
	if d.err != nil {
		return nil, nil
	}
	inner := d.b[d.off:]
	if len(inner) == 0 || Type(inner[0]) < TypeKnowledge || Type(inner[0]) > TypeSubReply {
		d.failf("relayed message must be a broker-to-broker GD message (0x10–0x16)")
		return nil, nil
	}
	im, err := decode(inner, d.view)
	if err != nil {
		return nil, fmt.Errorf("%w (inside Relay to %s, from offset %d)", err, to, d.off)
	}
	d.off = len(d.b)
	return msg.Relay{To: to, Msg: im}, nil
}

// forward reads a Forward and the message it carries; the error is the
// carried message's.
func (d *decoder) forward() (msg.Msg, error) {
	client := d.uvarint()
	if d.err != nil {
		return nil, nil
	}
	inner := d.b[d.off:]
	if len(inner) == 0 {
		d.failf("forwarded message missing")
		return nil, nil
	}
	switch Type(inner[0]) {
	case TypePublish, TypePubAck, TypePubAckRange, TypePubReject, TypeGoodbye:
	default:
		d.failf("forwarded message must be a Publish, PubAck, PubAckRange, PubReject or Goodbye, not %v", Type(inner[0]))
		return nil, nil
	}
	im, err := decode(inner, d.view)
	if err != nil {
		return nil, fmt.Errorf("%w (inside Forward for client %d, from offset %d)", err, client, d.off)
	}
	d.off = len(d.b)
	return msg.Forward{Client: client, Msg: im}, nil
}

func (d *decoder) payloads() msg.Payloads {
	p := msg.Payloads{Pubend: msg.PubendID(d.string()), Ranges: d.ranges(), Final: d.tick()}
	if n := d.count(8, "events"); n > 0 {
		p.Events = make([]*msg.Event, n)
		for i := range p.Events {
			if p.Events[i] = d.event(); p.Events[i] == nil {
				break
			}
		}
	}
	p.Path = d.path()
	return p
}

// congestion reads a congestion-control message (docs/PROTOCOL.md §4
// "Broker ↔ broker: congestion control").
func (d *decoder) congestion() msg.Msg {
	switch d.typ {
	case TypeDCQ:
		return msg.DCQ{Pubend: msg.PubendID(d.string()), Seq: d.uvarint(), Position: d.tick()}
	case TypeUCA:
		return msg.UCA{Pubend: msg.PubendID(d.string()), Seq: d.uvarint(), MinRec: d.rate(), MinNonRec: d.rate()}
	}
	return d.notIn("congestion-control")
}

// clientToBroker reads a message of a client to its broker
// (docs/PROTOCOL.md §4 "Client → broker").
func (d *decoder) clientToBroker() msg.Msg {
	switch d.typ {
	case TypePublish, TypePublishNoAck:
		return d.publish()
	case TypePublishRun, TypePublishRunNoAck:
		return d.publishRun(d.typ == TypePublishRunNoAck)
	case TypeSubscribe:
		return d.subscribe()
	case TypeUnsubscribe:
		return msg.Unsubscribe{Sub: msg.SubID(d.string())}
	case TypeSubAck:
		return msg.SubAck{Sub: msg.SubID(d.string()), Token: d.token()}
	case TypeSubConsumed:
		return msg.SubConsumed{Sub: msg.SubID(d.string()), Token: d.token()}
	}
	return d.notIn("client-to-broker")
}

// publish reads a Publish or PublishNoAck body.
func (d *decoder) publish() msg.Msg {
	read := msg.ReadPublish
	if d.view {
		read = msg.ViewPublish
	}
	p, n, err := read(d.b[d.off:])
	if err != nil {
		d.inner(err)
		return nil
	}
	d.off += n
	p.NoAck = d.typ == TypePublishNoAck
	return p
}

// brokerToClient reads a message of a broker to its client
// (docs/PROTOCOL.md §4 "Broker → client").
func (d *decoder) brokerToClient() msg.Msg {
	switch d.typ {
	case TypePubAck:
		return msg.PubAck{Pubend: msg.PubendID(d.string()), Publisher: d.string(), Seq: d.uvarint(), Tick: d.tick(), Duplicate: d.bool()}
	case TypePubAckRange:
		return d.pubAckRange()
	case TypePubReject:
		return msg.PubReject{Publisher: d.string(), Seq: d.uvarint(), Reason: d.string()}
	case TypeSubStarted:
		return msg.SubStarted{Sub: msg.SubID(d.string()), Token: d.token()}
	case TypeSubRejected:
		return msg.SubRejected{Sub: msg.SubID(d.string()), Reason: d.string()}
	case TypeDelivery:
		return d.delivery()
	case TypeDeliveryRun:
		return d.deliveryRun()
	case TypeGap:
		return msg.Gap{Sub: msg.SubID(d.string()), Pubend: msg.PubendID(d.string()), From: d.tick(), To: d.tick()}
	case TypeProgress:
		return msg.Progress{Sub: msg.SubID(d.string()), Token: d.token()}
	}
	return d.notIn("broker-to-client")
}

// decoder reads fields from b at off. After the first failure it records
// the error and every read returns a zero value.
type decoder struct {
	b   []byte
	off int
	typ Type
	err error
	// view: b is write-once memory; events and publishes view it.
	view bool
}

func (d *decoder) failf(format string, args ...any) {
	if d.err == nil {
		d.err = fmt.Errorf("%w: %v at offset %d: %s", ErrMalformed, d.typ, d.off, fmt.Sprintf(format, args...))
	}
	d.off = len(d.b)
}

func (d *decoder) rest() int { return len(d.b) - d.off }

func (d *decoder) byte() byte {
	if d.err != nil {
		return 0
	}
	if d.rest() < 1 {
		d.failf("truncated")
		return 0
	}
	c := d.b[d.off]
	d.off++
	return c
}

func (d *decoder) bool() bool {
	switch c := d.byte(); c {
	case 0:
		return false
	case 1:
		return true
	default:
		d.failf("bool byte %d (want 0 or 1)", c)
		return false
	}
}

// uvarint reads a minimal-length unsigned varint (msg.Uvarint: the rule of
// the event encoding, for every integer of every frame).
func (d *decoder) uvarint() uint64 {
	if d.err != nil {
		return 0
	}
	v, n, why := msg.Uvarint(d.b[d.off:])
	if why != "" {
		d.failf("%s", why)
		return 0
	}
	d.off += n
	return v
}

func (d *decoder) tick() tick.Tick { return tick.Tick(d.uvarint()) }

// rate reads a UCA rate (appendRate): 0 is +Inf, v is (v-1)/1000.
func (d *decoder) rate() float64 {
	v := d.uvarint()
	switch {
	case d.err != nil:
		return 0
	case v == 0:
		return math.Inf(1)
	case v-1 > maxRate*1000:
		d.failf("UCA rate %d/1000 above %g", v-1, float64(maxRate))
		return 0
	}
	return float64(v-1) / 1000
}

// ack reads an Ack: the short form (pubend, t) is what every sender wrote
// before the release values existed and what a network without durable
// subscribers still sends: released = delivered = t. The long form adds
// t − delivered and delivered − released, so that released <= delivered <=
// t holds for everything that decodes; a long form whose two differences
// are both zero is not canonical (the short form says it) and is refused.
// From version 19 the long form may end with the unvouched top of t
// (msg.Ack.Unvouched), present only when it is not zero.
func (d *decoder) ack() msg.Ack {
	a := msg.Ack{Pubend: msg.PubendID(d.string()), T: d.tick()}
	a.Released, a.Delivered = a.T, a.T
	if d.err != nil || d.off == len(d.b) {
		return a
	}
	behind, held := d.tick(), d.tick()
	var unvouched tick.Tick
	long := d.off < len(d.b) // version 19: the unvouched top of t
	if long {
		unvouched = d.tick()
	}
	switch {
	case d.err != nil:
	case behind == 0 && held == 0 && !long:
		d.failf("release values equal to t must use the short form")
	case long && unvouched == 0:
		d.failf("an unvouched count of 0 must be left out")
	case behind > a.T || held > a.T-behind:
		d.failf("release values below tick 0 (t %d, delivered t−%d, released delivered−%d)", a.T, behind, held)
	case unvouched > a.T:
		d.failf("unvouched %d above t %d", unvouched, a.T)
	default:
		a.Delivered = a.T - behind
		a.Released = a.Delivered - held
		a.Unvouched = unvouched
	}
	return a
}

// subscribe reads a Subscribe: the short form (sub, pattern, selector) is
// what every client wrote before durable subscriptions and what a
// non-durable subscription without a start token still sends. The long form
// adds durable and from; a long form with durable 0 and an empty token is
// not canonical (the short form says it) and is refused.
func (d *decoder) subscribe() msg.Subscribe {
	s := msg.Subscribe{Sub: msg.SubID(d.string()), Pattern: d.string(), Selector: d.string()}
	if d.err != nil || d.off == len(d.b) {
		return s
	}
	s.Durable = d.bool()
	s.From = d.token()
	if d.err == nil && d.off < len(d.b) {
		switch o := d.b[d.off]; o {
		case orderTotal:
			d.off++
			s.TotalOrder = true
		case optionGroup:
			d.off++
			s.Group = d.string()
			if d.err == nil && s.Group == "" {
				d.failf("a group subscription names its group")
			}
		default:
			d.failf("subscription option %d (want %d, total order, %d, a group, or nothing)", o, orderTotal, optionGroup)
			return s
		}
	}
	if d.err == nil && !s.Durable && len(s.From) == 0 && !s.TotalOrder && s.Group == "" {
		d.failf("a non-durable subscription without a start token must use the short form")
	}
	return s
}

// orderTotal is the Subscribe long form's optional option byte: uniform
// total order across pubends (version 9).
const orderTotal = 1

// optionGroup, in the same place, is followed by a group name: the
// subscriber is a member of that consumer group (version 20).
const optionGroup = 2

// replayData reads a ReplayData body; a present gap must be a non-empty
// range other than [0, 0] (which is how "no gap" reads in the struct).
func (d *decoder) replayData() msg.ReplayData {
	r := msg.ReplayData{Pubend: msg.PubendID(d.string()), Sub: msg.SubID(d.string()), From: d.tick(), To: d.tick()}
	if n := d.count(8, "events"); n > 0 {
		r.Events = make([]*msg.Event, n)
		for i := range r.Events {
			if r.Events[i] = d.event(); r.Events[i] == nil {
				break
			}
		}
	}
	if d.bool() {
		r.Gap = tick.Range{Lo: d.tick(), Hi: d.tick()}
		switch {
		case d.err != nil:
		case r.Gap == (tick.Range{}):
			d.failf("gap [0, 0] present (absent is written 0)")
		case r.Gap.Lo > r.Gap.Hi:
			d.failf("gap lo %d above hi %d", r.Gap.Lo, r.Gap.Hi)
		}
	}
	r.Path = d.path()
	if d.err != nil {
		return msg.ReplayData{}
	}
	return r
}

// raftChunk reads a RaftChunk: its data is a copy (the member stages it
// after the reader reused the frame), never empty.
func (d *decoder) raftChunk() msg.RaftChunk {
	c := msg.RaftChunk{From: d.uvarint(), To: d.uvarint(), Seq: d.uvarint(), Term: d.uvarint(),
		Index: d.uvarint(), Offset: d.uvarint(), Last: d.bool(), CRC: d.u32()}
	data := d.raw()
	switch {
	case d.err != nil:
		return msg.RaftChunk{}
	case len(data) == 0:
		d.failf("empty chunk")
	}
	c.Data = slices.Clone(data)
	return c
}

// u32 reads a little-endian uint32.
func (d *decoder) u32() uint32 {
	if d.err != nil {
		return 0
	}
	if d.rest() < 4 {
		d.failf("truncated")
		return 0
	}
	v := binary.LittleEndian.Uint32(d.b[d.off:])
	d.off += 4
	return v
}

// raw reads a length-prefixed byte string without copying it.
func (d *decoder) raw() []byte {
	if d.err != nil {
		return nil
	}
	s, n, why := msg.Field(d.b[d.off:])
	if why != "" {
		d.failf("%s in frame", why)
		return nil
	}
	d.off += n
	return s
}

// string reads a string field: a copy, or, when the frame is write-once
// memory (DecodeView), a view of it (no allocation; it pins only its own
// frame, as the events in it do).
func (d *decoder) string() string {
	b := d.raw()
	if d.view && len(b) > 0 {
		return unsafe.String(&b[0], len(b))
	}
	return string(b)
}

// count reads an element count whose elements take at least min bytes each,
// refusing counts the rest of the frame cannot hold: allocation stays
// bounded by the frame.
func (d *decoder) count(min int, what string) int {
	n := d.uvarint()
	if d.err != nil {
		return 0
	}
	if n > uint64(d.rest()/min) {
		d.failf("%d %s cannot fit in %d bytes", n, what, d.rest())
		return 0
	}
	return int(n)
}

// pubAckRange reads a PubAckRange (appendPubAckRange): n ticks, the
// first whole and each later one as its distance from the one before.
func (d *decoder) pubAckRange() msg.Msg {
	r := msg.PubAckRange{Pubend: msg.PubendID(d.string()), Publisher: d.string(), Seq: d.uvarint()}
	n := d.count(1, "acks") // the first tick and every distance take a byte at least
	if d.err != nil {
		return nil
	}
	if n == 0 || r.Seq+uint64(n)-1 < r.Seq {
		d.failf("%d acks from seq %d", n, r.Seq)
		return nil
	}
	r.Ticks = make([]tick.Tick, n)
	r.Ticks[0] = d.tick()
	for i := 1; i < n && d.err == nil; i++ {
		delta := d.uvarint()
		t := r.Ticks[i-1] + tick.Tick(delta)
		if delta == 0 || t < r.Ticks[i-1] {
			d.failf("tick distance %d after tick %d", delta, r.Ticks[i-1])
			return nil
		}
		r.Ticks[i] = t
	}
	return r
}

// clauses reads count + (pattern, selector) pairs.
func (d *decoder) clauses() []msg.Clause {
	n := d.count(2, "clauses")
	if n == 0 {
		return nil
	}
	cs := make([]msg.Clause, n)
	for i := range cs {
		cs[i] = msg.Clause{Pattern: d.string(), Selector: d.string()}
	}
	return cs
}

// ranges reads count + (lo, hi) pairs; each must have lo <= hi.
func (d *decoder) ranges() []tick.Range {
	n := d.count(2, "ranges")
	if n == 0 {
		return nil
	}
	rs := make([]tick.Range, n)
	for i := range rs {
		rs[i] = tick.Range{Lo: d.tick(), Hi: d.tick()}
		if d.err == nil && rs[i].Lo > rs[i].Hi {
			d.failf("range %d has lo %d above hi %d", i, rs[i].Lo, rs[i].Hi)
		}
	}
	if d.err != nil {
		return nil
	}
	return rs
}

func (d *decoder) path() []msg.NodeID {
	n := d.count(1, "path entries")
	if n == 0 {
		return nil
	}
	p := make([]msg.NodeID, n)
	for i := range p {
		p[i] = msg.NodeID(d.string())
	}
	if d.err != nil {
		return nil
	}
	return p
}

// mapHint caps the initial size of a decoded map: entries are added as they
// decode, so a lying count cannot make a large allocation up front.
func mapHint(n int) int { return min(n, 16) }

func (d *decoder) token() msg.Token {
	n := d.count(2, "token entries")
	if n == 0 {
		return nil
	}
	t := make(msg.Token, mapHint(n))
	var prev []byte
	for i := 0; i < n && d.err == nil; i++ {
		p := d.raw()
		if i > 0 && string(p) <= string(prev) {
			d.failf("token pubend %q not after %q", p, prev)
			break
		}
		prev = p
		t[msg.PubendID(p)] = d.tick()
	}
	if d.err != nil {
		return nil
	}
	return t
}

// inner records an error of msg's event codec, whose offsets count from d.off.
func (d *decoder) inner(err error) {
	if d.err == nil {
		d.err = fmt.Errorf("%w: %v from offset %d: %w", ErrMalformed, d.typ, d.off, err)
	}
	d.off = len(d.b)
}

// knowledgeFrame holds a decoded Knowledge and its event in one allocation.
// deliveryFrame is a decoded Delivery and its event, one allocation.
type deliveryFrame struct {
	d  msg.Delivery
	ev msg.Event
}

// delivery reads a Delivery body into a *msg.Delivery allocated with its
// event (msg.AsDelivery reads either form).
func (d *decoder) delivery() msg.Msg {
	f := &deliveryFrame{}
	f.d.Sub = msg.SubID(d.string())
	if d.bool() && d.err == nil {
		if !d.eventInto(&f.ev) {
			return nil
		}
		f.d.Event = &f.ev
	}
	return &f.d
}

// publishRun reads a PublishRun body (appendPublishRun): its publishes in
// one allocation, each read as a Publish frame's body is (a copy, or a
// view of the frame when it is write-once memory).
func (d *decoder) publishRun(noAck bool) msg.Msg {
	n := d.count(6, "publishes") // a publish's encoding takes 6 bytes at least
	if d.err != nil {
		return nil
	}
	if n == 0 {
		d.failf("run of no publishes")
		return nil
	}
	read := msg.ReadPublish
	if d.view {
		read = msg.ViewPublish
	}
	r := &msg.PublishRun{Publishes: make([]msg.Publish, n)}
	for i := range r.Publishes {
		p, k, err := read(d.b[d.off:])
		if err != nil {
			d.inner(fmt.Errorf("publish %d of %d: %w", i+1, n, err))
			return nil
		}
		d.off += k
		p.NoAck = noAck
		r.Publishes[i] = p
	}
	return r
}

// deliveryRun reads a DeliveryRun body (appendDeliveryRun): its events in
// one allocation, each viewing the frame or copied as eventInto does, so
// that a run costs the same few allocations whatever its length.
func (d *decoder) deliveryRun() msg.Msg {
	r := &msg.DeliveryRun{Sub: msg.SubID(d.string())}
	n := d.count(4, "events") // an event's encoding takes 4 bytes at least
	if d.err != nil {
		return nil
	}
	if n == 0 {
		d.failf("run of no events")
		return nil
	}
	evs := make([]msg.Event, n)
	r.Events = make([]*msg.Event, n)
	for i := range evs {
		if !d.eventInto(&evs[i]) {
			return nil
		}
		r.Events[i] = &evs[i]
	}
	return r
}

// eventInto reads an event into ev: a copy of its encoding, or a view of
// the frame when it is write-once memory (DecodeView).
func (d *decoder) eventInto(ev *msg.Event) bool {
	if d.err != nil {
		return false
	}
	read := msg.ReadEventTo
	if d.view {
		read = msg.ViewEventTo
	}
	n, err := read(ev, d.b[d.off:])
	if err != nil {
		d.inner(err)
		return false
	}
	d.off += n
	return true
}

type knowledgeFrame struct {
	k  msg.Knowledge
	ev msg.Event
}

// knowledge reads a Knowledge body. Its pubend shares the event's string
// when they are equal (they are, but for relayed oddities).
func (d *decoder) knowledge() *msg.Knowledge {
	f := &knowledgeFrame{}
	k := &f.k
	pubend := d.raw()
	k.Final = d.tick()
	k.Start = d.tick()
	k.End = d.tick()
	k.VTick = d.tick()
	k.Retrans = d.bool()
	if d.bool() && d.err == nil {
		if !d.eventInto(&f.ev) {
			return nil
		}
		k.Event = &f.ev
	}
	k.Unvouched = d.unvouched(k.Final)
	if k.Event != nil && string(pubend) == string(k.Event.Pubend) {
		k.Pubend = k.Event.Pubend
	} else {
		k.Pubend = msg.PubendID(pubend)
	}
	return k
}

// knowledgeRun reads a KnowledgeRun body (appendKnowledgeRun): its events
// in one allocation, each viewing the frame or copied as eventInto does.
func (d *decoder) knowledgeRun() msg.Msg {
	r := &msg.KnowledgeRun{Pubend: msg.PubendID(d.string()), Final: d.tick(), Start: d.tick(), End: d.tick(), Retrans: d.bool()}
	n := d.count(4, "events") // an event's encoding takes 4 bytes at least
	if d.err != nil {
		return nil
	}
	if r.Start > r.End {
		d.failf("range [%d, %d]", r.Start, r.End)
		return nil
	}
	if n == 0 {
		r.Unvouched = d.unvouched(r.Final)
		return r
	}
	evs := make([]msg.Event, n)
	r.Events = make([]*msg.Event, n)
	prev := r.Start - 1
	for i := range evs {
		if !d.eventInto(&evs[i]) {
			return nil
		}
		if t := evs[i].Tick; t <= prev || t > r.End {
			d.failf("event at tick %d after %d in [%d, %d]", t, prev, r.Start, r.End)
			return nil
		}
		prev = evs[i].Tick
		r.Events[i] = &evs[i]
	}
	r.Unvouched = d.unvouched(r.Final)
	return r
}

// unvouched reads the optional end of a Knowledge or KnowledgeRun of
// version 19 (appendUnvouched): present only when not zero, never above
// the message's final prefix.
func (d *decoder) unvouched(final tick.Tick) tick.Tick {
	if d.err != nil || d.off == len(d.b) {
		return 0
	}
	u := d.tick()
	switch {
	case d.err != nil:
		return 0
	case u == 0:
		d.failf("an unvouched count of 0 must be left out")
	case u > final:
		d.failf("unvouched %d above the final prefix %d", u, final)
	}
	return u
}

// optEvent reads a presence byte and, when 1, an event.
func (d *decoder) optEvent() *msg.Event {
	if !d.bool() {
		return nil
	}
	return d.event()
}

// event reads an event (eventInto) into an allocation of its own.
func (d *decoder) event() *msg.Event {
	ev := new(msg.Event)
	if !d.eventInto(ev) {
		return nil
	}
	return ev
}
