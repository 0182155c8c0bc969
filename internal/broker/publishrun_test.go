package broker_test

import (
	"bufio"
	"context"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aerie-mq/aerie/client"
	"github.com/aerie-mq/aerie/internal/broker"
	"github.com/aerie-mq/aerie/internal/msg"
	"github.com/aerie-mq/aerie/internal/tick"
	"github.com/aerie-mq/aerie/internal/wire"
)

// publishBurst publishes n events through the Go client as fast as
// PublishFunc takes them and returns each outcome's seq and tick in the
// order the outcomes arrived.
func publishBurst(t *testing.T, addr string, n int) (seqs []uint64, ticks []tick.Tick) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	c, err := client.Dial(ctx, addr, client.Options{ID: "burst", Logger: quietLogger()})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	var mu sync.Mutex
	all := make(chan struct{})
	for i := range n {
		err := c.PublishFunc(client.Message{Topic: "t", Payload: []byte{byte(i)}}, func(r client.Result) {
			mu.Lock()
			defer mu.Unlock()
			if r.Err != nil {
				t.Errorf("#%d: %v", r.Seq, r.Err)
			}
			seqs = append(seqs, r.Seq)
			ticks = append(ticks, tick.Tick(r.Ack.Tick))
			if len(seqs) == n {
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
		mu.Lock()
		defer mu.Unlock()
		t.Fatalf("%d of %d publishes answered", len(seqs), n)
	}
	mu.Lock()
	defer mu.Unlock()
	return seqs, ticks
}

// The Go client sends the publishes it queues together as PublishRun
// frames to a broker of version 13, which acks each once, in order; to a
// broker that speaks version 12 it sends a Publish frame each (a run
// there would be a protocol error that closes the connection).
func TestPublishRunsOnlyToNewBrokers(t *testing.T) {
	for _, v := range []uint16{wire.Version, wire.VersionPublishRun - 1} {
		opts := phbOptions(t)
		if v < wire.Version {
			opts = broker.AsVersion(opts, v)
		}
		node, stop := runNode(t, opts)
		const n = 3000
		seqs, ticks := publishBurst(t, opts.Clients, n)
		for i, seq := range seqs {
			if seq != uint64(i+1) {
				t.Fatalf("broker of version %d: outcome %d is #%d, want #%d", v, i, seq, i+1)
			}
			if i > 0 && ticks[i] <= ticks[i-1] {
				t.Fatalf("broker of version %d: #%d at tick %v after #%d at %v", v, seq, ticks[i], seq-1, ticks[i-1])
			}
		}
		runs := node.PublishRuns()
		t.Logf("broker of version %d: %d publishes in %d runs", v, n, runs)
		if v >= wire.VersionPublishRun && runs == 0 {
			t.Errorf("broker of version %d got no PublishRun for %d publishes", v, n)
		}
		if v < wire.VersionPublishRun && runs != 0 {
			t.Errorf("broker of version %d got %d PublishRuns", v, runs)
		}
		if err := stop(); err != nil {
			t.Fatal(err)
		}
	}
}

// rawRun connects as a raw client announcing version v and sends one
// PublishRun of n publishes; it returns what the broker answered until it
// acked them all or closed the connection.
func rawRun(t *testing.T, addr string, v uint16, n int) (ticks map[uint64]tick.Tick, bye *msg.Goodbye) {
	t.Helper()
	nc, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	run := msg.PublishRun{}
	for seq := 1; seq <= n; seq++ {
		run.Publishes = append(run.Publishes, msg.Publish{Publisher: "raw", Seq: uint64(seq), Topic: "t", Payload: []byte("x")})
	}
	// #2 again: a retry within the run is answered once, as a duplicate
	// Publish would be.
	run.Publishes = append(run.Publishes, run.Publishes[1])
	buf, _ := wire.AppendFrame(nil, msg.Hello{Version: v, Role: msg.RoleClient, ID: "raw"})
	buf, _ = wire.AppendFrame(buf, msg.Auth{})
	buf, _ = wire.AppendFrame(buf, run)
	if _, err := nc.Write(buf); err != nil {
		t.Fatal(err)
	}
	nc.SetReadDeadline(time.Now().Add(20 * time.Second))
	r := wire.NewReader(bufio.NewReader(nc), wire.DefaultMaxFrame)
	ticks = map[uint64]tick.Tick{}
	ack := func(a msg.PubAck) {
		if _, dup := ticks[a.Seq]; dup {
			t.Fatalf("#%d acked twice", a.Seq)
		}
		ticks[a.Seq] = a.Tick
	}
	for len(ticks) < n {
		m, err := r.Next()
		if err != nil {
			return ticks, nil
		}
		switch m := m.(type) {
		case msg.Goodbye:
			return ticks, &m
		case msg.PubAck:
			ack(m)
		case msg.PubAckRange:
			for i := range m.Len() {
				ack(m.Ack(i))
			}
		}
	}
	return ticks, nil
}

// A broker takes a PublishRun from a client that announced version 13, and
// acks each of its publishes once; from a client that announced version
// 12 it is a protocol error: the connection closes, nothing is published.
func TestPublishRunRefusedBeforeVersion13(t *testing.T) {
	opts := oneBroker(t, 0)
	ticks, bye := rawRun(t, opts.Clients, wire.VersionPublishRun-1, 10)
	if len(ticks) != 0 || bye == nil || !strings.Contains(bye.Reason, "protocol error") {
		t.Fatalf("version %d client's run: %d acks, goodbye %v; want none and a protocol error", wire.VersionPublishRun-1, len(ticks), bye)
	}
	ticks, bye = rawRun(t, opts.Clients, wire.VersionPublishRun, 10)
	if len(ticks) != 10 || bye != nil {
		t.Fatalf("version %d client's run: %d of 10 acked, goodbye %v", wire.VersionPublishRun, len(ticks), bye)
	}
	for seq := uint64(2); seq <= 10; seq++ {
		if ticks[seq] <= ticks[seq-1] {
			t.Fatalf("#%d at tick %v after #%d at %v", seq, ticks[seq], seq-1, ticks[seq-1])
		}
	}
}

// A standby member of a replicated PHB cell forwards the publishes of a
// client's PublishRuns to the serving leader one by one: each is acked
// once, in order, through the member.
func TestForwardedPublishRuns(t *testing.T) {
	if testing.Short() {
		t.Skip("a replicated cell with fsyncs and an election")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	c := startRaftCell(t, ctx, 3, broker.RaftClientsForward)
	member := c.nodes[(c.leader+1)%3]
	ticks, bye := rawRun(t, member.ClientAddr(), wire.VersionPublishRun, 10)
	if len(ticks) != 10 || bye != nil {
		t.Fatalf("a run through the forwarding member: %d of 10 acked, goodbye %v", len(ticks), bye)
	}
	const n = 3000
	seqs, at := publishBurst(t, member.ClientAddr(), n)
	for i, seq := range seqs {
		if seq != uint64(i+1) || (i > 0 && at[i] <= at[i-1]) {
			t.Fatalf("outcome %d is #%d at tick %v, after %v", i, seq, at[i], at[max(i-1, 0)])
		}
	}
	runs := member.PublishRuns()
	t.Logf("forwarding member: %d publishes in %d runs (and one raw)", n, runs-1)
	if runs < 2 {
		t.Errorf("the forwarding member got %d PublishRuns", runs)
	}
}
