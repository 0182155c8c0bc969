package msg

import (
	"errors"
	"fmt"
	"sort"
	"strconv"
	"strings"

	"github.com/aerie-mq/aerie/internal/tick"
)

// Publish is a client's request to publish one event to a pubend. (Publisher,
// Seq) identify it: a retry after a lost ack returns the original tick.
//
// NoAck asks for no PubAck (a fire-and-forget publish, as MQTT's QoS 0 or
// core NATS): the publisher learns nothing of it unless it is refused, and
// does not resend it, so it may be lost before its pubend takes it (a lost
// connection, a crashed broker). Once taken it is logged, ordered and
// delivered as any other. It travels as PublishNoAck (and PublishRunNoAck)
// frames, which a client sends only to brokers of version 15 on
// (wire.VersionPublishNoAck).
type Publish struct {
	Pubend    PubendID
	Publisher string
	Seq       uint64
	Topic     string
	Props     Props
	Payload   []byte
	NoAck     bool
}

// PublishRun carries consecutive publishes of one client connection in
// one message: it says exactly what the len(Publishes) Publish messages it
// stands for would say, in the same order, and each is deduplicated,
// refused and acknowledged as it would be on its own. A client sends it
// only to brokers that answered its Hello in protocol version 13 or later
// (wire.VersionPublishRun), when several publishes are queued while its
// connection's writer is busy; a broker refuses it from a client that
// announced an older version. Its publishes are all NoAck or none is (the
// encoder refuses a mix).
type PublishRun struct {
	Publishes []Publish
}

// BodySize is the size of p's encoding (AppendPublish), for the bound of
// a PublishRun in bytes.
func (p *Publish) BodySize() int {
	n := uvarintLen(uint64(len(p.Pubend))) + len(p.Pubend) + uvarintLen(uint64(len(p.Publisher))) + len(p.Publisher) +
		uvarintLen(p.Seq) + uvarintLen(uint64(len(p.Topic))) + len(p.Topic) +
		uvarintLen(uint64(len(p.Payload))) + len(p.Payload)
	return n + max(len(p.Props.enc), 1)
}

func uvarintLen(v uint64) int {
	n := 1
	for v >= 0x80 {
		v >>= 7
		n++
	}
	return n
}

// PubAck confirms that a publish is durable at its pubend, at Tick.
// Duplicate says the publish had been logged before: this is a retry (or
// a rerun with the same publisher id and sequence numbers), answered with
// the original tick and not logged again.
type PubAck struct {
	Pubend    PubendID
	Publisher string
	Seq       uint64
	Tick      tick.Tick
	Duplicate bool
}

// PubAckRange confirms, in one message, the consecutive publishes Seq,
// Seq+1, …, Seq+len(Ticks)-1 of Publisher: each is durable at Pubend (or,
// in best-effort mode, ticked there) at Ticks[i], which increase strictly.
// It says exactly what the len(Ticks) PubAcks it stands for would say; no
// publish in it is a Duplicate (those are acked one by one). A broker
// sends it only to clients that announce protocol version 11 or later
// (wire.VersionPubAckRange), when several acks of one publisher leave
// together: one group commit, or one burst of best-effort publishes.
type PubAckRange struct {
	Pubend    PubendID
	Publisher string
	Seq       uint64
	Ticks     []tick.Tick
}

// Len is the number of publishes the range acknowledges.
func (m *PubAckRange) Len() int { return len(m.Ticks) }

// Ack returns the ack of the range's i-th publish, as a PubAck would say it.
func (m *PubAckRange) Ack(i int) PubAck {
	return PubAck{Pubend: m.Pubend, Publisher: m.Publisher, Seq: m.Seq + uint64(i), Tick: m.Ticks[i]}
}

// AsPubAckRange returns m as a PubAckRange if it is one, by value or by
// pointer.
func AsPubAckRange(m Msg) (*PubAckRange, bool) {
	switch a := m.(type) {
	case PubAckRange:
		return &a, true
	case *PubAckRange:
		return a, a != nil
	}
	return nil, false
}

// PubReject refuses a publish (unknown pubend, bad request) with a reason.
type PubReject struct {
	Publisher string
	Seq       uint64
	Reason    string
}

// Subscribe asks an SHB for a subscription to the events whose topic
// matches Pattern and, when Selector is not empty, whose properties satisfy
// the SQL-92 Selector.
//
// Durable asks for a durable subscription (Gryphon DS §2; msg/durable.go):
// it starts after From, a checkpoint token (the last SubStarted, Delivery or
// Progress token the subscriber kept), catching up ticks the network has
// already delivered elsewhere by replay; nil From starts now.
//
// TotalOrder asks for uniform total order across pubends (docs/CONCEPTS.md "Doubt horizon",
// P3): the subscription receives the events of every pubend merged in
// (tick, pubend) order, so any two such subscriptions, at any SHBs, see
// their common events in the same order. Not with Durable or From.
type Subscribe struct {
	Sub        SubID
	Pattern    string
	Selector   string
	Durable    bool
	From       Token
	TotalOrder bool
	// Group, when not empty, makes the subscriber a member of consumer
	// group Group (docs/CONCEPTS.md "Consumer groups"): each matching
	// event goes to one member of the group, which acknowledges it with a
	// SubAck naming its pubend and tick. Not with Durable, From or
	// TotalOrder. Protocol version 20 on (wire.VersionGroups).
	Group string
	// Paced is set by the SHB, never on the wire: the subscriber's client
	// reports what its application has taken (SubConsumed, protocol
	// version 16 on), so the subscription's catch-up keeps within a window
	// of it (gd/durable.go).
	Paced bool
}

// Unsubscribe ends a subscription.
type Unsubscribe struct{ Sub SubID }

// SubStarted says a subscription is in force: from Token on, it receives
// every matching event of every pubend exactly once, in pubend order.
type SubStarted struct {
	Sub   SubID
	Token Token
}

// SubRejected refuses a subscription (bad pattern) with a reason.
type SubRejected struct {
	Sub    SubID
	Reason string
}

// Delivery hands one event to a local subscriber.
type Delivery struct {
	Sub   SubID
	Event *Event
}

// DeliveryRun hands consecutive events to one subscription in one
// message: it says exactly what the len(Events) Deliveries it stands for
// would say, in the same order (per pubend in tick order, as always). A
// broker sends it only to clients that announce protocol version 13 or
// later (wire.VersionDeliveryRun), when several deliveries to one
// subscription of a connection leave together with nothing else for that
// connection between them; a Gap, a Progress or any other answer for the
// connection ends the run before it.
type DeliveryRun struct {
	Sub    SubID
	Events []*Event
}

// Split calls emit with each Delivery the run stands for, in order.
func (m *DeliveryRun) Split(emit func(Delivery)) {
	for _, ev := range m.Events {
		emit(Delivery{Sub: m.Sub, Event: ev})
	}
}

// A broker's engine hands PubAcks of new publishes and Deliveries to its
// shell as pointers into blocks (gd pubAckMsg, deliveryMsg), so that the
// hot path does not box one per event; the wire encodes both forms alike
// and decodes a PubAck as a value, a Delivery as a pointer allocated with
// its event. AsPubAck and AsDelivery read either form.

// AsPubAck returns m as a PubAck if it is one, by value or by pointer.
func AsPubAck(m Msg) (PubAck, bool) {
	switch a := m.(type) {
	case PubAck:
		return a, true
	case *PubAck:
		if a != nil {
			return *a, true
		}
	}
	return PubAck{}, false
}

// AsDelivery returns m as a Delivery if it is one, by value or by pointer.
func AsDelivery(m Msg) (Delivery, bool) {
	switch d := m.(type) {
	case Delivery:
		return d, true
	case *Delivery:
		if d != nil {
			return *d, true
		}
	}
	return Delivery{}, false
}

// Token is a start token or checkpoint: one tick per pubend (docs/CONCEPTS.md I5, "Durable subscriptions").
// Its printed form, "P1:123,P2:456" with pubends sorted, is what
// `aerie sub` prints and ParseToken reads back.
type Token map[PubendID]tick.Tick

// ErrBadToken wraps every reason ParseToken refuses a token.
var ErrBadToken = errors.New("bad token")

// ParseToken reads a token as Token.String prints it: "pubend:tick" pairs
// separated by commas ("" is the empty token). A pubend id cannot contain
// ',' or ':' (the config refuses such ids).
func ParseToken(s string) (Token, error) {
	t := Token{}
	if s == "" {
		return t, nil
	}
	for _, part := range strings.Split(s, ",") {
		name, num, ok := strings.Cut(part, ":")
		if !ok || name == "" {
			return nil, fmt.Errorf("%w %q: %q is not pubend:tick", ErrBadToken, s, part)
		}
		v, err := strconv.ParseUint(num, 10, 64)
		if err != nil {
			return nil, fmt.Errorf("%w %q: tick of %s: %q is not a number", ErrBadToken, s, name, num)
		}
		if _, dup := t[PubendID(name)]; dup {
			return nil, fmt.Errorf("%w %q: pubend %s appears twice", ErrBadToken, s, name)
		}
		t[PubendID(name)] = tick.Tick(v)
	}
	return t, nil
}

func (t Token) String() string {
	ps := make([]string, 0, len(t))
	for p := range t {
		ps = append(ps, string(p))
	}
	sort.Strings(ps)
	var b strings.Builder
	for i, p := range ps {
		if i > 0 {
			b.WriteByte(',')
		}
		fmt.Fprintf(&b, "%s:%d", p, t[PubendID(p)])
	}
	return b.String()
}

func (m Publish) String() string {
	return fmt.Sprintf("Publish{%s %s#%d %s}", m.Pubend, m.Publisher, m.Seq, m.Topic)
}
func (m PubAck) String() string {
	dup := ""
	if m.Duplicate {
		dup = " duplicate"
	}
	return fmt.Sprintf("PubAck{%s %s#%d @%d%s}", m.Pubend, m.Publisher, m.Seq, m.Tick, dup)
}
func (m PubAckRange) String() string {
	if len(m.Ticks) == 0 {
		return fmt.Sprintf("PubAckRange{%s %s#%d empty}", m.Pubend, m.Publisher, m.Seq)
	}
	return fmt.Sprintf("PubAckRange{%s %s#%d..%d @%d..%d}", m.Pubend, m.Publisher, m.Seq, m.Seq+uint64(len(m.Ticks))-1,
		m.Ticks[0], m.Ticks[len(m.Ticks)-1])
}
func (m PubReject) String() string {
	return fmt.Sprintf("PubReject{%s#%d %s}", m.Publisher, m.Seq, m.Reason)
}
func (m Subscribe) String() string {
	d := ""
	if m.Durable {
		d = " durable"
	}
	if len(m.From) > 0 {
		d += " from " + m.From.String()
	}
	if m.Group != "" {
		d += " group " + m.Group
	}
	if m.Selector != "" {
		return fmt.Sprintf("Subscribe{%s %s where %s%s}", m.Sub, m.Pattern, m.Selector, d)
	}
	return fmt.Sprintf("Subscribe{%s %s%s}", m.Sub, m.Pattern, d)
}
func (m Unsubscribe) String() string { return fmt.Sprintf("Unsubscribe{%s}", m.Sub) }
func (m SubStarted) String() string  { return fmt.Sprintf("SubStarted{%s %s}", m.Sub, m.Token) }
func (m SubRejected) String() string { return fmt.Sprintf("SubRejected{%s %s}", m.Sub, m.Reason) }
func (m Delivery) String() string    { return fmt.Sprintf("Deliver{%s %v}", m.Sub, m.Event) }
func (m PublishRun) String() string {
	if len(m.Publishes) == 0 {
		return "PublishRun{empty}"
	}
	return fmt.Sprintf("PublishRun{%d publishes, first %v}", len(m.Publishes), m.Publishes[0])
}
func (m DeliveryRun) String() string {
	if len(m.Events) == 0 {
		return fmt.Sprintf("DeliveryRun{%s empty}", m.Sub)
	}
	return fmt.Sprintf("DeliveryRun{%s %d events, first %v}", m.Sub, len(m.Events), m.Events[0])
}

func (Publish) isMsg()     {}
func (PubAck) isMsg()      {}
func (PubReject) isMsg()   {}
func (PubAckRange) isMsg() {}
func (Subscribe) isMsg()   {}
func (Unsubscribe) isMsg() {}
func (SubStarted) isMsg()  {}
func (SubRejected) isMsg() {}
func (Delivery) isMsg()    {}
func (DeliveryRun) isMsg() {}
func (PublishRun) isMsg()  {}

// MaxEventBytes bounds an event's encoded size (topic, properties and
// payload): publishes above it are refused with a reason, so that every
// logged event fits a log record and every delivery a wire frame.
const MaxEventBytes = 4 << 20

// groupElsewhere is the form of the refusal a broker that is not a
// group's home answers a member with (GroupElsewhere).
const groupElsewhere = "group %s is served at broker %s, whose client address is %s: connect there to join it"

// GroupElsewhere is the reason a broker refuses a member of group whose
// home is broker home, at client address addr (and MQTT listener mqtt, ""
// for none, named for MQTT clients): clients read it back with
// ParseGroupElsewhere and join there.
func GroupElsewhere(group string, home NodeID, addr, mqtt string) string {
	r := fmt.Sprintf(groupElsewhere, group, home, addr)
	if mqtt != "" {
		r += " (MQTT clients: " + mqtt + ")"
	}
	return r
}

// ParseGroupElsewhere reads a GroupElsewhere reason back.
func ParseGroupElsewhere(reason string) (group string, home NodeID, addr string, ok bool) {
	var h string
	n, err := fmt.Sscanf(reason, "group %s is served at broker %s whose client address is %s connect there to join it", &group, &h, &addr)
	if err != nil || n != 3 || !strings.HasSuffix(h, ",") || !strings.HasSuffix(addr, ":") {
		return "", "", "", false
	}
	return group, NodeID(strings.TrimSuffix(h, ",")), strings.TrimSuffix(addr, ":"), true
}
