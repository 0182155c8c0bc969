package broker_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/aerie-mq/aerie/client"
	"github.com/aerie-mq/aerie/internal/broker"
	"github.com/aerie-mq/aerie/internal/group"
	"github.com/aerie-mq/aerie/internal/msg"
	"github.com/aerie-mq/aerie/internal/shell"
)

// groupNet is the four-broker network with s1 and s2 keeping data, both
// candidate homes of consumer groups.
func groupNet(t *testing.T) *net4 {
	return startNetWith(t, nil, func(o map[msg.NodeID]broker.Options) {
		var homes []shell.GroupHome
		for _, id := range []msg.NodeID{"s1", "s2"} {
			homes = append(homes, shell.GroupHome{ID: id, Clients: o[id].Clients})
		}
		for _, id := range []msg.NodeID{"s1", "s2"} {
			s := o[id]
			s.DataDir = t.TempDir()
			s.GroupHomes = homes
			o[id] = s
		}
	})
}

// groupHomedAt returns a group name whose home is broker id of [s1 s2].
func groupHomedAt(id string) string {
	for i := 0; ; i++ {
		name := fmt.Sprintf("billing%d", i)
		if []string{"s1", "s2"}[group.Home(name, []string{"s1", "s2"})] == id {
			return name
		}
	}
}

// member receives a group's events and acknowledges each, recording which
// (pubend, tick) it acknowledged; stopAfter > 0 makes it stop acking and
// leave after that many events, leaving them unacknowledged.
type groupMember struct {
	name  string
	sub   *client.Subscription
	mu    sync.Mutex
	acked map[string]bool
	got   int
	done  chan struct{}
}

func runMember(t *testing.T, name string, sub *client.Subscription, stopAfter int, total *sync.Map, count chan<- struct{}) *groupMember {
	m := &groupMember{name: name, sub: sub, acked: map[string]bool{}, done: make(chan struct{})}
	go func() {
		defer close(m.done)
		for ev := range sub.Events() {
			if ev.Gap != nil {
				t.Errorf("%s: gap %v", name, ev.Gap)
				continue
			}
			m.mu.Lock()
			m.got++
			got := m.got
			m.mu.Unlock()
			if stopAfter > 0 && got >= stopAfter {
				sub.Close() // leaves with what it holds unacknowledged
				return
			}
			k := fmt.Sprintf("%s@%d", ev.Pubend, ev.Tick)
			if prev, dup := total.LoadOrStore(k, name); dup {
				t.Errorf("%s acknowledged by %s and by %s", k, prev, name)
			}
			if err := sub.Ack(ev.Checkpoint); err != nil {
				t.Errorf("%s: ack %s: %v", name, k, err)
			}
			m.mu.Lock()
			m.acked[k] = true
			m.mu.Unlock()
			count <- struct{}{}
		}
	}()
	return m
}

// A group with two members at its home and one that first asked at
// another broker: every event is acknowledged by exactly one member, and
// the events a member left with unacknowledged go to the others.
func TestGroupAcrossBrokers(t *testing.T) {
	n := groupNet(t)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	name := groupHomedAt("s1")
	g := client.Group{Name: name, Pattern: "orders.>"}
	var subs []*client.Subscription
	for i := range 2 {
		sub, err := n.dial("s1", client.Options{ID: fmt.Sprintf("m%d", i)}).SubscribeGroup(ctx, g)
		if err != nil {
			t.Fatal(err)
		}
		subs = append(subs, sub)
	}
	// At s2, the member is told where the group's home is, and joins there.
	_, err := n.dial("s2", client.Options{ID: "m2"}).SubscribeGroup(ctx, g)
	var home *client.GroupHomeError
	if !errors.As(err, &home) || home.Home != "s1" || home.Addr != n.opts["s1"].Clients {
		t.Fatalf("joining at s2: %v, want the home s1 at %s", err, n.opts["s1"].Clients)
	}
	c2, err := client.Dial(ctx, home.Addr, client.Options{ID: "m2", Logger: quietLogger()})
	if err != nil {
		t.Fatal(err)
	}
	defer c2.Close()
	sub2, err := c2.SubscribeGroup(ctx, g)
	if err != nil {
		t.Fatal(err)
	}
	subs = append(subs, sub2)
	// Another filter under the group's name is refused, naming both.
	if _, err := n.dial("s1", client.Options{}).SubscribeGroup(ctx, client.Group{Name: name, Pattern: "quotes.>"}); err == nil ||
		!errors.Is(err, client.ErrRejected) {
		t.Fatalf("a member with another filter: %v", err)
	}

	const events = 600
	var total sync.Map
	count := make(chan struct{}, events)
	members := []*groupMember{
		runMember(t, "m0", subs[0], 0, &total, count),
		runMember(t, "m1", subs[1], 50, &total, count), // leaves mid-stream
		runMember(t, "m2", subs[2], 0, &total, count),
	}
	pub := n.dial("p1", client.Options{ID: "pub"})
	var chans []<-chan client.Result
	for i := range events {
		ch, err := pub.PublishAsync(client.Message{Topic: "orders.eu", Props: map[string]any{"seq": int64(i)}})
		if err != nil {
			t.Fatal(err)
		}
		chans = append(chans, ch)
		if i%100 == 99 {
			waitAcks(t, chans)
			chans = nil
		}
	}
	waitAcks(t, chans)
	for i := range events {
		select {
		case <-count:
		case <-ctx.Done():
			t.Fatalf("%d of %d events acknowledged by the group", i, events)
		}
	}
	<-members[1].done
	if members[1].got < 50 {
		t.Fatalf("the member that leaves got %d events, want 50", members[1].got)
	}
	// Nothing more comes: each event went to one member once acknowledged.
	select {
	case <-count:
		t.Fatal("an event acknowledged twice")
	case <-time.After(300 * time.Millisecond):
	}
	got := 0
	total.Range(func(any, any) bool { got++; return true })
	if got != events {
		t.Fatalf("%d distinct events acknowledged, want %d", got, events)
	}
	for _, m := range []*groupMember{members[0], members[2]} {
		m.mu.Lock()
		if len(m.acked) == 0 {
			t.Errorf("%s acknowledged nothing: the group did not share", m.name)
		}
		m.mu.Unlock()
	}
}
