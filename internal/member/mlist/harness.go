package mlist

import (
	"context"
	"sync"

	"github.com/aerie-mq/aerie/internal/member"
)

// Cluster runs several Nodes in this process: the loopback tests and Scale
// use it. Every installed view is recorded with the time it was installed.
type Cluster struct {
	mu      sync.Mutex
	running map[string]*running // by broker id
	changed chan struct{}
	wg      sync.WaitGroup
}

type running struct {
	node   *Node
	cancel context.CancelFunc
	done   chan error
	log    []member.Change
}

// NewCluster returns an empty cluster.
func NewCluster() *Cluster {
	return &Cluster{running: map[string]*running{}, changed: make(chan struct{}, 1)}
}

// Changed is signalled (coalesced) whenever any node installs a view.
func (c *Cluster) Changed() <-chan struct{} { return c.changed }

func (c *Cluster) notify() {
	select {
	case c.changed <- struct{}{}:
	default:
	}
}

// Create makes a node (listening, not yet running) for cfg.ID.Broker,
// replacing any earlier incarnation's entry.
func (c *Cluster) Create(cfg Config) (*Node, error) {
	r := &running{done: make(chan error, 1)}
	user := cfg.OnView
	cfg.OnView = func(ch member.Change) {
		c.mu.Lock()
		r.log = append(r.log, ch)
		c.mu.Unlock()
		if user != nil {
			user(ch)
		}
		c.notify()
	}
	n, err := New(cfg)
	if err != nil {
		return nil, err
	}
	r.node = n
	c.mu.Lock()
	c.running[cfg.ID.Broker] = r
	c.mu.Unlock()
	return n, nil
}

// Start runs broker's node until Leave, Kill or Close.
func (c *Cluster) Start(ctx context.Context, broker string) {
	c.mu.Lock()
	r := c.running[broker]
	c.mu.Unlock()
	ctx, r.cancel = context.WithCancel(ctx)
	c.wg.Add(1)
	go func() {
		defer c.wg.Done()
		r.done <- r.node.Run(ctx)
		c.notify()
	}()
}

// Node returns broker's current node.
func (c *Cluster) Node(broker string) *Node {
	c.mu.Lock()
	defer c.mu.Unlock()
	if r := c.running[broker]; r != nil {
		return r.node
	}
	return nil
}

// Log returns the views broker's current incarnation installed.
func (c *Cluster) Log(broker string) []member.Change {
	c.mu.Lock()
	defer c.mu.Unlock()
	if r := c.running[broker]; r != nil {
		return append([]member.Change(nil), r.log...)
	}
	return nil
}

// Leave stops broker gracefully and waits for its shutdown.
func (c *Cluster) Leave(broker string) error {
	r := c.remove(broker)
	r.cancel()
	return <-r.done
}

// Kill crashes broker (no leave) and waits for its node to stop.
func (c *Cluster) Kill(broker string) error {
	r := c.remove(broker)
	r.node.Kill()
	return <-r.done
}

func (c *Cluster) remove(broker string) *running {
	c.mu.Lock()
	defer c.mu.Unlock()
	r := c.running[broker]
	delete(c.running, broker)
	return r
}

// Brokers lists the running brokers.
func (c *Cluster) Brokers() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	var out []string
	for b := range c.running {
		out = append(out, b)
	}
	return out
}

// Close kills every node and waits for all of them.
func (c *Cluster) Close() {
	for _, b := range c.Brokers() {
		r := c.remove(b)
		r.node.Kill()
	}
	c.wg.Wait()
}

// Agreed reports the view all running nodes have installed, if they agree
// on one that lists exactly them.
func (c *Cluster) Agreed() (member.View, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	var ref member.View
	first := true
	for _, r := range c.running {
		v, ok := r.node.Current()
		if !ok || len(v.Members) != len(c.running) {
			return member.View{}, false
		}
		if first {
			ref, first = v, false
		} else if v.ID != ref.ID || v.Digest() != ref.Digest() {
			return member.View{}, false
		}
	}
	for _, m := range ref.Members {
		if r := c.running[m.ID.Broker]; r == nil || r.node.ID() != m.ID {
			return member.View{}, false
		}
	}
	return ref, !first
}
