package main

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/aerie-mq/aerie/client"
	"github.com/aerie-mq/aerie/internal/msg"
	"github.com/aerie-mq/aerie/internal/oracle"
	"github.com/aerie-mq/aerie/internal/tick"
)

// TestKill9 runs the dev topology as four `aerie broker` processes and
// kill -9s the IB, then the PHB, then an SHB in the middle of a publish
// stream. The publisher must end with every event acknowledged once; the
// oracle of the simulator then checks every delivery of every subscriber
// session (no phantom, at most once, pubend order, nothing skipped), and
// the sessions alive at the end must hold every event after their start
// token. (A killed SHB ends its non-durable sessions; the subscriber
// subscribes again and is complete from its new token.)
func TestKill9(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs processes")
	}
	f := newProcFixture(t)
	port, dir := f.port, f.dir
	ports := map[string][2]int{"p1": {port(), port()}, "b1": {port(), 0}, "s1": {port(), port()}, "s2": {port(), port()}}
	cfg := ""
	for _, id := range []string{"p1", "b1", "s1", "s2"} {
		cfg += fmt.Sprintf("[[broker]]\nid = %q\nlisten = \"127.0.0.1:%d\"\n", id, ports[id][0])
		if ports[id][1] != 0 {
			cfg += fmt.Sprintf("clients = \"127.0.0.1:%d\"\n", ports[id][1])
		}
		if id == "p1" {
			cfg += "data = \"data/p1\"\npubends = [\"P1\", \"P2\"]\n"
		}
		cfg += "\n"
	}
	cfg += "[[link]]\nup = \"p1\"\ndown = \"b1\"\n[[link]]\nup = \"b1\"\ndown = \"s1\"\n[[link]]\nup = \"b1\"\ndown = \"s2\"\n"
	f.writeConfig(cfg)
	start, kill := f.start, f.kill
	for _, id := range []string{"p1", "b1", "s1", "s2"} {
		start(id)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	dial := func(id string, cid string) *client.Client {
		return f.dial(ctx, fmt.Sprintf("127.0.0.1:%d", ports[id][1]), cid)
	}
	// A session is one subscription as its subscriber saw it; the oracle
	// checks them all once the whole log is known.
	type session struct {
		id     msg.SubID
		node   string
		token  msg.Token
		events []*msg.Event
		ended  error
		done   chan struct{}
		more   chan struct{} // signalled after each delivery
	}
	var smu sync.Mutex
	var sessions []*session
	subscribe := func(node string, n int) *session {
		c := dial(node, fmt.Sprintf("sub-%s-%d", node, n))
		sub, err := c.Subscribe(ctx, ">")
		if err != nil {
			t.Fatalf("subscribe at %s: %v", node, err)
		}
		s := &session{id: msg.SubID(fmt.Sprintf("%s/%d", node, n)), node: node, token: msg.Token{}, done: make(chan struct{}), more: make(chan struct{}, 1)}
		for p, tk := range sub.Token() {
			s.token[msg.PubendID(p)] = tick.Tick(tk)
		}
		smu.Lock()
		sessions = append(sessions, s)
		smu.Unlock()
		go func() {
			defer close(s.done)
			for ev := range sub.Events() {
				smu.Lock()
				s.events = append(s.events, &msg.Event{Pubend: msg.PubendID(ev.Pubend), Tick: tick.Tick(ev.Tick), Publisher: ev.Publisher,
					Seq: ev.Seq, Topic: ev.Topic, Props: msg.MustProps(ev.Props.Map()), Payload: ev.Payload})
				smu.Unlock()
				select {
				case s.more <- struct{}{}:
				default:
				}
			}
			smu.Lock()
			s.ended = sub.Err()
			smu.Unlock()
		}()
		return s
	}
	s1 := subscribe("s1", 1)
	s2 := subscribe("s2", 1)
	pub := dial("p1", "publisher-1")
	const total = 3000
	payload := []byte("payload")
	results := make([]client.Result, total+1)
	var chans []<-chan client.Result
	waitAck := func(i int) {
		select {
		case results[i] = <-chans[i-1]:
			if results[i].Err != nil {
				t.Fatalf("publish %d: %v", i, results[i].Err)
			}
		case <-ctx.Done():
			t.Fatalf("publish %d never acked", i)
		}
	}
	for i := 1; i <= total; i++ {
		ch, err := pub.PublishAsync(client.Message{Topic: "orders.eu", Props: map[string]any{"seq": int64(i)}, Payload: payload})
		if err != nil {
			t.Fatal(err)
		}
		chans = append(chans, ch)
		switch i {
		case 1000: // the IB dies with events in flight
			waitAck(i)
			kill("b1")
			start("b1")
		case 2000: // the PHB dies right after acks
			waitAck(i)
			kill("p1")
			start("p1")
		case 2500: // an SHB dies: its subscriber's session ends; it subscribes again
			waitAck(i)
			kill("s2")
			<-s2.done
			start("s2")
			s2 = subscribe("s2", 2)
		}
	}
	for i := 1; i <= total; i++ {
		if results[i].Seq == 0 {
			waitAck(i)
		}
	}

	// The log, as the publisher saw it acknowledged.
	orc := oracle.New()
	logged := map[msg.PubendID][]*msg.Event{}
	for i := 1; i <= total; i++ {
		r := results[i]
		ev := &msg.Event{Pubend: msg.PubendID(r.Ack.Pubend), Tick: tick.Tick(r.Ack.Tick), Publisher: "publisher-1", Seq: r.Seq,
			Topic: "orders.eu", Props: msg.MustProps(map[string]any{"seq": int64(i)}), Payload: payload}
		orc.Logged(ev)
		orc.PubAcked(msg.PubAck{Pubend: ev.Pubend, Publisher: ev.Publisher, Seq: ev.Seq, Tick: ev.Tick})
		logged[ev.Pubend] = append(logged[ev.Pubend], ev)
	}
	// Live sessions must end up with every event after their start token.
	for _, s := range []*session{s1, s2} {
		want := 0
		for p, evs := range logged {
			for _, ev := range evs {
				if ev.Tick > s.token[p] {
					want++
				}
			}
		}
		for {
			smu.Lock()
			got := len(s.events)
			smu.Unlock()
			if got >= want {
				break
			}
			select {
			case <-ctx.Done():
				t.Fatalf("session %s got %d of the %d events after its token", s.id, got, want)
			case <-s.more:
			}
		}
	}
	smu.Lock()
	defer smu.Unlock()
	for _, s := range sessions {
		orc.Started(s.id, msg.NodeID(s.node), ">", "", s.token)
		for _, ev := range s.events {
			orc.Delivered(s.id, ev)
		}
		if s.ended != nil && s != s1 && s != s2 {
			orc.Ended(s.id)
		}
	}
	for _, v := range orc.Violations() {
		t.Errorf("%v (broker logs in %s)", v, dir)
	}
}
