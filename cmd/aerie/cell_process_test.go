package main

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/aerie-mq/aerie/client"
	"github.com/aerie-mq/aerie/internal/broker"
	"github.com/aerie-mq/aerie/internal/member"
)

// TestKill9RedundantCell runs a network with a redundant intermediate cell
// as separate `aerie broker` processes from one config file: p1 (P1–P4) →
// cell ib1 = {b1, b2} → s1, s2. It kill -9s b1 in the middle of a publish
// stream and restarts it, then does the same to b2. Both subscribers must
// receive every event exactly once and in order per pubend, while the cell
// always has one member up (seed 000 §3, §4.2 (b)). Every broker runs
// membership, so each restart is a new incarnation the views admit while
// the old one is removed as crashed.
func TestKill9RedundantCell(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs processes")
	}
	f := newProcFixture(t)
	port := f.port
	type b struct {
		id, cell         string
		listen, clients  int
		pubends, dataDir string
	}
	brokers := []b{
		{id: "p1", listen: port(), clients: port(), pubends: `["P1", "P2", "P3", "P4"]`, dataDir: "data/p1"},
		{id: "b1", cell: "ib1", listen: port()},
		{id: "b2", cell: "ib1", listen: port()},
		{id: "s1", listen: port(), clients: port()},
		{id: "s2", listen: port(), clients: port()},
	}
	cfg := ""
	clientPort := map[string]int{}
	for _, br := range brokers {
		cfg += fmt.Sprintf("[[broker]]\nid = %q\nlisten = \"127.0.0.1:%d\"\n", br.id, br.listen)
		if br.cell != "" {
			cfg += fmt.Sprintf("cell = %q\n", br.cell)
		}
		if br.clients != 0 {
			cfg += fmt.Sprintf("clients = \"127.0.0.1:%d\"\n", br.clients)
			clientPort[br.id] = br.clients
		}
		if br.pubends != "" {
			cfg += fmt.Sprintf("data = %q\npubends = %s\n", br.dataDir, br.pubends)
		}
		cfg += fmt.Sprintf("gossip = \"127.0.0.1:%d\"\n", port())
		cfg += "\n"
	}
	cfg += "[[link]]\nup = \"p1\"\ndown = \"ib1\"\n[[link]]\nup = \"ib1\"\ndown = \"s1\"\n[[link]]\nup = \"ib1\"\ndown = \"s2\"\n"
	f.writeConfig(cfg)
	start, kill := f.start, f.kill
	p1HTTP := fmt.Sprintf("127.0.0.1:%d", port())
	for _, br := range brokers {
		if br.id == "p1" {
			start(br.id, "--http", p1HTTP)
			continue
		}
		start(br.id)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	// incarnations maps broker → boot nonce in p1's view when it holds
	// five members, one per broker.
	incarnations := func(s broker.Status) map[string]uint64 {
		out := map[string]uint64{}
		if s.Membership == nil {
			return nil
		}
		for _, name := range s.Membership.Members {
			if id, err := member.ParseName(name); err == nil {
				out[id.Broker] = id.BootNonce
			}
		}
		if len(out) != 5 || len(s.Membership.Members) != 5 {
			return nil
		}
		return out
	}
	var first map[string]uint64
	waitP1(t, ctx, p1HTTP, "a view of the five brokers", func(s broker.Status) bool {
		first = incarnations(s)
		return first != nil
	})
	dial := func(id, cid string) *client.Client {
		return f.dial(ctx, fmt.Sprintf("127.0.0.1:%d", clientPort[id]), cid)
	}
	// Each subscriber checks order and uniqueness as events arrive.
	type tally struct {
		mu    sync.Mutex
		last  map[string]uint64
		seen  map[int64]bool
		err   error
		count int
		more  chan struct{}
	}
	subscribe := func(node string) *tally {
		sub, err := dial(node, "sub-"+node).Subscribe(ctx, ">")
		if err != nil {
			t.Fatalf("subscribe at %s: %v", node, err)
		}
		tl := &tally{last: map[string]uint64{}, seen: map[int64]bool{}, more: make(chan struct{}, 1)}
		for p, tk := range sub.Token() {
			tl.last[p] = tk
		}
		go func() {
			for ev := range sub.Events() {
				tl.mu.Lock()
				seq, _ := ev.Props.Int("seq")
				switch {
				case tl.err != nil:
				case ev.Tick <= tl.last[ev.Pubend]:
					tl.err = fmt.Errorf("%s: %s@%d after %d: duplicate or out of order", node, ev.Pubend, ev.Tick, tl.last[ev.Pubend])
				case tl.seen[seq]:
					tl.err = fmt.Errorf("%s: seq %d delivered twice", node, seq)
				}
				tl.last[ev.Pubend], tl.seen[seq] = ev.Tick, true
				tl.count++
				tl.mu.Unlock()
				select {
				case tl.more <- struct{}{}:
				default:
				}
			}
		}()
		return tl
	}
	subs := []*tally{subscribe("s1"), subscribe("s2")}
	var pubs []*client.Client
	for i := 1; i <= 4; i++ {
		pubs = append(pubs, dial("p1", fmt.Sprintf("pub-%d", i)))
	}
	const total = 2400
	var chans []<-chan client.Result
	for i := 1; i <= total; i++ {
		p := pubs[i%4]
		ch, err := p.PublishAsync(client.Message{Topic: "orders.eu", Props: map[string]any{"seq": int64(i)}})
		if err != nil {
			t.Fatal(err)
		}
		chans = append(chans, ch)
		switch i {
		case 800:
			kill("b1")
			start("b1")
		case 1600:
			kill("b2")
			start("b2")
		}
	}
	for i, ch := range chans {
		select {
		case r := <-ch:
			if r.Err != nil {
				t.Fatalf("publish %d: %v", i+1, r.Err)
			}
		case <-ctx.Done():
			t.Fatalf("publish %d never acked", i+1)
		}
	}
	for n, tl := range subs {
		for {
			tl.mu.Lock()
			got, err := tl.count, tl.err
			tl.mu.Unlock()
			if err != nil {
				t.Fatal(err)
			}
			if got >= total {
				break
			}
			select {
			case <-ctx.Done():
				t.Fatalf("s%d got %d of %d events", n+1, got, total)
			case <-tl.more:
			}
		}
		tl.mu.Lock()
		if len(tl.seen) != total || tl.err != nil {
			t.Fatalf("s%d: %d distinct events of %d, err %v", n+1, len(tl.seen), total, tl.err)
		}
		tl.mu.Unlock()
	}
	// The restarted b1 and b2 are newer incarnations in p1's view, and the
	// killed ones are gone from it.
	waitP1(t, ctx, p1HTTP, "the restarted b1 and b2 in the view", func(s broker.Status) bool {
		now := incarnations(s)
		return now != nil && now["b1"] > first["b1"] && now["b2"] > first["b2"] && now["p1"] == first["p1"]
	})
}
