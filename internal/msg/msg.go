// Package msg defines the messages the guaranteed-delivery cores exchange:
// knowledge and curiosity between brokers (seed 000 §3.1), the subscription
// control messages of docs/CONCEPTS.md P6, client requests and their answers, and the
// records a pubend persists. The wire codec (issue: real broker) encodes these
// structs; the cores and the simulator pass them by value.
//
// Pure: no I/O.
package msg

import (
	"fmt"
	"strings"

	"github.com/aerie-mq/aerie/internal/tick"
)

// NodeID names one physical broker.
type NodeID string

// PubendID names one publishing endpoint (an ordered, persistent stream).
type PubendID string

// SubID names one subscription, unique network-wide (the SHB prefixes it).
type SubID string

// Event is one published message as logged at its pubend. It is immutable
// once logged; streams share it by pointer.
//
// An event built by NewEvent (at its PHB) or read by ReadEvent (from a log
// record or a frame) carries its canonical encoding, and its fields are
// views of those bytes: the log record and every frame that carries the
// event copy the bytes as they are (event_codec.go), so an event is encoded
// once in its life, at its PHB. Literals (tests) have no encoding and are
// encoded field by field.
type Event struct {
	Pubend    PubendID
	Tick      tick.Tick
	Publisher string // client id of the publisher, for idempotent retries
	Seq       uint64 // the publisher's sequence number
	Topic     string
	Props     Props // a view of the encoded properties
	Payload   []byte

	enc []byte // the canonical encoding, nil for a literal
}

// Equal reports whether two events are byte-identical (oracle invariant I1).
func (e *Event) Equal(o *Event) bool {
	if e == o {
		return true
	}
	if e == nil || o == nil || e.Pubend != o.Pubend || e.Tick != o.Tick || e.Publisher != o.Publisher ||
		e.Seq != o.Seq || e.Topic != o.Topic || string(e.Payload) != string(o.Payload) {
		return false
	}
	return e.Props.enc == o.Props.enc // canonical: equal properties encode equally
}

func (e *Event) String() string {
	return fmt.Sprintf("%s@%d %s%s (%s#%d, %dB)", e.Pubend, e.Tick, e.Topic, e.Props.String(), e.Publisher, e.Seq, len(e.Payload))
}

// Msg is any message between brokers or between a broker and a client.
type Msg interface {
	fmt.Stringer
	isMsg()
}

// Envelope addresses a message from one broker to a neighbour.
type Envelope struct {
	From, To NodeID
	Msg      Msg
}

func (e Envelope) String() string { return fmt.Sprintf("%s->%s %v", e.From, e.To, e.Msg) }

// Knowledge is a data or silence message (seed 000 §3.1; docs/CONCEPTS.md "Messages", P4):
// L on ticks <= Final, S on [Start, End] except VTick, D(Event) on VTick when
// Event is non-nil. Start > End carries only the final prefix. Retrans marks
// an answer to a nack, which is sent only down curious paths.
type Knowledge struct {
	Pubend     PubendID
	Final      tick.Tick
	Start, End tick.Tick
	VTick      tick.Tick
	Event      *Event
	Retrans    bool
	// Unvouched: the top Unvouched ticks of Final were made final past a
	// downstream that was gone (Ack.Unvouched): the receiver may take the
	// final ticks it was not told of as silence only up to Final −
	// Unvouched; a subend asks the pubend for the rest (docs/RELIABILITY.md
	// "Running for weeks"). Zero where no downstream was ever judged gone.
	Unvouched tick.Tick
}

// Vouched is the part of the final prefix the receiver may take as
// silence for the ticks it was not told of.
func (m Knowledge) Vouched() tick.Tick { return m.Final - min(m.Unvouched, m.Final) }

// VouchedOnly is m as a broker that cannot read Unvouched is told it: its
// final prefix only as far as it is vouched, and no silence below the
// original final prefix (a range inside L would read as silence there).
func (m Knowledge) VouchedOnly() Knowledge {
	if m.Unvouched == 0 {
		return m
	}
	f := m.Final
	m.Final, m.Unvouched = m.Vouched(), 0
	if m.Start <= f {
		m.Start = f + 1
	}
	if m.Start > m.End {
		m.Start, m.End = 1, 0
	}
	return m
}

// unvouchedString renders a non-zero Unvouched for String methods.
func unvouchedString(u tick.Tick) string {
	if u == 0 {
		return ""
	}
	return fmt.Sprintf(" unvouched %d", u)
}

func (m Knowledge) String() string {
	kind := "Silence"
	if m.Event != nil {
		kind = "Data"
	}
	rt := unvouchedString(m.Unvouched)
	if m.Retrans {
		rt += " retrans"
	}
	if m.Event != nil {
		return fmt.Sprintf("%s{%s L≤%d S%s D@%d %s%s}", kind, m.Pubend, m.Final, tick.Range{Lo: m.Start, Hi: m.End}, m.VTick, m.Event.Topic, rt)
	}
	return fmt.Sprintf("%s{%s L≤%d S%s%s}", kind, m.Pubend, m.Final, tick.Range{Lo: m.Start, Hi: m.End}, rt)
}

// KnowledgeRun is consecutive Knowledge messages of one pubend to one
// neighbour in one message (protocol version 12, docs/PROTOCOL.md 0x44):
// L on ticks <= Final, D on each of Events at its own tick, S on every
// other tick of [Start, End]. Events are in ascending tick order within
// [Start, End]. It says exactly what its pieces (Split) say; a broker
// sends one per downstream and Pubend where it would send a Knowledge per
// event, so that a run of events costs one frame, one queue slot and one
// pass of the receiving engine. Gryphon GD §3.1 already lets one data or
// silence message carry knowledge of a range of ticks; a run is several
// of them side by side (docs/CONCEPTS.md "Messages").
type KnowledgeRun struct {
	Pubend     PubendID
	Final      tick.Tick
	Start, End tick.Tick
	Retrans    bool
	Events     []*Event
	Unvouched  tick.Tick // as Knowledge.Unvouched
}

func (m KnowledgeRun) String() string {
	rt := unvouchedString(m.Unvouched)
	if m.Retrans {
		rt += " retrans"
	}
	var b strings.Builder
	for i, ev := range m.Events {
		if i > 0 {
			b.WriteByte(' ')
		}
		fmt.Fprintf(&b, "D@%d %s", ev.Tick, ev.Topic)
	}
	return fmt.Sprintf("Run{%s L≤%d S%s %s%s}", m.Pubend, m.Final, tick.Range{Lo: m.Start, Hi: m.End}, b.String(), rt)
}

// Split calls emit with the run as Knowledge messages, in tick order: the
// first from Start, each further one from its event's tick, each up to the
// tick before the next one's (the last up to End). Their union is the run.
func (m KnowledgeRun) Split(emit func(Knowledge)) {
	k := Knowledge{Pubend: m.Pubend, Final: m.Final, Start: m.Start, Retrans: m.Retrans, Unvouched: m.Unvouched}
	for i, ev := range m.Events {
		if i > 0 {
			k.End = ev.Tick - 1
			emit(k)
			k.Start = ev.Tick
		}
		k.VTick, k.Event = ev.Tick, ev
	}
	k.End = m.End
	emit(k)
}

// Nack asks upstream for the values of a contiguous range of ticks
// (curiosity C, seed 000 §3.1).
type Nack struct {
	Pubend     PubendID
	Start, End tick.Tick
}

func (m Nack) String() string {
	return fmt.Sprintf("Nack{%s %s}", m.Pubend, tick.Range{Lo: m.Start, Hi: m.End})
}

// Ack turns ticks [0, T] anti-curious (A) in the receiver's ostream for the
// sender (seed 000 §3.1), and carries the release protocol's two values for
// the sender's subtree (Gryphon DS, DSN 2003 §3; docs/CONCEPTS.md P11): Delivered,
// the minimum latestDelivered(p) of the SHBs below, and Released, the
// minimum they released (acknowledged by all their durable subscribers).
// Released <= Delivered <= T. Without durable subscribers below, both equal
// T; an Ack built with both zero and T > 0 says that nothing below was
// released, so senders always fill them.
type Ack struct {
	Pubend    PubendID
	T         tick.Tick
	Released  tick.Tick
	Delivered tick.Tick
	// Unvouched: the top Unvouched ticks of T were acked past a downstream
	// of the sender that was gone for longer than max_retain (not received
	// below it): T − Unvouched is the sender's clean ack prefix, the part
	// its upstream may tell it is final as silence for what it was not
	// sent (docs/RELIABILITY.md "Running for weeks"). Zero in a network
	// where no downstream was ever judged gone.
	Unvouched tick.Tick
}

func (m Ack) String() string {
	uv := unvouchedString(m.Unvouched)
	if m.Released == m.T && m.Delivered == m.T {
		return fmt.Sprintf("Ack{%s %d%s}", m.Pubend, m.T, uv)
	}
	return fmt.Sprintf("Ack{%s %d released %d delivered %d%s}", m.Pubend, m.T, m.Released, m.Delivered, uv)
}

// Clean is the ack prefix without its unvouched top: what the sender acked
// with nothing below it skipped.
func (m Ack) Clean() tick.Tick { return m.T - min(m.Unvouched, m.T) }

// CleanOnly is the ack with its unvouched top left out: what a broker that
// cannot read Unvouched is told, so that it holds at the clean prefix.
func (m Ack) CleanOnly() Ack {
	t := m.Clean()
	return Ack{Pubend: m.Pubend, T: t, Released: min(m.Released, t), Delivered: min(m.Delivered, t)}
}

// AckExpected travels down paths that have not acked up to T; a subend
// receiving it nacks every Q tick <= T at once (seed 000 §3.2).
type AckExpected struct {
	Pubend PubendID
	T      tick.Tick
}

func (m AckExpected) String() string { return fmt.Sprintf("AckExpected{%s %d}", m.Pubend, m.T) }

// Resync tells a downstream that was gone for longer than the pubend's
// max_retain (docs/RELIABILITY.md "Running for weeks") that the sender
// made every tick up to Upto final without it: what of them it had not
// acknowledged, it asks the pubend for by a Replay, and its subscribers get
// a gap for what the pubend released (protocol version 17).
type Resync struct {
	Pubend PubendID
	Upto   tick.Tick
}

func (m Resync) String() string { return fmt.Sprintf("Resync{%s %d}", m.Pubend, m.Upto) }

// Summary tells an upstream neighbour the union of the subscriptions reachable
// through the sender: its filter edge (docs/CONCEPTS.md "The knowledge graph", P6). All means "pass
// everything", which is also what an upstream assumes before a summary arrives.
// A Summary is the whole union (with All, the clauses are still the union's,
// for the SummaryDeltas that follow); SummaryDelta changes it.
//
// Each clause is a topic pattern with an optional selector (issue 4:
// selectors filter inside the network): Selectors is nil or as long as
// Patterns, "" meaning the pattern alone.
type Summary struct {
	All       bool
	Patterns  []string
	Selectors []string
}

func (m Summary) String() string {
	if m.All {
		return "Summary{all}"
	}
	parts := make([]string, len(m.Patterns))
	for i, p := range m.Patterns {
		parts[i] = p
		if i < len(m.Selectors) && m.Selectors[i] != "" {
			parts[i] += "[" + m.Selectors[i] + "]"
		}
	}
	return fmt.Sprintf("Summary{%s}", strings.Join(parts, " "))
}

// Clause is one clause of a summary: a topic pattern and a selector (""
// for the pattern alone).
type Clause struct {
	Pattern, Selector string
}

func (c Clause) String() string {
	if c.Selector == "" {
		return c.Pattern
	}
	return c.Pattern + "[" + c.Selector + "]"
}

// SummaryDelta changes the summary a broker last sent on this link, so that
// an edge with many clauses behind it costs each subscription's clause once
// rather than the whole union at every change. Seq numbers the deltas since
// the last Summary sent on the link (1, 2, …): a receiver that sees another
// number has lost its base and passes everything until the next Summary
// (wider, never narrower). All, when set, makes the edge pass everything
// whatever its clauses; Remove applies before Add.
type SummaryDelta struct {
	Seq         uint64
	All         bool
	Add, Remove []Clause
}

func (m SummaryDelta) String() string {
	var parts []string
	if m.All {
		parts = append(parts, "all")
	}
	for _, c := range m.Remove {
		parts = append(parts, "-"+c.String())
	}
	for _, c := range m.Add {
		parts = append(parts, "+"+c.String())
	}
	return fmt.Sprintf("SummaryDelta{#%d %s}", m.Seq, strings.Join(parts, " "))
}

// SubReq travels from an SHB up to a pubend after every filter on the way
// has been widened for a new subscription; the pubend answers SubReply with
// the tick from which the subscription is complete (docs/CONCEPTS.md P6). Path holds
// the brokers passed, for the reply's way back.
type SubReq struct {
	Pubend PubendID
	Sub    SubID
	Path   []NodeID
}

func (m SubReq) String() string { return fmt.Sprintf("SubReq{%s %s via %v}", m.Pubend, m.Sub, m.Path) }

// SubReply carries a subscription's start tick for one pubend back down Path.
type SubReply struct {
	Pubend PubendID
	Sub    SubID
	Start  tick.Tick
	Path   []NodeID
}

func (m SubReply) String() string {
	return fmt.Sprintf("SubReply{%s %s start=%d via %v}", m.Pubend, m.Sub, m.Start, m.Path)
}

// Relay carries a broker-to-broker message sideways to a member of the
// sender's own cell, which forwards it to To: the sender has lost its links
// to To's cell (seed 000 §3.1, "Propagation through Link Bundles"). Msg is
// never itself a Relay.
type Relay struct {
	To  NodeID
	Msg Msg
}

func (m Relay) String() string { return fmt.Sprintf("Relay{to %s: %v}", m.To, m.Msg) }

// LinkStatus tells a broker's upstream neighbours and cell peers which of
// its downstream cells it cannot reach (no link up to any member), sent when
// that changes and every SilenceInterval. An upstream then prefers another
// member of this broker's cell for new knowledge, so sideways routing
// (Relay) lasts only until the status arrives: seed 000 §3.1, "Periodic
// link status messages are exchanged between brokers so that this sideways
// routing is only transient". Unreachable is sorted; empty means every downstream is reached.
type LinkStatus struct {
	Unreachable []NodeID
}

func (m LinkStatus) String() string { return fmt.Sprintf("LinkStatus{unreachable %v}", m.Unreachable) }

// Refetch asks upstream for the payloads of events the sender knows as D
// but dropped from its bounded cache (docs/CONCEPTS.md P12), to answer a nack from
// its downstream. It changes no knowledge: the answer (Payloads) only fills
// payloads back into D ticks, so an upstream that now renders a tick
// differently (a filter that changed, a restart) cannot contradict what the
// sender knows. A broker that holds the payloads answers; for the rest it
// appends itself to Path and asks its own upstream, up to the pubend, which
// reads them from its log. Ranges are sorted and disjoint; Path starts with
// the broker that needs the payloads.
type Refetch struct {
	Pubend PubendID
	Ranges []tick.Range
	Path   []NodeID
}

func (m Refetch) String() string {
	return fmt.Sprintf("Refetch{%s %v via %v}", m.Pubend, m.Ranges, m.Path)
}

// Payloads answers a Refetch: Events are every event held in Ranges (a part
// of what was asked, or all of it). It travels back down Path, last entry
// first: each broker on the way fills the payloads it lacks and passes it
// on; the first entry asked. Final is the answering broker's final prefix
// (L, as in Knowledge): a tick asked at or below it has no payload because
// it was released, not lost, and every broker on the way takes it as L.
type Payloads struct {
	Pubend PubendID
	Ranges []tick.Range
	Final  tick.Tick
	Events []*Event
	Path   []NodeID
}

func (m Payloads) String() string {
	ticks := make([]string, len(m.Events))
	for i, ev := range m.Events {
		ticks[i] = fmt.Sprint(ev.Tick)
	}
	return fmt.Sprintf("Payloads{%s %v L≤%d: %d events [%s] via %v}", m.Pubend, m.Ranges, m.Final, len(m.Events), strings.Join(ticks, " "), m.Path)
}

// Raft carries one Raft message between the members of a replicated PHB
// cell (internal/raftphb): Data is the raftpb.Message in etcd's own
// protobuf encoding, which the receiving member decodes and steps.
type Raft struct {
	Data []byte
}

func (m Raft) String() string { return fmt.Sprintf("Raft{%d bytes}", len(m.Data)) }

// RaftChunk carries one piece of a Raft snapshot message too large for one
// frame, between the members of a replicated PHB cell: the leader's
// MsgSnap and its store image (internal/raftphb/node), cut into pieces of
// at most a configured size as the image is read. A transfer is named by
// the sender's Raft id and its sequence number Seq; Term and Index are the
// MsgSnap's term and the snapshot's index, which the reassembled message
// must carry. Data is the transfer's bytes from Offset; Last marks the
// final piece (the sender learns the size only at the end); CRC is the
// CRC-32C (Castagnoli) of Data.
type RaftChunk struct {
	From, To    uint64
	Seq         uint64
	Term, Index uint64
	Offset      uint64
	Last        bool
	CRC         uint32
	Data        []byte
}

func (m RaftChunk) String() string {
	last := ""
	if m.Last {
		last = ", last"
	}
	return fmt.Sprintf("RaftChunk{%d→%d #%d term %d index %d: %d+%d%s}", m.From, m.To, m.Seq, m.Term, m.Index, m.Offset, len(m.Data), last)
}

// RaftChunkAck answers RaftChunk: the receiver holds transfer Seq's first
// Next bytes (all of them, after the last chunk: it has the whole message
// and stepped it). The sender keeps a few chunks beyond Next in flight,
// no more.
type RaftChunkAck struct {
	From, To uint64
	Seq      uint64
	Next     uint64
}

func (m RaftChunkAck) String() string {
	return fmt.Sprintf("RaftChunkAck{%d→%d #%d next %d}", m.From, m.To, m.Seq, m.Next)
}

func (Raft) isMsg()         {}
func (RaftChunk) isMsg()    {}
func (RaftChunkAck) isMsg() {}
func (Relay) isMsg()        {}
func (Refetch) isMsg()      {}
func (Payloads) isMsg()     {}
func (LinkStatus) isMsg()   {}
func (Knowledge) isMsg()    {}
func (KnowledgeRun) isMsg() {}
func (Nack) isMsg()         {}
func (Ack) isMsg()          {}
func (AckExpected) isMsg()  {}
func (Resync) isMsg()       {}
func (Summary) isMsg()      {}
func (SummaryDelta) isMsg() {}
func (SubReq) isMsg()       {}
func (SubReply) isMsg()     {}
