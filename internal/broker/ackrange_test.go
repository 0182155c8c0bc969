package broker_test

import (
	"bufio"
	"context"
	"net"
	"sync"
	"testing"
	"time"

	"github.com/aerie-mq/aerie/client"
	"github.com/aerie-mq/aerie/internal/broker"
	"github.com/aerie-mq/aerie/internal/msg"
	"github.com/aerie-mq/aerie/internal/tick"
	"github.com/aerie-mq/aerie/internal/wire"
)

// rawPublish connects a raw client speaking protocol version v, sends n
// publishes in one write, and reads until every one is answered: it
// returns the ack frames received and the tick of each seq.
func rawPublish(t *testing.T, addr string, v uint16, id string, n int) (pubAcks, ranges int, ticks map[uint64]tick.Tick) {
	t.Helper()
	nc, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	buf, _ := wire.AppendFrame(nil, msg.Hello{Version: v, Role: msg.RoleClient, ID: id})
	buf, _ = wire.AppendFrame(buf, msg.Auth{}) // the broker has no users
	for seq := 1; seq <= n; seq++ {
		buf, _ = wire.AppendFrame(buf, msg.Publish{Publisher: id, Seq: uint64(seq), Topic: "t", Payload: []byte("x")})
	}
	if _, err := nc.Write(buf); err != nil {
		t.Fatal(err)
	}
	nc.SetReadDeadline(time.Now().Add(20 * time.Second))
	r := wire.NewReader(bufio.NewReader(nc), wire.DefaultMaxFrame)
	ticks = map[uint64]tick.Tick{}
	ack := func(a msg.PubAck) {
		if _, dup := ticks[a.Seq]; dup {
			t.Fatalf("version %d: #%d acked twice", v, a.Seq)
		}
		ticks[a.Seq] = a.Tick
	}
	for len(ticks) < n {
		m, err := r.Next()
		if err != nil {
			t.Fatalf("version %d: %d of %d publishes acked: %v", v, len(ticks), n, err)
		}
		switch m := m.(type) {
		case msg.Hello:
			if m.Version != v {
				t.Fatalf("a client of version %d answered in version %d", v, m.Version)
			}
		case msg.PubAck:
			pubAcks++
			ack(m)
		case msg.PubAckRange:
			ranges++
			for i := range m.Len() {
				ack(m.Ack(i))
			}
		}
	}
	return pubAcks, ranges, ticks
}

// A client of protocol version 10 (before PubAckRange) gets a PubAck per
// publish; one of version 11 gets the publishes that became durable
// together acked by fewer frames, each publish exactly once.
func TestAckRangesOnlyForNewClients(t *testing.T) {
	opts := oneBroker(t, 0)
	const n = 500
	acks, ranges, ticks := rawPublish(t, opts.Clients, wire.VersionPubAckRange-1, "old", n)
	if ranges != 0 || acks != n || len(ticks) != n {
		t.Fatalf("version %d client: %d PubAcks and %d ranges for %d publishes, want a PubAck each", wire.VersionPubAckRange-1, acks, ranges, n)
	}
	acks, ranges, ticks = rawPublish(t, opts.Clients, wire.Version, "new", n)
	if ranges == 0 || acks+ranges >= n || len(ticks) != n {
		t.Fatalf("version %d client: %d PubAcks and %d ranges for %d publishes, want fewer frames than publishes", wire.Version, acks, ranges, n)
	}
	t.Logf("version %d client: %d publishes acked by %d ranges and %d PubAcks", wire.Version, n, ranges, acks)
}

// Through the Go client: every publish's outcome arrives exactly once,
// with the tick its event is delivered at.
func TestClientRangeAcksResolveOnce(t *testing.T) {
	opts := oneBroker(t, 0)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	sc, err := client.Dial(ctx, opts.Clients, client.Options{Logger: quietLogger()})
	if err != nil {
		t.Fatal(err)
	}
	defer sc.Close()
	sub, err := sc.Subscribe(ctx, "t")
	if err != nil {
		t.Fatal(err)
	}
	pc, err := client.Dial(ctx, opts.Clients, client.Options{ID: "ranged", Logger: quietLogger()})
	if err != nil {
		t.Fatal(err)
	}
	defer pc.Close()
	const n = 3000
	var mu sync.Mutex
	outcomes := map[uint64][]client.Result{}
	all := make(chan struct{})
	for range n {
		err := pc.PublishFunc(client.Message{Topic: "t", Payload: []byte("x")}, func(r client.Result) {
			mu.Lock()
			defer mu.Unlock()
			outcomes[r.Seq] = append(outcomes[r.Seq], r)
			if len(outcomes) == n {
				close(all)
			}
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	select {
	case <-all:
	case <-ctx.Done():
		t.Fatal("publishes not all answered")
	}
	delivered := map[uint64]uint64{}
	for len(delivered) < n {
		select {
		case ev := <-sub.Events():
			delivered[ev.Seq] = ev.Tick
		case <-ctx.Done():
			t.Fatalf("%d of %d events delivered", len(delivered), n)
		}
	}
	time.Sleep(50 * time.Millisecond) // any second outcome would have come by now
	mu.Lock()
	defer mu.Unlock()
	for seq := uint64(1); seq <= n; seq++ {
		rs := outcomes[seq]
		if len(rs) != 1 {
			t.Fatalf("#%d: %d outcomes, want one", seq, len(rs))
		}
		if r := rs[0]; r.Err != nil || r.Ack.Duplicate || r.Ack.Pubend != "P1" || r.Ack.Tick != delivered[seq] {
			t.Fatalf("#%d: %+v, delivered at tick %d", seq, r, delivered[seq])
		}
	}
}

// Through a member of a replicated PHB cell that forwards to the serving
// leader: a client of version 11 gets the leader's ranges, relayed; one
// of version 10 gets a PubAck per publish.
func TestForwardedAckRanges(t *testing.T) {
	if testing.Short() {
		t.Skip("a replicated cell with fsyncs and an election")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	c := startRaftCell(t, ctx, 3, broker.RaftClientsForward)
	follower := c.nodes[(c.leader+1)%3].ClientAddr()
	const n = 300
	acks, ranges, ticks := rawPublish(t, follower, wire.VersionPubAckRange-1, "old", n)
	if ranges != 0 || acks != n || len(ticks) != n {
		t.Fatalf("version %d client: %d PubAcks and %d ranges for %d publishes, want a PubAck each", wire.VersionPubAckRange-1, acks, ranges, n)
	}
	acks, ranges, ticks = rawPublish(t, follower, wire.Version, "new", n)
	if ranges == 0 || acks+ranges >= n || len(ticks) != n {
		t.Fatalf("version %d client: %d PubAcks and %d ranges for %d publishes, want fewer frames than publishes", wire.Version, acks, ranges, n)
	}
	t.Logf("forwarded version %d client: %d publishes acked by %d ranges and %d PubAcks", wire.Version, n, ranges, acks)
}
