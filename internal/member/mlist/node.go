package mlist

import (
	"context"
	"fmt"
	"math/rand/v2"
	"net"
	"strconv"
	"sync"
	"time"

	"github.com/hashicorp/memberlist"

	"github.com/aerie-mq/aerie/internal/member"
	"github.com/aerie-mq/aerie/internal/tick"
)

// metaMax is memberlist's limit on NodeMeta.
const metaMax = memberlist.MetaMaxSize

// Node is one broker's membership: a memberlist instance feeding a
// member.Membership. Run owns every goroutine; Current may be called from
// any goroutine.
type Node struct {
	cfg  Config
	d    *delegate
	ml   *memberlist.Memberlist
	core *member.Membership // only Run's goroutine touches it

	out  *sender
	kill chan struct{}
	once sync.Once

	mu      sync.Mutex
	current member.View
	has     bool
	quorate bool
}

type envelope struct {
	to  member.ID
	msg []byte
}

// New starts memberlist listening (so that Addr is known and others may
// join through this node) but neither joins nor runs the view layer: Run
// does.
func New(cfg Config) (*Node, error) {
	cfg = cfg.withDefaults()
	if cfg.ID.Broker == "" {
		return nil, fmt.Errorf("%w: empty broker id", ErrConfig)
	}
	meta := member.EncodeMeta(cfg.Meta)
	if len(meta) > metaMax {
		return nil, fmt.Errorf("%w: metadata is %d bytes, memberlist allows %d", ErrConfig, len(meta), metaMax)
	}
	n := &Node{cfg: cfg, d: newDelegate(cfg.ID, meta), core: member.New(cfg.View),
		out: newSender(), kill: make(chan struct{})}
	ml, err := memberlist.Create(cfg.memberlist(n.d))
	if err != nil {
		return nil, fmt.Errorf("mlist: starting memberlist for %s: %w", cfg.ID, err)
	}
	n.ml = ml
	return n, nil
}

// Addr is the memberlist address (host:port) others use as a seed.
func (n *Node) Addr() string {
	ln := n.ml.LocalNode()
	return net.JoinHostPort(ln.Addr.String(), strconv.Itoa(int(ln.Port)))
}

// ID is this node's incarnation.
func (n *Node) ID() member.ID { return n.cfg.ID }

// Current returns the installed view; false before the first and while
// this member is excluded.
func (n *Node) Current() (member.View, bool) {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.current, n.has
}

// Quorate says whether the view layer sees a majority of its installed
// view (member.Membership.Quorate): false before the first view, while
// excluded, and on the minority side of a partition (fenced).
func (n *Node) Quorate() bool {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.quorate
}

// Kill stops the node abruptly, as a crash would: no Leave is sent, so the
// others' failure detectors declare it dead. For tests and Scale.
func (n *Node) Kill() { n.once.Do(func() { close(n.kill) }) }

// Run joins the cluster through the seeds and drives the view layer until
// ctx ends (then it leaves gracefully and shuts memberlist down) or Kill is
// called (then it shuts down without leaving). It returns nil after a clean
// shutdown.
func (n *Node) Run(ctx context.Context) error {
	ctx, cancel := context.WithCancel(ctx)
	var wg sync.WaitGroup
	wg.Add(2)
	go func() { defer wg.Done(); n.joinLoop(ctx) }()
	go func() { defer wg.Done(); n.sendLoop(ctx) }()

	start := time.Now()
	now := func() tick.Time { return tick.Time(time.Since(start)) }
	every := n.cfg.View.TickInterval
	if every <= 0 {
		every = 50 * time.Millisecond // member.Config's default
	}
	t := time.NewTicker(every)
	defer t.Stop()
	n.step(now(), member.Tick{})
	var err error
	for done := false; !done; {
		select {
		case <-ctx.Done():
			n.bye()
			err = n.ml.Leave(time.Second)
			done = true
		case <-n.kill:
			done = true
		case <-t.C:
			n.step(now(), member.Tick{})
		case <-n.d.kick:
			for _, in := range n.d.take() {
				n.step(now(), in)
			}
		}
	}
	cancel()
	wg.Wait()
	if serr := n.ml.Shutdown(); err == nil && serr != nil {
		err = serr
	}
	if err != nil {
		return fmt.Errorf("mlist: %s: shutdown: %w", n.cfg.ID, err)
	}
	return nil
}

func (n *Node) step(now tick.Time, in member.Input) {
	if err := n.core.Step(now, in); err != nil {
		return // malformed input from the network: dropped
	}
	if q := n.core.Quorate(); q != n.quorate {
		n.mu.Lock()
		n.quorate = q
		n.mu.Unlock()
	}
	if !n.core.HasReady() {
		return
	}
	rd := n.core.Ready()
	for _, e := range rd.Send {
		n.out.put(e.To, e.Msg.Kind, frame(n.cfg.ID, e.Msg))
	}
	if len(rd.Installed) > 0 || rd.Excluded != 0 {
		v, ok := n.core.View()
		n.mu.Lock()
		n.current, n.has = v, ok
		n.mu.Unlock()
		if st, ok := n.core.LocalState(); ok {
			n.d.setState(frame(n.cfg.ID, member.Message{Kind: member.Announce, View: &st}))
		}
	}
	for _, c := range rd.Installed {
		if n.cfg.OnView != nil {
			n.cfg.OnView(c)
		}
	}
	n.core.Advance(rd)
}

// joinLoop joins through the seeds, retrying with jittered exponential
// backoff until another member is known, then re-joins every
// RejoinInterval the seeds that are not members: two pools that formed
// apart during a concurrent start merge as soon as one seed reaches both.
func (n *Node) joinLoop(ctx context.Context) {
	self := n.Addr()
	backoff := 50 * time.Millisecond
	for {
		var missing []string
		members := map[string]bool{}
		for _, m := range n.ml.Members() {
			members[net.JoinHostPort(m.Addr.String(), strconv.Itoa(int(m.Port)))] = true
		}
		for _, s := range n.cfg.Seeds {
			if s != self && !members[s] {
				missing = append(missing, s)
			}
		}
		if len(missing) > 0 {
			_, _ = n.ml.Join(missing) // failures: retried below
		}
		wait := n.cfg.RejoinInterval
		if n.ml.NumMembers() < 2 && len(missing) > 0 {
			wait = backoff + rand.N(backoff/2+1)
			backoff = min(2*backoff, n.cfg.JoinBackoffMax)
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(wait):
		}
	}
}

// bye tells the members this one is leaving, synchronously (each send is
// bounded by the TCP timeout), before memberlist's own Leave: memberlist's
// NotifyLeave cannot tell the others a leave from a death.
func (n *Node) bye() {
	n.core.Leave()
	rd := n.core.Ready()
	for _, e := range rd.Send {
		if e.Msg.Kind != member.Bye {
			continue
		}
		if to := n.d.node(e.To); to != nil {
			_ = n.ml.SendReliable(to, frame(n.cfg.ID, e.Msg))
		}
	}
	n.core.Advance(rd)
}
