package forward

import (
	"strings"
	"testing"
	"time"

	"github.com/aerie-mq/aerie/internal/auth"
	"github.com/aerie-mq/aerie/internal/msg"
	"github.com/aerie-mq/aerie/internal/shell"
	"github.com/aerie-mq/aerie/internal/wire"
)

// relayLinks is a Relay's way out in these tests: the links up, by
// neighbour (its version; absent: not linked), and what was sent.
type relayLinks struct {
	links    map[msg.NodeID]uint16
	sent     []sentForward
	toClient []msg.Msg
}

type sentForward struct {
	to msg.NodeID
	m  msg.Forward
}

func (l *relayLinks) Send(to msg.NodeID, _ any, m msg.Forward) {
	l.sent = append(l.sent, sentForward{to, m})
}
func (l *relayLinks) ToClient(_ shell.ClientID, m msg.Msg) { l.toClient = append(l.toClient, m) }
func (l *relayLinks) Link(to msg.NodeID) (any, uint16, bool) {
	v, ok := l.links[to]
	return to, v, ok
}

// An SHB s1 below the redundant cell ib1 (b1, b2), which leads to P1 and
// P2; it hosts nothing.
func newTestRelay(links map[msg.NodeID]uint16) (*Relay, *relayLinks) {
	l := &relayLinks{links: links}
	r := NewRelay("s1", nil, map[msg.PubendID]msg.NodeID{"P1": "ib1", "P2": "ib1"},
		map[msg.NodeID][]msg.NodeID{"ib1": {"b2", "b1"}}, l, time.Second)
	return r, l
}

func TestRelayVersionIsTheWires(t *testing.T) {
	if RelayVersion != wire.VersionRelay {
		t.Fatalf("forward.RelayVersion %d, wire.VersionRelay %d", RelayVersion, wire.VersionRelay)
	}
}

// A publish naming no pubend goes to one picked by the publisher's hash,
// the same every time; one naming a pubend of no tree through the broker
// is refused with a reason naming it; one the user may not make is
// refused; the rest go to the first linked member of the upstream cell,
// asking for an ack even if the client asked for none.
func TestRelayPublish(t *testing.T) {
	r, l := newTestRelay(map[msg.NodeID]uint16{"b1": RelayVersion, "b2": RelayVersion})
	perms, err := auth.NewPerms("u", []string{"a.>"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	r.ClientUp(1, perms, true)
	now := time.Time{}
	if !r.Publish(now, 1, msg.Publish{Pubend: "P9", Publisher: "c", Seq: 1, Topic: "a.b"}) {
		t.Fatal("a publish to an unknown pubend was not the relay's to answer")
	}
	if rej, ok := l.toClient[0].(msg.PubReject); !ok || !strings.Contains(rej.Reason, `pubend "P9" is unknown at broker s1`) {
		t.Fatalf("answer %v, want a refusal naming P9", l.toClient[0])
	}
	r.Publish(now, 1, msg.Publish{Pubend: "P1", Publisher: "c", Seq: 2, Topic: "b"})
	if rej, ok := l.toClient[1].(msg.PubReject); !ok || !strings.Contains(rej.Reason, "not authorized") {
		t.Fatalf("answer %v, want a refusal for the topic", l.toClient[1])
	}
	r.Publish(now, 1, msg.Publish{Publisher: "c", Seq: 3, Topic: "a.b", NoAck: true})
	r.Publish(now, 1, msg.Publish{Publisher: "c", Seq: 4, Topic: "a.b"})
	var got []msg.Publish
	for _, s := range l.sent {
		if p, ok := s.m.Msg.(msg.Publish); ok {
			if s.to != "b1" {
				t.Fatalf("relayed to %s, want b1 (the first linked member by id)", s.to)
			}
			got = append(got, p)
		}
	}
	if len(got) != 2 || got[0].Pubend != r.Pick("c") || got[1].Pubend != got[0].Pubend || got[0].NoAck {
		t.Fatalf("relayed %+v: want seqs 3 and 4 to pubend %s, asking for acks", got, r.Pick("c"))
	}
}

// A member that refuses (it does not serve) makes the next retry go to
// the next member, in a new stream, with every unanswered publish; an
// answer relayed back reaches the client once.
func TestRelayRefusedMovesOn(t *testing.T) {
	r, l := newTestRelay(map[msg.NodeID]uint16{"b1": RelayVersion, "b2": RelayVersion})
	r.ClientUp(1, nil, false)
	now := time.Time{}
	r.Publish(now, 1, msg.Publish{Pubend: "P1", Publisher: "c", Seq: 1})
	r.Publish(now, 1, msg.Publish{Pubend: "P1", Publisher: "c", Seq: 2})
	first := l.sent[len(l.sent)-1].m.Client
	if _, err := r.FromPeer(now, "b1", false, msg.Forward{Client: first, Msg: msg.Goodbye{Reason: "does not lead"}}, nil); err != nil {
		t.Fatal(err)
	}
	l.sent = nil
	r.Follow(now, true)
	var to []msg.NodeID
	var seqs []uint64
	for _, s := range l.sent {
		if p, ok := s.m.Msg.(msg.Publish); ok {
			to, seqs = append(to, s.to), append(seqs, p.Seq)
			if s.m.Client == first {
				t.Fatal("resent in the refused stream")
			}
		}
	}
	if len(seqs) != 2 || seqs[0] != 1 || seqs[1] != 2 || to[0] != "b2" || to[1] != "b2" {
		t.Fatalf("resent %v to %v, want 1 and 2 to b2", seqs, to)
	}
	stream := l.sent[len(l.sent)-1].m.Client
	for range 2 { // the second is a duplicate answer
		r.FromPeer(now, "b2", false, msg.Forward{Client: stream, Msg: msg.PubAck{Pubend: "P1", Publisher: "c", Seq: 1, Tick: 5}}, nil)
	}
	if len(l.toClient) != 1 {
		t.Fatalf("client got %v, want one PubAck", l.toClient)
	}
}

// An upstream of a protocol version that takes no relayed publish: the
// publish is refused with the reason, nothing is sent.
func TestRelayOldUpstream(t *testing.T) {
	r, l := newTestRelay(map[msg.NodeID]uint16{"b1": RelayVersion - 1})
	r.ClientUp(1, nil, false)
	r.Publish(time.Time{}, 1, msg.Publish{Pubend: "P1", Publisher: "c", Seq: 1})
	if rej, ok := l.toClient[0].(msg.PubReject); !ok || !strings.Contains(rej.Reason, "protocol version") {
		t.Fatalf("answer %v, want a refusal naming the version", l.toClient)
	}
	for _, s := range l.sent {
		if _, ok := s.m.Msg.(msg.Publish); ok {
			t.Fatalf("sent %v to an upstream that cannot take it", s)
		}
	}
}

// Streams from downstream: a publish opens a session once per stream; a
// publish from a neighbour that is not downstream is a protocol error;
// the stream's end and the link's loss close the sessions.
func TestRelayInbound(t *testing.T) {
	r, _ := newTestRelay(nil)
	next := shell.ClientID(100)
	newClient := func() shell.ClientID { next++; return next }
	in, err := r.FromPeer(time.Time{}, "s9", true, msg.Forward{Client: 1, Msg: msg.Publish{Publisher: "c", Seq: 1}}, newClient)
	if err != nil || !in.Open || in.Client != 101 || in.Publish == nil {
		t.Fatalf("first publish of a stream: %+v, %v", in, err)
	}
	if in, _ = r.FromPeer(time.Time{}, "s9", true, msg.Forward{Client: 1, Msg: msg.Publish{Publisher: "c", Seq: 2}}, newClient); in.Open || in.Client != 101 {
		t.Fatalf("second publish of the stream: %+v", in)
	}
	if _, err := r.FromPeer(time.Time{}, "b1", false, msg.Forward{Client: 1, Msg: msg.Publish{Publisher: "c", Seq: 1}}, newClient); err == nil {
		t.Fatal("a relayed publish from upstream taken")
	}
	in, _ = r.FromPeer(time.Time{}, "s9", true, msg.Forward{Client: 2, Msg: msg.Publish{Publisher: "d", Seq: 1}}, newClient)
	if in, _ := r.FromPeer(time.Time{}, "s9", true, msg.Forward{Client: 1, Msg: msg.Goodbye{Reason: ClientGone}}, nil); in.Ended != 101 {
		t.Fatalf("end of stream 1: %+v", in)
	}
	if gone := r.PeerDown("s9"); len(gone) != 1 || gone[0] != in.Client {
		t.Fatalf("link down closed %v, want [%d]", gone, in.Client)
	}
}
