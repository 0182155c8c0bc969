package sim

import (
	"fmt"
	"strings"

	"github.com/aerie-mq/aerie/internal/msg"
)

// MsgKind is the kind of a message between brokers, as the scale run's
// traffic counters tell them apart (docs/SCALE.md, control traffic per
// delivered event).
type MsgKind int

const (
	KindData         MsgKind = iota // knowledge carrying an event, first time (D)
	KindRetrans                     // knowledge answering a nack (Retrans), data or silence
	KindSilence                     // knowledge without an event (S and L)
	KindAck                         // Ack (anti-curiosity and the release protocol)
	KindAckExpected                 // AckExpected
	KindNack                        // Nack (curiosity)
	KindSummary                     // Summary: a whole filter edge
	KindSummaryDelta                // SummaryDelta: one change to it
	KindSubReq                      // SubReq, up to the pubend
	KindSubReply                    // SubReply, back down
	KindLinkStatus                  // LinkStatus
	KindRelay                       // Relay: sideways within a cell
	KindRefetch                     // Refetch and Payloads (bounded caches)
	KindOther                       // link set-up, congestion control, Raft
	NumMsgKinds
)

var kindNames = [NumMsgKinds]string{"data", "retrans", "silence", "ack", "ackexpected", "nack",
	"summary", "summarydelta", "subreq", "subreply", "linkstatus", "relay", "refetch", "other"}

func (k MsgKind) String() string { return kindNames[k] }

// kindOf classifies a message. Data that also carries silence (a D message
// has an L prefix and an S range) counts as data: it would have been sent
// for the event alone.
func kindOf(m msg.Msg) MsgKind {
	if k, ok := knowledgeOf(m); ok {
		switch {
		case k.Retrans:
			return KindRetrans
		case k.Event != nil:
			return KindData
		}
		return KindSilence
	}
	switch m.(type) {
	case msg.Ack:
		return KindAck
	case msg.AckExpected:
		return KindAckExpected
	case msg.Nack:
		return KindNack
	case msg.Summary:
		return KindSummary
	case msg.SummaryDelta:
		return KindSummaryDelta
	case msg.SubReq:
		return KindSubReq
	case msg.SubReply:
		return KindSubReply
	case msg.LinkStatus:
		return KindLinkStatus
	case msg.Relay:
		return KindRelay
	case msg.Refetch, msg.Payloads:
		return KindRefetch
	}
	return KindOther
}

// Traffic counts the messages and bytes (wire frames, length prefix
// included) put on links, by kind.
type Traffic struct {
	Msgs, Bytes [NumMsgKinds]uint64
}

func (t *Traffic) add(k MsgKind, size int) {
	t.Msgs[k]++
	t.Bytes[k] += uint64(size)
}

// Total is every message and byte counted.
func (t Traffic) Total() (msgs, bytes uint64) {
	for k := range NumMsgKinds {
		msgs += t.Msgs[k]
		bytes += t.Bytes[k]
	}
	return msgs, bytes
}

// Control is everything but first-time data: what the protocol costs on
// top of carrying the events (Gryphon GD §3: silence, acks, nacks and their
// answers, summaries, link status).
func (t Traffic) Control() (msgs, bytes uint64) {
	m, b := t.Total()
	return m - t.Msgs[KindData], b - t.Bytes[KindData]
}

// Minus is t less an earlier snapshot u of the same counters.
func (t Traffic) Minus(u Traffic) Traffic {
	for k := range NumMsgKinds {
		t.Msgs[k] -= u.Msgs[k]
		t.Bytes[k] -= u.Bytes[k]
	}
	return t
}

func (t Traffic) String() string {
	var b strings.Builder
	for k := range NumMsgKinds {
		if t.Msgs[k] > 0 {
			fmt.Fprintf(&b, " %s %d (%d B)", k, t.Msgs[k], t.Bytes[k])
		}
	}
	return strings.TrimSpace(b.String())
}

// LevelTraffic is the traffic on the links into one level of the tree:
// level 1 the first IB level (from the PHBs), level Depth+1 the SHBs.
type LevelTraffic struct {
	Level   int
	Links   int // connections into this level (a cell's twin has its own)
	Traffic Traffic
}

// trafficMeter counts what world.transmit puts on links, in total and by
// the level of the link's lower end.
type trafficMeter struct {
	all     Traffic
	byLevel []Traffic     // index: level of the downstream end
	levelOf map[*link]int // 0 for links not in the tree (never: every link has a lower end)
}

// newTrafficMeter assigns every link the level of its lower end: the
// first IB level is 1 (twins and the sideways link within a cell too),
// SHBs are at depth+1.
func newTrafficMeter(w *world, depth int) *trafficMeter {
	m := &trafficMeter{byLevel: make([]Traffic, depth+2), levelOf: map[*link]int{}}
	for _, l := range w.links {
		m.levelOf[l] = w.levelOf(l.b, depth)
	}
	return m
}

// levelOf is the level of broker id in the scale tree (scale topology
// names: p<i> PHBs, b<level>.<i>[x] IBs, s<i> SHBs).
func (w *world) levelOf(id msg.NodeID, depth int) int {
	switch w.nodes[id].broker.Role {
	case PHB:
		return 0
	case SHB:
		return depth + 1
	}
	var lv int
	fmt.Sscanf(string(id), "b%d.", &lv)
	return lv
}

// count notes one message put on link l; before the meter exists (the
// world being built) nothing is counted.
func (m *trafficMeter) count(l *link, mm msg.Msg, size int) {
	if m == nil {
		return
	}
	k := kindOf(mm)
	m.all.add(k, size)
	m.byLevel[m.levelOf[l]].add(k, size)
}

// levels is the per-level traffic since snapshot from, with link counts.
func (m *trafficMeter) levels(from []Traffic) []LevelTraffic {
	links := make([]int, len(m.byLevel))
	for _, lv := range m.levelOf {
		links[lv]++
	}
	var out []LevelTraffic
	for lv := 1; lv < len(m.byLevel); lv++ {
		t := m.byLevel[lv]
		if from != nil {
			t = t.Minus(from[lv])
		}
		out = append(out, LevelTraffic{Level: lv, Links: links[lv], Traffic: t})
	}
	return out
}
