package broker

import (
	"testing"

	"github.com/aerie-mq/aerie/internal/msg"
	"github.com/aerie-mq/aerie/internal/shell"
	"github.com/aerie-mq/aerie/internal/tick"
)

// sentConn records what a forwarding member relays to its client.
type sentConn struct{ got []msg.Msg }

func (c *sentConn) Send(m msg.Msg) bool         { c.got = append(c.got, m); return true }
func (c *sentConn) CloseWith(_ error, _ string) {}
func (c *sentConn) CloseFlush(_ string)         {}

// A range from the leader that holds publishes the member had already
// relayed answers for (a resend's duplicate answer) reaches the client as
// a PubAck for each one still unanswered, each exactly once; so does every
// range for a client that does not read ranges (this one: not an aerie
// connection of version 11).
func TestForwardRangePartlyAnswered(t *testing.T) {
	conn := &sentConn{}
	n := &Node{raft: &raftState{fwd: newForwarding()}}
	fc := &fwdClient{conn: conn, pending: map[pubKey]fwdPub{}}
	n.raft.fwd.clients[7] = fc
	for seq := uint64(1); seq <= 6; seq++ {
		fc.pending[pubKey{"c", seq}] = fwdPub{n: seq}
	}
	n.forwardAnswer(shell.ClientID(7), pubKey{"c", 2}, msg.PubAck{Pubend: "P1", Publisher: "c", Seq: 2, Tick: 11})
	n.forwardRange(7, msg.PubAckRange{Pubend: "P1", Publisher: "c", Seq: 1, Ticks: []tick.Tick{10, 11, 12, 13}})
	n.forwardRange(7, msg.PubAckRange{Pubend: "P1", Publisher: "c", Seq: 1, Ticks: []tick.Tick{10, 11, 12, 13}}) // again: nothing
	seen := map[uint64]int{}
	for _, m := range conn.got {
		a, ok := m.(msg.PubAck)
		if !ok {
			t.Fatalf("relayed %v, want PubAcks only", m)
		}
		if want := tick.Tick(9 + a.Seq); a.Tick != want {
			t.Fatalf("#%d relayed at tick %d, want %d", a.Seq, a.Tick, want)
		}
		seen[a.Seq]++
	}
	for seq := uint64(1); seq <= 4; seq++ {
		if seen[seq] != 1 {
			t.Fatalf("#%d relayed %d times, want once (%v)", seq, seen[seq], conn.got)
		}
	}
	if len(fc.pending) != 2 {
		t.Fatalf("%d publishes still unanswered, want #5 and #6", len(fc.pending))
	}
}
