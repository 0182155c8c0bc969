package main

import (
	"context"
	"fmt"
	"sync"
	"testing"

	"github.com/aerie-mq/aerie/client"
)

// replicatedCell is a running replicated PHB cell "phb" of three `aerie
// broker` processes (one Raft group for P1, docs/CONFIG.md) feeding the SHB
// s1, for the process tests of raft_process_test.go and
// raft_wipe_process_test.go.
type replicatedCell struct {
	ids            []string
	clients, https map[string]string // per member
	shbClients     string
}

// startReplicatedCell writes the network's config, with raft_clients =
// mode on every member ("" leaves the default), and starts its brokers.
func startReplicatedCell(f *procFixture, mode string) replicatedCell {
	c := replicatedCell{ids: []string{"p1", "p2", "p3"}, clients: map[string]string{}, https: map[string]string{}}
	cfg := ""
	for _, id := range c.ids {
		c.clients[id], c.https[id] = f.addr(), f.addr()
		cfg += fmt.Sprintf("[[broker]]\nid = %q\ncell = \"phb\"\nlisten = %q\nclients = %q\nhttp = %q\ndata = \"data/%s\"\npubends = [\"P1\"]\n",
			id, f.addr(), c.clients[id], c.https[id], id)
		if mode != "" {
			cfg += fmt.Sprintf("raft_clients = %q\n", mode)
		}
		cfg += "\n"
	}
	c.shbClients = f.addr()
	cfg += fmt.Sprintf("[[broker]]\nid = \"s1\"\nlisten = %q\nclients = %q\n\n[[link]]\nup = \"phb\"\ndown = \"s1\"\n", f.addr(), c.shbClients)
	f.writeConfig(cfg)
	for _, id := range c.ids {
		f.start(id)
	}
	f.start("s1")
	return c
}

// seqCollector records the "seq" property of every event a subscription
// delivers, in order, and the first tick that arrives twice or out of
// order; a mark closes once that many events have arrived.
type seqCollector struct {
	mu    sync.Mutex
	seqs  []int64
	last  uint64
	err   error
	marks map[int]chan struct{}
}

func collectSeqs(sub *client.Subscription, marks ...int) *seqCollector {
	c := &seqCollector{marks: map[int]chan struct{}{}}
	for _, n := range marks {
		c.marks[n] = make(chan struct{})
	}
	go func() {
		for ev := range sub.Events() {
			c.mu.Lock()
			if ev.Tick <= c.last && c.err == nil {
				c.err = fmt.Errorf("tick %d after %d: duplicate or out of order", ev.Tick, c.last)
			}
			c.last = ev.Tick
			seq, _ := ev.Props.Int("seq")
			c.seqs = append(c.seqs, seq)
			if ch := c.marks[len(c.seqs)]; ch != nil {
				close(ch)
			}
			c.mu.Unlock()
		}
	}()
	return c
}

// wait blocks until mark n is reached, failing the test if ctx ends first.
func (c *seqCollector) wait(t *testing.T, ctx context.Context, n int) {
	t.Helper()
	select {
	case <-c.marks[n]:
	case <-ctx.Done():
		c.mu.Lock()
		defer c.mu.Unlock()
		t.Fatalf("the subscriber got %d of %d events", len(c.seqs), n)
	}
}

// inOrder fails the test unless the events so far are seq 1, 2, … each
// once, in publish order, with no tick out of order.
func (c *seqCollector) inOrder(t *testing.T) {
	t.Helper()
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.err != nil {
		t.Fatal(c.err)
	}
	for i, seq := range c.seqs {
		if seq != int64(i+1) {
			t.Fatalf("event %d has seq %d: want every event once, in publish order; delivered seqs %s", i+1, seq, runs(c.seqs))
		}
	}
}
