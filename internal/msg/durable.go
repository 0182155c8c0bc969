package msg

import (
	"fmt"
	"strings"

	"github.com/aerie-mq/aerie/internal/tick"
)

// Durable subscriptions (Gryphon DS, DSN 2003 §2–§4; docs/CONCEPTS.md "Durable subscriptions", P9).
//
// A durable subscriber names a checkpoint token when it subscribes
// (Subscribe.Durable, Subscribe.From): the SHB delivers every matching event
// after that token exactly once, in pubend order, whichever SHB it
// reconnects to. Ticks below the subscription's live start are caught up by
// replaying them from the pubend's log (Replay / ReplayData, v1 of the
// paper's catch-up streams, §3). The client acknowledges what it consumed
// with SubAck; the SHB turns the minimum acknowledged tick of its durable
// subscribers into its release floor (Gryphon DS §3, the release protocol).

// Gap tells a durable subscriber that ticks (From, To] of Pubend may have
// held matching events that it will never receive: the pubend had already
// released them (L) when the subscriber asked for them — early release by
// max_retain, or ticks this subscription acknowledged in an earlier session
// (Gryphon DS §4, "early release"). A Gap is delivered in tick order among
// the subscription's deliveries of that pubend.
type Gap struct {
	Sub      SubID
	Pubend   PubendID
	From, To tick.Tick
}

// Progress tells a durable subscriber that it has received everything it
// should up to Token (per pubend), though nothing (more) matched: its
// checkpoint moves while it is idle (docs/CONCEPTS.md "Durable subscriptions", silence).
type Progress struct {
	Sub   SubID
	Token Token
}

// SubAck is a client's acknowledgement: durable subscription Sub has
// consumed everything up to Token (its checkpoint). The SHB keeps it and
// derives its release floor from it (Gryphon DS §3); the delivery engine
// never sees it.
type SubAck struct {
	Sub   SubID
	Token Token
}

// SubConsumed is a client's report that its application has taken
// everything of durable subscription Sub up to Token (per pubend): the
// client library sends it as it hands events over, on its own, from
// protocol version 16 on (wire.VersionSubConsumed). Unlike SubAck it
// releases nothing — the application may not have saved those events — it
// only paces the subscription's catch-up: the SHB keeps at most a window
// of catch-up events delivered and not yet reported consumed (Gryphon DS
// §4: each catch-up stream runs at its subscriber's pace; gd/durable.go).
type SubConsumed struct {
	Sub   SubID
	Token Token
}

// A client sends SubConsumed once at least ConsumedEvery events or
// ConsumedBytes bytes of a durable subscription (counted as delivered)
// were handed to its application since its last report: a broker's
// window (gd.Config.CatchupWindowEvents, the config key catchup_window) is
// never smaller than twice that, so what stays unreported never stalls a
// catch-up.
const (
	ConsumedEvery = 64
	ConsumedBytes = 64 << 10
)

// Replay travels from an SHB up to a pubend, like SubReq: it asks for the
// events of (From, To] that match any of Clauses, for the catch-ups of
// that pubend's durable subscriptions at the SHB, asked together (Gryphon
// DS §3–§4, catch-up streams; read from the pubend's log instead of a
// PFS-fed stream). Sub names the request: its answer carries it back. Path
// holds the brokers passed, for the answer's way back; it starts with the
// SHB.
type Replay struct {
	Pubend   PubendID
	Sub      SubID
	From, To tick.Tick
	Clauses  []Clause
	Path     []NodeID
}

// ReplayData answers a Replay down its Path, like SubReply: the matching
// events of (From, To] in tick order, To at most the asked To (a large
// answer is chunked; the SHB asks again for the rest). Gap, when not zero,
// is the part of (From, To] the pubend had already released (L): its events
// are gone and the subscriber is told so (msg.Gap).
type ReplayData struct {
	Pubend   PubendID
	Sub      SubID
	From, To tick.Tick
	Events   []*Event
	Gap      tick.Range
	Path     []NodeID
}

func (m Gap) String() string {
	return fmt.Sprintf("Gap{%s %s (%d,%d]}", m.Sub, m.Pubend, m.From, m.To)
}
func (m Progress) String() string { return fmt.Sprintf("Progress{%s %s}", m.Sub, m.Token) }
func (m SubAck) String() string   { return fmt.Sprintf("SubAck{%s %s}", m.Sub, m.Token) }
func (m SubConsumed) String() string {
	return fmt.Sprintf("SubConsumed{%s %s}", m.Sub, m.Token)
}
func (m Replay) String() string {
	return fmt.Sprintf("Replay{%s %s (%d,%d] %v via %v}", m.Pubend, m.Sub, m.From, m.To, m.Clauses, m.Path)
}
func (m ReplayData) String() string {
	ticks := make([]string, len(m.Events))
	for i, ev := range m.Events {
		ticks[i] = fmt.Sprint(ev.Tick)
	}
	gap := ""
	if m.Gap != (tick.Range{}) {
		gap = fmt.Sprintf(" gap %s", m.Gap)
	}
	return fmt.Sprintf("ReplayData{%s %s (%d,%d]: [%s]%s via %v}", m.Pubend, m.Sub, m.From, m.To, strings.Join(ticks, " "), gap, m.Path)
}

func (Gap) isMsg()         {}
func (Progress) isMsg()    {}
func (SubAck) isMsg()      {}
func (SubConsumed) isMsg() {}
func (Replay) isMsg()      {}
func (ReplayData) isMsg()  {}
