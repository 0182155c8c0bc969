package broker_test

import (
	"bufio"
	"net"
	"testing"
	"time"

	"github.com/aerie-mq/aerie/internal/msg"
	"github.com/aerie-mq/aerie/internal/wire"
)

// rawSubscriber is a raw client speaking protocol version v, subscribed to
// topic t once started returns.
type rawSubscriber struct {
	t  *testing.T
	v  uint16
	nc net.Conn
	r  *wire.Reader
}

func newRawSubscriber(t *testing.T, addr string, v uint16, id string) *rawSubscriber {
	t.Helper()
	nc, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { nc.Close() })
	buf, _ := wire.AppendFrame(nil, msg.Hello{Version: v, Role: msg.RoleClient, ID: id})
	buf, _ = wire.AppendFrame(buf, msg.Auth{}) // the broker has no users
	buf, _ = wire.AppendFrame(buf, msg.Subscribe{Sub: "s", Pattern: "t"})
	if _, err := nc.Write(buf); err != nil {
		t.Fatal(err)
	}
	nc.SetReadDeadline(time.Now().Add(20 * time.Second))
	s := &rawSubscriber{t: t, v: v, nc: nc, r: wire.NewReader(bufio.NewReader(nc), wire.DefaultMaxFrame)}
	for {
		m, err := s.r.Next()
		if err != nil {
			t.Fatalf("version %d subscriber: %v before its subscription started", v, err)
		}
		if _, ok := m.(msg.SubStarted); ok {
			return s
		}
	}
}

// read reads until n events have arrived: it returns the Delivery and
// DeliveryRun frames they came in and each event's publish seq, in the
// order received.
func (s *rawSubscriber) read(n int) (single, runs int, seqs []uint64) {
	s.t.Helper()
	for len(seqs) < n {
		m, err := s.r.Next()
		if err != nil {
			s.t.Fatalf("version %d subscriber: %d of %d events: %v", s.v, len(seqs), n, err)
		}
		switch m := m.(type) {
		case *msg.Delivery:
			single++
			seqs = append(seqs, m.Event.Seq)
		case *msg.DeliveryRun:
			if s.v < wire.VersionDeliveryRun {
				s.t.Fatalf("a client of version %d was sent %v", s.v, m)
			}
			runs++
			for _, ev := range m.Events {
				if string(m.Sub) != "s" {
					s.t.Fatalf("run for subscription %q", m.Sub)
				}
				seqs = append(seqs, ev.Seq)
			}
		}
	}
	return single, runs, seqs
}

// A subscriber of protocol version 12 (before DeliveryRun) gets a Delivery
// per event; one of version 13 gets the events that leave its broker
// together in fewer frames. Both get every event once, in order.
func TestDeliveryRunsOnlyForNewClients(t *testing.T) {
	opts := oneBroker(t, 0)
	old := newRawSubscriber(t, opts.Clients, wire.VersionDeliveryRun-1, "old-sub")
	cur := newRawSubscriber(t, opts.Clients, wire.Version, "new-sub")
	const n = 500
	if _, _, ticks := rawPublish(t, opts.Clients, wire.Version, "pub", n); len(ticks) != n {
		t.Fatalf("%d of %d publishes acked", len(ticks), n)
	}
	check := func(s *rawSubscriber, seqs []uint64) {
		for i, seq := range seqs {
			if seq != uint64(i+1) {
				t.Fatalf("version %d subscriber: event %d is #%d, want #%d", s.v, i, seq, i+1)
			}
		}
	}
	single, runs, seqs := old.read(n)
	if runs != 0 || single != n {
		t.Fatalf("version %d subscriber: %d Deliveries and %d runs for %d events, want a Delivery each", old.v, single, runs, n)
	}
	check(old, seqs)
	single, runs, seqs = cur.read(n)
	if runs == 0 || single+runs >= n {
		t.Fatalf("version %d subscriber: %d Deliveries and %d runs for %d events, want fewer frames than events", cur.v, single, runs, n)
	}
	check(cur, seqs)
	t.Logf("version %d subscriber: %d events in %d runs and %d Deliveries", cur.v, n, runs, single)
}
