package wire

import (
	"encoding/binary"
	"fmt"
	"math"
	"slices"

	"github.com/aerie-mq/aerie/internal/msg"
	"github.com/aerie-mq/aerie/internal/tick"
)

// AppendFrame appends the frame of m (length, type, body) to dst. Messages
// are struct values, except that a *msg.Knowledge is accepted as the struct:
// the gd engine sends Knowledge as pointers into a block (one allocation
// per batch, not per message) and Decode returns it as a pointer. Any other
// pointer is an unknown type. On error (an unknown message type, an event
// property of an unsupported type, or a frame over DefaultMaxFrame) dst is
// returned unchanged with the error.
func AppendFrame(dst []byte, m msg.Msg) ([]byte, error) {
	start := len(dst)
	dst = append(dst, 0, 0, 0, 0)
	out, err := appendBody(dst, m)
	if err != nil {
		return dst[:start], err
	}
	n := len(out) - start - 4
	if n > DefaultMaxFrame {
		return out[:start], fmt.Errorf("%w: %v frame of %d bytes, at most %d allowed", ErrFrameTooLarge, typeOfName(m), n, DefaultMaxFrame)
	}
	binary.LittleEndian.PutUint32(out[start:], uint32(n))
	return out, nil
}

func typeOfName(m msg.Msg) string {
	if m == nil {
		return "nil"
	}
	return fmt.Sprintf("%T", m)
}

// appendBody appends m's type byte and body. It dispatches on the message
// family, as docs/PROTOCOL.md §4 groups them.
func appendBody(b []byte, m msg.Msg) ([]byte, error) {
	switch m.(type) {
	case msg.Hello, msg.Heartbeat, msg.Goodbye, msg.Auth, msg.AuthOK:
		return appendLink(b, m)
	case msg.Knowledge, *msg.Knowledge, msg.KnowledgeRun, *msg.KnowledgeRun, msg.Nack, msg.Ack, msg.AckExpected, msg.Resync:
		return appendGD(b, m)
	case msg.Summary, msg.SummaryDelta, msg.SubReq, msg.SubReply, msg.Relay, msg.LinkStatus, msg.Refetch, msg.Payloads,
		msg.Replay, msg.ReplayData, msg.Raft, msg.RaftChunk, msg.RaftChunkAck, msg.Forward:
		return appendSubControl(b, m)
	case msg.DCQ, msg.UCA:
		return appendCongestion(b, m)
	case msg.Publish, *msg.Publish, msg.PublishRun, *msg.PublishRun, msg.Subscribe, msg.Unsubscribe, msg.SubAck, msg.SubConsumed:
		return appendClientToBroker(b, m)
	case msg.PubAck, *msg.PubAck, msg.PubAckRange, *msg.PubAckRange, msg.PubReject, msg.SubStarted, msg.SubRejected,
		msg.Delivery, *msg.Delivery, msg.DeliveryRun, *msg.DeliveryRun, msg.Gap, msg.Progress:
		return appendBrokerToClient(b, m)
	}
	return nil, errCannotEncode(m)
}

func errCannotEncode(m msg.Msg) error {
	return fmt.Errorf("%w: cannot encode %s", ErrUnknownType, typeOfName(m))
}

// appendLink appends a link-management message (docs/PROTOCOL.md §4 "Link
// management").
func appendLink(b []byte, m msg.Msg) ([]byte, error) {
	switch v := m.(type) {
	case msg.Hello:
		b = append(b, byte(TypeHello))
		b = binary.AppendUvarint(b, uint64(v.Version))
		b = append(b, byte(v.Role))
		b = appendString(b, v.ID)
		return binary.AppendUvarint(b, v.Incarnation), nil
	case msg.Heartbeat:
		return append(b, byte(TypeHeartbeat)), nil
	case msg.Goodbye:
		b = append(b, byte(TypeGoodbye))
		return appendString(b, v.Reason), nil
	case msg.Auth:
		b = append(b, byte(TypeAuth))
		b = appendString(b, v.User)
		return appendString(b, v.Password), nil
	case msg.AuthOK:
		b = append(b, byte(TypeAuthOK))
		return appendString(b, v.User), nil
	}
	return nil, errCannotEncode(m)
}

// appendGD appends a guaranteed-delivery message (docs/PROTOCOL.md §4
// "Broker ↔ broker: guaranteed delivery").
func appendGD(b []byte, m msg.Msg) ([]byte, error) {
	switch v := m.(type) {
	case msg.Knowledge:
		return appendKnowledge(b, &v), nil
	case *msg.Knowledge: // the engine's and Decode's form; nil is refused below
		if v != nil {
			return appendKnowledge(b, v), nil
		}
	case msg.KnowledgeRun:
		return appendKnowledgeRun(b, &v)
	case *msg.KnowledgeRun: // the engine's and Decode's form; nil is refused below
		if v != nil {
			return appendKnowledgeRun(b, v)
		}
	case msg.Nack:
		b = append(b, byte(TypeNack))
		b = appendString(b, string(v.Pubend))
		b = appendTick(b, v.Start)
		return appendTick(b, v.End), nil
	case msg.Ack:
		return appendAck(b, v)
	case msg.AckExpected:
		b = append(b, byte(TypeAckExpected))
		b = appendString(b, string(v.Pubend))
		return appendTick(b, v.T), nil
	case msg.Resync:
		b = append(b, byte(TypeResync))
		b = appendString(b, string(v.Pubend))
		return appendTick(b, v.Upto), nil
	}
	return nil, errCannotEncode(m)
}

func appendAck(b []byte, v msg.Ack) ([]byte, error) {
	if v.Released > v.Delivered || v.Delivered > v.T || v.Unvouched > v.T {
		return nil, fmt.Errorf("%w: Ack{%s} needs released %d <= delivered %d <= t %d and unvouched %d <= t", ErrMalformed, v.Pubend, v.Released, v.Delivered, v.T, v.Unvouched)
	}
	b = append(b, byte(TypeAck))
	b = appendString(b, string(v.Pubend))
	b = appendTick(b, v.T)
	if v.Released == v.T && v.Delivered == v.T && v.Unvouched == 0 {
		return b, nil // the short form (see decoder.ack)
	}
	b = appendTick(b, v.T-v.Delivered)
	b = appendTick(b, v.Delivered-v.Released)
	if v.Unvouched == 0 {
		return b, nil
	}
	return appendTick(b, v.Unvouched), nil
}

// appendSubControl appends a subscription-control message, with the cell's
// messages and the payload and replay requests that §4 "Broker ↔ broker:
// subscription control" lists with them (docs/PROTOCOL.md).
func appendSubControl(b []byte, m msg.Msg) ([]byte, error) {
	switch v := m.(type) {
	case msg.Summary:
		return appendSummary(b, v)
	case msg.SummaryDelta:
		b = append(b, byte(TypeSummaryDelta))
		b = binary.AppendUvarint(b, v.Seq)
		b = appendBool(b, v.All)
		b = appendClauses(b, v.Add)
		return appendClauses(b, v.Remove), nil
	case msg.SubReq:
		b = append(b, byte(TypeSubReq))
		b = appendString(b, string(v.Pubend))
		b = appendString(b, string(v.Sub))
		return appendPath(b, v.Path), nil
	case msg.SubReply:
		b = append(b, byte(TypeSubReply))
		b = appendString(b, string(v.Pubend))
		b = appendString(b, string(v.Sub))
		b = appendTick(b, v.Start)
		return appendPath(b, v.Path), nil
	case msg.Relay:
		return appendRelay(b, v)
	case msg.LinkStatus:
		b = append(b, byte(TypeLinkStatus))
		return appendPath(b, v.Unreachable), nil
	case msg.Refetch:
		b = append(b, byte(TypeRefetch))
		b = appendString(b, string(v.Pubend))
		b = appendRanges(b, v.Ranges)
		return appendPath(b, v.Path), nil
	case msg.Payloads:
		return appendPayloads(b, v)
	case msg.Replay:
		b = append(b, byte(TypeReplay))
		b = appendString(b, string(v.Pubend))
		b = appendString(b, string(v.Sub))
		b = appendTick(b, v.From)
		b = appendTick(b, v.To)
		b = appendClauses(b, v.Clauses)
		return appendPath(b, v.Path), nil
	case msg.ReplayData:
		return appendReplayData(b, v)
	case msg.Raft:
		b = append(b, byte(TypeRaft))
		return appendBytes(b, v.Data), nil
	case msg.RaftChunk:
		return appendRaftChunk(b, v)
	case msg.RaftChunkAck:
		b = append(b, byte(TypeRaftChunkAck))
		for _, x := range []uint64{v.From, v.To, v.Seq, v.Next} {
			b = binary.AppendUvarint(b, x)
		}
		return b, nil
	case msg.Forward:
		return appendForward(b, v)
	}
	return nil, errCannotEncode(m)
}

func appendSummary(b []byte, v msg.Summary) ([]byte, error) {
	b = append(b, byte(TypeSummary))
	b = appendBool(b, v.All)
	if len(v.Selectors) != 0 && len(v.Selectors) != len(v.Patterns) {
		return nil, fmt.Errorf("wire: Summary with %d patterns and %d selectors", len(v.Patterns), len(v.Selectors))
	}
	b = binary.AppendUvarint(b, uint64(len(v.Patterns)))
	for i, p := range v.Patterns {
		b = appendString(b, p)
		sel := ""
		if len(v.Selectors) > 0 {
			sel = v.Selectors[i]
		}
		b = appendString(b, sel)
	}
	return b, nil
}

func appendRelay(b []byte, v msg.Relay) ([]byte, error) {
	switch v.Msg.(type) {
	case msg.Knowledge, *msg.Knowledge, msg.Nack, msg.Ack, msg.AckExpected, msg.Summary, msg.SubReq, msg.SubReply:
	default:
		return nil, fmt.Errorf("wire: Relay may carry only a broker-to-broker GD message, not %T", v.Msg)
	}
	b = append(b, byte(TypeRelay))
	b = appendString(b, string(v.To))
	return appendBody(b, v.Msg)
}

func appendForward(b []byte, v msg.Forward) ([]byte, error) {
	switch v.Msg.(type) {
	case msg.Publish, msg.PubAck, msg.PubAckRange, msg.PubReject, msg.Goodbye:
	default:
		return nil, fmt.Errorf("wire: Forward may carry only a Publish, PubAck, PubAckRange, PubReject or Goodbye, not %T", v.Msg)
	}
	b = append(b, byte(TypeForward))
	b = binary.AppendUvarint(b, v.Client)
	return appendBody(b, v.Msg)
}

func appendPayloads(b []byte, v msg.Payloads) ([]byte, error) {
	b = append(b, byte(TypePayloads))
	b = appendString(b, string(v.Pubend))
	b = appendRanges(b, v.Ranges)
	b = appendTick(b, v.Final)
	b = binary.AppendUvarint(b, uint64(len(v.Events)))
	for _, ev := range v.Events {
		if ev == nil {
			return nil, fmt.Errorf("wire: Payloads with a nil event")
		}
		b = msg.AppendEvent(b, ev)
	}
	return appendPath(b, v.Path), nil
}

func appendReplayData(b []byte, v msg.ReplayData) ([]byte, error) {
	if v.Gap != (tick.Range{}) && v.Gap.Lo > v.Gap.Hi {
		return nil, fmt.Errorf("%w: ReplayData{%s %s} with an empty gap %d..%d", ErrMalformed, v.Pubend, v.Sub, v.Gap.Lo, v.Gap.Hi)
	}
	b = append(b, byte(TypeReplayData))
	b = appendString(b, string(v.Pubend))
	b = appendString(b, string(v.Sub))
	b = appendTick(b, v.From)
	b = appendTick(b, v.To)
	b = binary.AppendUvarint(b, uint64(len(v.Events)))
	for _, ev := range v.Events {
		if ev == nil {
			return nil, fmt.Errorf("wire: ReplayData with a nil event")
		}
		b = msg.AppendEvent(b, ev)
	}
	b = appendBool(b, v.Gap != (tick.Range{}))
	if v.Gap != (tick.Range{}) {
		b = appendTick(b, v.Gap.Lo)
		b = appendTick(b, v.Gap.Hi)
	}
	return appendPath(b, v.Path), nil
}

func appendRaftChunk(b []byte, v msg.RaftChunk) ([]byte, error) {
	if len(v.Data) == 0 {
		return nil, fmt.Errorf("%w: empty RaftChunk at %d", ErrMalformed, v.Offset)
	}
	b = append(b, byte(TypeRaftChunk))
	for _, x := range []uint64{v.From, v.To, v.Seq, v.Term, v.Index, v.Offset} {
		b = binary.AppendUvarint(b, x)
	}
	b = appendBool(b, v.Last)
	b = binary.LittleEndian.AppendUint32(b, v.CRC)
	return appendBytes(b, v.Data), nil
}

// appendCongestion appends a congestion-control message (docs/PROTOCOL.md
// §4 "Broker ↔ broker: congestion control").
func appendCongestion(b []byte, m msg.Msg) ([]byte, error) {
	switch v := m.(type) {
	case msg.DCQ:
		b = append(b, byte(TypeDCQ))
		b = appendString(b, string(v.Pubend))
		b = binary.AppendUvarint(b, v.Seq)
		return appendTick(b, v.Position), nil
	case msg.UCA:
		b = append(b, byte(TypeUCA))
		b = appendString(b, string(v.Pubend))
		b = binary.AppendUvarint(b, v.Seq)
		var err error
		if b, err = appendRate(b, v.MinRec); err != nil {
			return nil, err
		}
		return appendRate(b, v.MinNonRec)
	}
	return nil, errCannotEncode(m)
}

// appendClientToBroker appends a message of a client to its broker
// (docs/PROTOCOL.md §4 "Client → broker").
func appendClientToBroker(b []byte, m msg.Msg) ([]byte, error) {
	switch v := m.(type) {
	case msg.Publish:
		return msg.AppendPublish(append(b, byte(publishType(&v))), &v), nil
	case *msg.Publish: // the client's form (not boxed per publish); nil is refused below
		if v != nil {
			return msg.AppendPublish(append(b, byte(publishType(v))), v), nil
		}
	case msg.PublishRun:
		return appendPublishRun(b, &v)
	case *msg.PublishRun: // the client's form (transport's writer); nil is refused below
		if v != nil {
			return appendPublishRun(b, v)
		}
	case msg.Subscribe:
		return appendSubscribe(b, v), nil
	case msg.Unsubscribe:
		b = append(b, byte(TypeUnsubscribe))
		return appendString(b, string(v.Sub)), nil
	case msg.SubAck:
		b = append(b, byte(TypeSubAck))
		b = appendString(b, string(v.Sub))
		return appendToken(b, v.Token), nil
	case msg.SubConsumed:
		b = append(b, byte(TypeSubConsumed))
		b = appendString(b, string(v.Sub))
		return appendToken(b, v.Token), nil
	}
	return nil, errCannotEncode(m)
}

func appendSubscribe(b []byte, v msg.Subscribe) []byte {
	b = append(b, byte(TypeSubscribe))
	b = appendString(b, string(v.Sub))
	b = appendString(b, v.Pattern)
	b = appendString(b, v.Selector)
	if !v.Durable && len(v.From) == 0 && !v.TotalOrder && v.Group == "" {
		return b // the short form (see decoder.subscribe)
	}
	b = appendBool(b, v.Durable)
	b = appendToken(b, v.From)
	switch {
	case v.TotalOrder:
		b = append(b, orderTotal) // version 9: absent means per pubend
	case v.Group != "":
		b = append(b, optionGroup) // version 20
		b = appendString(b, v.Group)
	}
	return b
}

// appendBrokerToClient appends a message of a broker to its client
// (docs/PROTOCOL.md §4 "Broker → client").
func appendBrokerToClient(b []byte, m msg.Msg) ([]byte, error) {
	switch v := m.(type) {
	case msg.PubAck:
		return appendPubAck(b, &v), nil
	case *msg.PubAck: // the engine's form; nil is refused below
		if v != nil {
			return appendPubAck(b, v), nil
		}
	case msg.PubAckRange:
		return appendPubAckRange(b, &v)
	case *msg.PubAckRange: // the shell's form; nil is refused below
		if v != nil {
			return appendPubAckRange(b, v)
		}
	case msg.PubReject:
		b = append(b, byte(TypePubReject))
		b = appendString(b, v.Publisher)
		b = binary.AppendUvarint(b, v.Seq)
		return appendString(b, v.Reason), nil
	case msg.SubStarted:
		b = append(b, byte(TypeSubStarted))
		b = appendString(b, string(v.Sub))
		return appendToken(b, v.Token), nil
	case msg.SubRejected:
		b = append(b, byte(TypeSubRejected))
		b = appendString(b, string(v.Sub))
		return appendString(b, v.Reason), nil
	case msg.Delivery:
		b = append(b, byte(TypeDelivery))
		b = appendString(b, string(v.Sub))
		return appendOptEvent(b, v.Event)
	case *msg.Delivery: // the engine's form; nil is refused below
		if v != nil {
			b = append(b, byte(TypeDelivery))
			b = appendString(b, string(v.Sub))
			return appendOptEvent(b, v.Event)
		}
	case msg.DeliveryRun:
		return appendDeliveryRun(b, &v)
	case *msg.DeliveryRun: // the shell's form; nil is refused below
		if v != nil {
			return appendDeliveryRun(b, v)
		}
	case msg.Gap:
		b = append(b, byte(TypeGap))
		b = appendString(b, string(v.Sub))
		b = appendString(b, string(v.Pubend))
		b = appendTick(b, v.From)
		return appendTick(b, v.To), nil
	case msg.Progress:
		b = append(b, byte(TypeProgress))
		b = appendString(b, string(v.Sub))
		return appendToken(b, v.Token), nil
	}
	return nil, errCannotEncode(m)
}

func appendPubAck(b []byte, v *msg.PubAck) []byte {
	b = append(b, byte(TypePubAck))
	b = appendString(b, string(v.Pubend))
	b = appendString(b, v.Publisher)
	b = binary.AppendUvarint(b, v.Seq)
	b = appendTick(b, v.Tick)
	return appendBool(b, v.Duplicate)
}

// publishType is the frame type of a publish: PublishNoAck when it asks
// for no ack (version 15), Publish otherwise; the body is the same.
func publishType(p *msg.Publish) Type {
	if p.NoAck {
		return TypePublishNoAck
	}
	return TypePublish
}

// publishRunType is publishType for a run whose first publish is p.
func publishRunType(p *msg.Publish) Type {
	if p.NoAck {
		return TypePublishRunNoAck
	}
	return TypePublishRun
}

// appendPublishRun appends a PublishRun's type byte and body: the number
// of publishes and each one's own encoding (as a Publish body). The type
// says whether they ask for acks (PublishRunNoAck), so a run's publishes
// must all ask or none.
func appendPublishRun(b []byte, v *msg.PublishRun) ([]byte, error) {
	if len(v.Publishes) == 0 {
		return nil, fmt.Errorf("%w: PublishRun of no publishes", ErrMalformed)
	}
	t := publishRunType(&v.Publishes[0])
	for i := range v.Publishes {
		if v.Publishes[i].NoAck != v.Publishes[0].NoAck {
			return nil, fmt.Errorf("%w: PublishRun mixes publishes with and without NoAck (publish %d of %d)", ErrMalformed, i+1, len(v.Publishes))
		}
	}
	b = append(b, byte(t))
	b = binary.AppendUvarint(b, uint64(len(v.Publishes)))
	for i := range v.Publishes {
		b = msg.AppendPublish(b, &v.Publishes[i])
	}
	return b, nil
}

// appendDeliveryRun appends a DeliveryRun's type byte and body: the
// subscription, the number of events and each event's own encoding.
func appendDeliveryRun(b []byte, v *msg.DeliveryRun) ([]byte, error) {
	if len(v.Events) == 0 {
		return nil, fmt.Errorf("%w: DeliveryRun{%s} of no events", ErrMalformed, v.Sub)
	}
	for _, ev := range v.Events {
		if ev == nil {
			return nil, fmt.Errorf("%w: DeliveryRun{%s} with a missing event", ErrMalformed, v.Sub)
		}
	}
	b = append(b, byte(TypeDeliveryRun))
	b = appendString(b, string(v.Sub))
	b = binary.AppendUvarint(b, uint64(len(v.Events)))
	for _, ev := range v.Events {
		b = msg.AppendEvent(b, ev)
	}
	return b, nil
}

// appendPubAckRange writes the first tick and then each tick's distance
// from the one before (at least 1: the ticks increase strictly), so a
// range of ticks of one millisecond costs a byte per publish.
func appendPubAckRange(b []byte, v *msg.PubAckRange) ([]byte, error) {
	n := uint64(len(v.Ticks))
	if n == 0 || v.Seq+n-1 < v.Seq {
		return nil, fmt.Errorf("%w: PubAckRange{%s %s#%d} of %d acks", ErrMalformed, v.Pubend, v.Publisher, v.Seq, n)
	}
	b = append(b, byte(TypePubAckRange))
	b = appendString(b, string(v.Pubend))
	b = appendString(b, v.Publisher)
	b = binary.AppendUvarint(b, v.Seq)
	b = binary.AppendUvarint(b, n)
	b = appendTick(b, v.Ticks[0])
	for i := 1; i < len(v.Ticks); i++ {
		if v.Ticks[i] <= v.Ticks[i-1] {
			return nil, fmt.Errorf("%w: PubAckRange{%s %s#%d}: tick %d after %d", ErrMalformed, v.Pubend, v.Publisher, v.Seq, v.Ticks[i], v.Ticks[i-1])
		}
		b = binary.AppendUvarint(b, uint64(v.Ticks[i]-v.Ticks[i-1]))
	}
	return b, nil
}

func appendString(b []byte, s string) []byte {
	b = binary.AppendUvarint(b, uint64(len(s)))
	return append(b, s...)
}

func appendBytes(b []byte, p []byte) []byte {
	b = binary.AppendUvarint(b, uint64(len(p)))
	return append(b, p...)
}

func appendTick(b []byte, t tick.Tick) []byte { return binary.AppendUvarint(b, uint64(t)) }

func appendBool(b []byte, v bool) []byte {
	if v {
		return append(b, 1)
	}
	return append(b, 0)
}

// appendRanges writes tick ranges as count + (lo, hi) pairs.
func appendRanges(b []byte, rs []tick.Range) []byte {
	b = binary.AppendUvarint(b, uint64(len(rs)))
	for _, r := range rs {
		b = appendTick(b, r.Lo)
		b = appendTick(b, r.Hi)
	}
	return b
}

func appendPath(b []byte, path []msg.NodeID) []byte {
	b = binary.AppendUvarint(b, uint64(len(path)))
	for _, n := range path {
		b = appendString(b, string(n))
	}
	return b
}

// appendToken writes a token as count + (pubend, tick) pairs in pubend order.
func appendToken(b []byte, t msg.Token) []byte {
	b = binary.AppendUvarint(b, uint64(len(t)))
	if len(t) == 0 {
		return b
	}
	ps := make([]string, 0, len(t))
	for p := range t {
		ps = append(ps, string(p))
	}
	slices.Sort(ps)
	for _, p := range ps {
		b = appendString(b, p)
		b = appendTick(b, t[msg.PubendID(p)])
	}
	return b
}

// appendKnowledge appends a Knowledge's type byte and body.
func appendKnowledge(b []byte, v *msg.Knowledge) []byte {
	b = append(b, byte(TypeKnowledge))
	b = appendString(b, string(v.Pubend))
	b = appendTick(b, v.Final)
	b = appendTick(b, v.Start)
	b = appendTick(b, v.End)
	b = appendTick(b, v.VTick)
	b = appendBool(b, v.Retrans)
	b, _ = appendOptEvent(b, v.Event)
	return appendUnvouched(b, v.Unvouched)
}

// appendUnvouched ends a Knowledge or KnowledgeRun of version 19 with its
// unvouched top, only when it is not zero (older versions end before).
func appendUnvouched(b []byte, u tick.Tick) []byte {
	if u == 0 {
		return b
	}
	return appendTick(b, u)
}

// appendKnowledgeRun appends a KnowledgeRun's type byte and body: the
// fields of a Knowledge but VTick, then the number of events and each
// event's own encoding, which carries its tick.
func appendKnowledgeRun(b []byte, v *msg.KnowledgeRun) ([]byte, error) {
	if err := checkRun(v); err != nil {
		return nil, err
	}
	b = append(b, byte(TypeKnowledgeRun))
	b = appendString(b, string(v.Pubend))
	b = appendTick(b, v.Final)
	b = appendTick(b, v.Start)
	b = appendTick(b, v.End)
	b = appendBool(b, v.Retrans)
	b = binary.AppendUvarint(b, uint64(len(v.Events)))
	for _, ev := range v.Events {
		b = msg.AppendEvent(b, ev)
	}
	return appendUnvouched(b, v.Unvouched), nil
}

// checkRun refuses a run whose events are not in ascending tick order
// within [Start, End]: its pieces would not say what it says.
func checkRun(v *msg.KnowledgeRun) error {
	if v.Start > v.End {
		return fmt.Errorf("%w: KnowledgeRun{%s} of range [%d, %d]", ErrMalformed, v.Pubend, v.Start, v.End)
	}
	prev := v.Start - 1
	for _, ev := range v.Events {
		if ev == nil || ev.Tick <= prev || ev.Tick > v.End {
			return fmt.Errorf("%w: KnowledgeRun{%s [%d, %d]}: event out of order after tick %d", ErrMalformed, v.Pubend, v.Start, v.End, prev)
		}
		prev = ev.Tick
	}
	return nil
}

// appendOptEvent writes a presence byte and, when present, the event: its
// own encoding, copied as it is (msg.AppendEvent), never rebuilt.
func appendOptEvent(b []byte, ev *msg.Event) ([]byte, error) {
	if ev == nil {
		return append(b, 0), nil
	}
	return msg.AppendEvent(append(b, 1), ev), nil
}

// maxRate bounds a UCA's rates (tick-seconds per second): far above any an
// SHB measures, low enough that thousandths stay exact in a float64.
const maxRate = 1e9

// appendRate writes a UCA rate in thousandths plus one, 0 standing for +Inf
// (no SHB of that kind alerted).
func appendRate(b []byte, r float64) ([]byte, error) {
	if math.IsInf(r, 1) {
		return append(b, 0), nil
	}
	if !(r >= 0 && r <= maxRate) {
		return nil, fmt.Errorf("wire: UCA rate %g outside [0, %g] or ∞", r, float64(maxRate))
	}
	return binary.AppendUvarint(b, uint64(math.Round(r*1000))+1), nil
}

func appendClauses(b []byte, cs []msg.Clause) []byte {
	b = binary.AppendUvarint(b, uint64(len(cs)))
	for _, c := range cs {
		b = appendString(b, c.Pattern)
		b = appendString(b, c.Selector)
	}
	return b
}
