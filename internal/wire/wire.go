// Package wire is aerie's versioned binary wire protocol: how every message
// of internal/msg travels over a TCP connection between two brokers or
// between a broker and a client. docs/PROTOCOL.md is its specification; this
// package is the reference codec.
//
// A frame is
//
//	| length uint32 LE | type uint8 | body ... |
//
// where length counts the type byte and the body. Bodies use unsigned
// varints for integers (zigzag varints for signed ones), a uvarint length
// and the bytes for strings and byte strings, one byte (0 or 1) for bools.
// The encoding is canonical: the decoder refuses overlong varints, bools
// other than 0 and 1, unsorted or repeated property names and token
// pubends, and trailing bytes, so a message has exactly one encoding.
//
// Decoding never panics, and never allocates more for a field than the
// bytes of the frame that carry it.
package wire

import (
	"errors"
	"fmt"

	"github.com/aerie-mq/aerie/internal/msg"
)

// Version is the protocol version this package speaks, carried in Hello.
//
// History: 1 — first release; 2 — Summary clauses carry a selector (issue 4);
// 3 — LinkStatus (0x18) between the members of cells (issue 6); Refetch
// and Payloads (0x19, 0x1a) for bounded IB caches; 4 — Auth and AuthOK
// (0x04, 0x05): a client authenticates after the Hellos. A broker still
// accepts clients of version MinClientVersion (they have no Auth step).
// 5 — durable subscriptions: Subscribe's durable form, Replay and
// ReplayData (0x1b, 0x1c), SubAck (0x23), Gap and Progress (0x35, 0x36).
// 6 — congestion control: DCQ and UCA (0x1e, 0x1f; 0x1d is the replicated
// PHB's Raft message); SummaryDelta (0x40): a large summary changes by its
// clauses added and removed instead of being sent whole (clients are not
// concerned). 7 — a Replay carries a list of clauses: the catch-ups of one
// pubend at an SHB ask together (clients are not concerned). 8 — Forward
// (0x41): a member of a replicated PHB cell that does not serve forwards a
// client's publishes to the serving leader and relays its answers (clients
// are not concerned). 9 — Payloads carries the answering broker's final
// prefix: ticks released upstream are taken as released, not as lost;
// Subscribe's long form may end with an order byte (1: uniform total
// order across pubends). 10 — RaftChunk and RaftChunkAck (0x42, 0x43): a
// replicated PHB member's snapshot larger than one chunk travels in
// acknowledged pieces (clients are not concerned). 11 — PubAckRange
// (0x37): one frame acknowledges several consecutive publishes of one
// publisher; a broker sends it only to clients of version 11 on
// (VersionPubAckRange), older ones still get a PubAck per publish.
// 12 — KnowledgeRun (0x44): consecutive Knowledge messages of one pubend
// to one neighbour in one frame; a broker sends it only to brokers of
// version 12 on (VersionKnowledgeRun), and still talks to brokers of
// version 11 (MinBrokerVersion), splitting a run into Knowledge frames for
// them (clients are not concerned). 13 — DeliveryRun (0x38):
// consecutive deliveries to one subscription in one frame; a broker sends
// it only to clients of version 13 on (VersionDeliveryRun), older ones
// still get a Delivery per event; PublishRun (0x24): consecutive
// publishes of one client in one frame, which a client sends only to
// brokers that answer in version 13 on (VersionPublishRun) and a broker
// refuses from a client that announced an older version. 14 — a
// Forward's client names a stream of the forwarding member's client, a new
// one for every resend: a leader refuses the rest of a stream once it
// refused one of its publishes, and takes a refused client back at a
// resend by seq only from a forwarding member of version 13
// (VersionForwardStreams; clients are not concerned). 15 — PublishNoAck
// and PublishRunNoAck (0x25, 0x26): a Publish (PublishRun) whose
// publishes ask for no PubAck, same body; a client sends them only to
// brokers that answer in version 15 on (VersionPublishNoAck), and sends
// an older broker a plain Publish and drops its ack; a broker refuses
// them from a client that announced an older version. 16 — SubConsumed
// (0x27): a client reports what its application has taken of a durable
// subscription, which paces the subscription's catch-up; a client sends it
// only to brokers that answer in version 16 on (VersionSubConsumed), and a
// broker paces the catch-ups only of clients that announced it (older
// ones catch up unpaced, as before). 17 — Resync (0x45): a broker tells a
// downstream that was gone for longer than max_retain which ticks it made
// final without it (clients are not concerned). It goes only to a
// downstream that was gone; one of an older version cannot read it and
// drops the link, and stays behind: upgrade the SHBs before the brokers
// above them. 18 — Forward between neighbours of a pubend's tree: a
// broker that does not host a pubend relays a client's publishes to it
// one hop up the tree and the answers back (VersionRelay; clients are not
// concerned). 19 — an Ack may end with its unvouched top (msg.Ack.Unvouched):
// how much of its prefix the sender acked past a downstream that was gone;
// a broker sends it only to brokers of version 19 on (VersionVouched) and
// sends an older upstream the clean prefix as its ack instead, which holds
// that upstream's release as a network without release past gone
// downstreams does (clients are not concerned). 20 — a Subscribe's long
// form may end with option 2 and a group name: a member of a consumer
// group (msg.Subscribe.Group); a client sends it only to brokers that
// answer in version 20 on (VersionGroups), and its SubAcks of a group
// membership acknowledge single events (brokers are not concerned).
const Version uint16 = 20

// VersionGroups is the first version in which a client may ask to join a
// consumer group (msg.Subscribe.Group).
const VersionGroups uint16 = 20

// VersionVouched is the first broker version a broker may send an Ack
// with an unvouched top to.
const VersionVouched uint16 = 19

// VersionRelay is the first broker version that takes a Forward from a
// downstream neighbour (a publish relayed towards its pubend); a broker
// relays nothing to an older upstream (forward.RelayVersion says the same).
const VersionRelay uint16 = 18

// VersionSubConsumed is the first version in which a client sends, and a
// broker reads, SubConsumed.
const VersionSubConsumed uint16 = 16

// VersionPublishNoAck is the first version in which a client may send, and
// a broker accepts, PublishNoAck and PublishRunNoAck frames.
const VersionPublishNoAck uint16 = 15

// VersionForwardStreams is the first broker version whose Forward names a
// stream (a new one for every resend) rather than a client connection.
const VersionForwardStreams uint16 = 14

// VersionPubAckRange is the first client version a broker may send
// PubAckRange frames to.
const VersionPubAckRange uint16 = 11

// VersionDeliveryRun is the first client version a broker may send
// DeliveryRun frames to.
const VersionDeliveryRun uint16 = 13

// VersionPublishRun is the first version in which a client may send, and
// a broker accepts, PublishRun frames.
const VersionPublishRun uint16 = 13

// VersionKnowledgeRun is the first broker version a broker may send
// KnowledgeRun frames to.
const VersionKnowledgeRun uint16 = 12

// MinBrokerVersion is the oldest broker protocol a broker accepts: as with
// clients, the accepting side answers with the older version, and each
// side sends the other nothing that version lacks. Version 11 differs
// from 12 only by KnowledgeRun, which a broker splits for an older peer,
// and 12 from 13 only by DeliveryRun, which brokers never send each
// other, so a cell can be upgraded one broker at a time.
const MinBrokerVersion uint16 = 11

// MinClientVersion is the oldest client protocol a broker accepts: the
// accepting side answers a client's Hello with the client's version, and
// sends it nothing that version lacks. Between brokers, see MinBrokerVersion.
const MinClientVersion uint16 = 3

// DefaultMaxFrame is the largest frame (type byte and body, without the
// length prefix) AppendFrame produces and the default a Reader accepts.
const DefaultMaxFrame = 16 << 20

// maxIDLen is the longest Hello.ID CheckHello accepts.
const maxIDLen = 255

// Errors. Every error this package returns wraps one of these (or
// io.EOF / io.ErrUnexpectedEOF from a Reader) with context.
var (
	// ErrFrameTooLarge reports a frame longer than the maximum frame size.
	ErrFrameTooLarge = errors.New("wire: frame too large")
	// ErrUnknownType reports a type byte (or a Go message type) this
	// version of the protocol does not know.
	ErrUnknownType = errors.New("wire: unknown message type")
	// ErrMalformed reports a body that does not decode exactly, or a
	// message that cannot be encoded (an unsupported property type).
	ErrMalformed = errors.New("wire: malformed")
	// ErrVersion reports a peer that speaks another protocol version.
	ErrVersion = errors.New("wire: protocol version mismatch")
)

// Type is the type byte of a frame. Values are fixed forever: a new message
// gets a new value, a retired one is never reused. Hello's value and layout
// never change, so any version can read a peer's Hello and refuse it politely.
type Type uint8

// The type table (docs/PROTOCOL.md §3). 0x00 is never a valid type.
const (
	// Link management, both directions.
	TypeHello     Type = 0x01
	TypeHeartbeat Type = 0x02
	TypeGoodbye   Type = 0x03
	TypeAuth      Type = 0x04 // client → broker, right after the Hellos (version 4)
	TypeAuthOK    Type = 0x05 // broker → client, the answer to Auth

	// Broker ↔ broker: guaranteed delivery (seed 000 §3.1, §3.2) and
	// subscription control (docs/CONCEPTS.md P6).
	TypeKnowledge    Type = 0x10
	TypeNack         Type = 0x11
	TypeAck          Type = 0x12
	TypeAckExpected  Type = 0x13
	TypeSummary      Type = 0x14
	TypeSubReq       Type = 0x15
	TypeSubReply     Type = 0x16
	TypeRelay        Type = 0x17 // sideways within a cell: a 0x10–0x16 message for another broker
	TypeLinkStatus   Type = 0x18 // downstream cells the sender cannot reach (to upstreams and cell peers)
	TypeRefetch      Type = 0x19 // payloads of D ticks an IB dropped from its cache, asked upstream
	TypePayloads     Type = 0x1a // the answer to a Refetch, down its path
	TypeReplay       Type = 0x1b // a durable subscription's catch-up, asked up to the pubend
	TypeReplayData   Type = 0x1c // the answer to a Replay, down its path
	TypeRaft         Type = 0x1d // a Raft message between members of a replicated PHB cell
	TypeDCQ          Type = 0x1e // congestion query, down from a pubend (Gryphon CC §3.1)
	TypeUCA          Type = 0x1f // congestion alert, up towards the pubend, folded on the way
	TypeSummaryDelta Type = 0x40 // what changed in the summary last sent on the link
	TypeForward      Type = 0x41 // a client's publish and its answer between members of a replicated PHB cell
	TypeRaftChunk    Type = 0x42 // a piece of a Raft snapshot too large for one frame, within a replicated PHB cell
	TypeRaftChunkAck Type = 0x43 // how much of a chunked Raft snapshot its receiver holds
	TypeKnowledgeRun Type = 0x44 // consecutive Knowledge of one pubend in one frame (version 12)
	TypeResync       Type = 0x45 // ticks made final without a gone downstream, to replay from the pubend (version 17)

	// Client → broker.
	TypePublish         Type = 0x20
	TypeSubscribe       Type = 0x21
	TypeUnsubscribe     Type = 0x22
	TypeSubAck          Type = 0x23 // a durable subscriber's checkpoint
	TypePublishRun      Type = 0x24 // consecutive publishes of one client (version 13)
	TypePublishNoAck    Type = 0x25 // a Publish that asks for no PubAck (version 15)
	TypePublishRunNoAck Type = 0x26 // a PublishRun of publishes that ask for no PubAck (version 15)
	TypeSubConsumed     Type = 0x27 // what a durable subscriber's application has taken (version 16)

	// Broker → client.
	TypePubAck      Type = 0x30
	TypePubReject   Type = 0x31
	TypeSubStarted  Type = 0x32
	TypeSubRejected Type = 0x33
	TypeDelivery    Type = 0x34
	TypeGap         Type = 0x35 // ticks a durable subscriber will never get (released)
	TypeProgress    Type = 0x36 // a durable subscriber's checkpoint moved without a delivery
	TypePubAckRange Type = 0x37 // the acks of consecutive publishes of one publisher (version 11)
	TypeDeliveryRun Type = 0x38 // consecutive deliveries to one subscription (version 13)
)

var typeNames = map[Type]string{
	TypeHello: "Hello", TypeHeartbeat: "Heartbeat", TypeGoodbye: "Goodbye", TypeAuth: "Auth", TypeAuthOK: "AuthOK",
	TypeKnowledge: "Knowledge", TypeNack: "Nack", TypeAck: "Ack", TypeAckExpected: "AckExpected", TypeResync: "Resync",
	TypeSummary: "Summary", TypeSubReq: "SubReq", TypeSubReply: "SubReply", TypeRelay: "Relay",
	TypeLinkStatus: "LinkStatus", TypeRefetch: "Refetch", TypePayloads: "Payloads",
	TypePublish: "Publish", TypeSubscribe: "Subscribe", TypeUnsubscribe: "Unsubscribe",
	TypePubAck: "PubAck", TypePubReject: "PubReject", TypeSubStarted: "SubStarted",
	TypeSubRejected: "SubRejected", TypeDelivery: "Delivery",
	TypeReplay: "Replay", TypeReplayData: "ReplayData", TypeRaft: "Raft", TypeSubAck: "SubAck", TypeGap: "Gap", TypeProgress: "Progress",
	TypeDCQ: "DCQ", TypeUCA: "UCA", TypeSummaryDelta: "SummaryDelta",
	TypeForward: "Forward", TypeRaftChunk: "RaftChunk", TypeRaftChunkAck: "RaftChunkAck",
	TypeKnowledgeRun:    "KnowledgeRun",
	TypePubAckRange:     "PubAckRange",
	TypeDeliveryRun:     "DeliveryRun",
	TypePublishRun:      "PublishRun",
	TypePublishNoAck:    "PublishNoAck",
	TypePublishRunNoAck: "PublishRunNoAck",
	TypeSubConsumed:     "SubConsumed",
}

// String returns the message name of a type, or "type 0x.." for an unknown one.
func (t Type) String() string {
	if n, ok := typeNames[t]; ok {
		return n
	}
	return fmt.Sprintf("type 0x%02x", uint8(t))
}

// Known reports whether t is in the type table of this version.
func (t Type) Known() bool {
	_, ok := typeNames[t]
	return ok
}

// CheckHello validates a peer's Hello: it must speak Version (a client:
// MinClientVersion to Version; a broker: MinBrokerVersion to Version), name a known role and carry a non-empty ID
// of at most 255 bytes. The error wraps ErrVersion or ErrMalformed and is
// fit to send back in a Goodbye.
func CheckHello(h msg.Hello) error {
	if !versionOK(h) {
		return versionError{peer: h.Version, own: Version}
	}
	switch h.Role {
	case msg.RoleBroker, msg.RoleClient:
	default:
		return fmt.Errorf("%w: Hello: unknown role %d (want %d broker or %d client)", ErrMalformed, h.Role, msg.RoleBroker, msg.RoleClient)
	}
	if h.ID == "" {
		return fmt.Errorf("%w: Hello: empty id", ErrMalformed)
	}
	if len(h.ID) > maxIDLen {
		return fmt.Errorf("%w: Hello: id of %d bytes, at most %d allowed", ErrMalformed, len(h.ID), maxIDLen)
	}
	return nil
}

// versionOK reports whether this broker speaks h's version with h's role.
func versionOK(h msg.Hello) bool {
	lo := MinClientVersion
	if h.Role == msg.RoleBroker {
		lo = MinBrokerVersion
	}
	return h.Version >= lo && h.Version <= Version
}

// versionError reads "wire: peer speaks protocol version 7, this broker
// speaks 1" and matches ErrVersion under errors.Is. Its wording is frozen:
// a dialer of a later version reads the refuser's version out of it
// (RefusingVersion).
type versionError struct{ peer, own uint16 }

// refusalFormat is versionError's wording, the same in every version.
const refusalFormat = "wire: peer speaks protocol version %d, this broker speaks %d"

func (e versionError) Error() string {
	return fmt.Sprintf(refusalFormat, e.peer, e.own)
}

func (e versionError) Is(target error) bool { return target == ErrVersion }
