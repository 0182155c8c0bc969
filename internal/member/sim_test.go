package member_test

import (
	"container/heap"
	"math/rand/v2"
	"sort"
	"testing"
	"time"

	"github.com/aerie-mq/aerie/internal/member"
	"github.com/aerie-mq/aerie/internal/tick"
)

// This file is a deterministic, seeded simulation of a cluster of members
// driven by a simulated failure detector that behaves like memberlist:
// members join the gossip pool through seeds (retrying with backoff, and
// re-joining seeds outside their pool to heal split pools), every pool
// member learns of a joiner after a random delay, a crash is reported as
// Failed after a random detection delay, a leave as Departed. Joining
// through a seed also hands the joiner the seed's view (memberlist's
// push/pull state exchange). Messages between members take a random delay
// and may be lost.

type simConfig struct {
	MsgDelay     [2]time.Duration
	GossipDelay  [2]time.Duration // join → Alive at each pool member
	Detect       [2]time.Duration // crash → Failed at each pool member
	LeaveDelay   [2]time.Duration // leave → Departed
	Loss         float64          // probability a member message is lost
	JoinBackoff  time.Duration    // first join retry; doubles up to 8×
	Rejoin       time.Duration    // re-join seeds outside the pool
	Settle       time.Duration
	SuspectFirst bool // report Suspect before Failed
}

func defaultSim() simConfig {
	return simConfig{
		MsgDelay:    [2]time.Duration{time.Millisecond, 20 * time.Millisecond},
		GossipDelay: [2]time.Duration{5 * time.Millisecond, 150 * time.Millisecond},
		Detect:      [2]time.Duration{300 * time.Millisecond, 900 * time.Millisecond},
		LeaveDelay:  [2]time.Duration{time.Millisecond, 50 * time.Millisecond},
		JoinBackoff: 50 * time.Millisecond,
		Rejoin:      time.Second,
		Settle:      time.Second,
	}
}

type event struct {
	at  tick.Time
	seq uint64
	fn  func()
}

type queue []event

func (q queue) Len() int { return len(q) }
func (q queue) Less(i, j int) bool {
	return q[i].at < q[j].at || q[i].at == q[j].at && q[i].seq < q[j].seq
}
func (q queue) Swap(i, j int) { q[i], q[j] = q[j], q[i] }
func (q *queue) Push(x any)   { *q = append(*q, x.(event)) }
func (q *queue) Pop() any {
	old := *q
	e := old[len(old)-1]
	*q = old[:len(old)-1]
	return e
}

type simNode struct {
	id        member.ID
	meta      member.Meta
	m         *member.Membership
	up        bool
	seeds     []string // broker ids: a seed is whichever incarnation of it runs
	pool      int
	lastID    uint64
	prev      member.View
	views     int
	firstSeen map[member.ID]uint64 // view id in which this member first saw each member
}

type world struct {
	t     testing.TB
	cfg   simConfig
	rng   *rand.Rand
	now   tick.Time
	seq   uint64
	q     queue
	nodes map[member.ID]*simNode
	cur   map[string]*simNode // broker id → running incarnation
	nonce map[string]uint64
	pools int
	fdAt  map[[2]member.ID]tick.Time

	// oracle state
	allowConflicts bool
	installers     map[uint64]map[uint64][]*simNode // view id → digest → members that installed it
	issuer         map[uint64]map[uint64]member.ID
	conflicts      int
	truth          map[member.ID]string // "crashed" or "left" once gone
	metas          map[member.ID]member.Meta
	changes        []string
	faults         int
	sent           int            // view-layer messages sent, lost ones included (scale_test.go)
	fenced         map[string]int // steps a broker ended with a view and not quorate
}

func newWorld(t testing.TB, seed uint64, cfg simConfig) *world {
	return &world{
		t: t, cfg: cfg, rng: rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15)),
		nodes: map[member.ID]*simNode{}, cur: map[string]*simNode{}, nonce: map[string]uint64{},
		fdAt: map[[2]member.ID]tick.Time{}, installers: map[uint64]map[uint64][]*simNode{}, issuer: map[uint64]map[uint64]member.ID{},
		truth: map[member.ID]string{}, metas: map[member.ID]member.Meta{}, fenced: map[string]int{},
	}
}

func (w *world) at(t tick.Time, fn func()) {
	w.seq++
	heap.Push(&w.q, event{at: t, seq: w.seq, fn: fn})
}

func (w *world) after(d time.Duration, fn func()) { w.at(w.now.Add(d), fn) }

func (w *world) rand(r [2]time.Duration) time.Duration {
	if r[1] <= r[0] {
		return r[0]
	}
	return r[0] + time.Duration(w.rng.Int64N(int64(r[1]-r[0])))
}

// runUntil processes events up to and including time end.
func (w *world) runUntil(end tick.Time) {
	for w.q.Len() > 0 && w.q[0].at <= end {
		e := heap.Pop(&w.q).(event)
		w.now = e.at
		e.fn()
		if w.t.Failed() {
			return
		}
	}
	w.now = end
}

func metaFor(broker string) member.Meta {
	return member.Meta{Cell: "cell-" + broker, Role: "ib",
		Addrs: []member.Addr{{Purpose: "broker", HostPort: "127.0.0.1:7" + broker}}}
}

// start boots a new incarnation of broker.
func (w *world) start(broker string, seeds ...string) *simNode {
	w.nonce[broker]++
	id := member.ID{Broker: broker, BootNonce: w.nonce[broker]}
	w.pools++
	n := &simNode{id: id, meta: metaFor(broker), up: true, seeds: seeds, pool: w.pools, firstSeen: map[member.ID]uint64{}}
	n.m = member.New(member.Config{Self: member.Member{ID: id, Meta: n.meta}, JoinSettle: w.cfg.Settle})
	w.nodes[id] = n
	w.cur[broker] = n
	w.metas[id] = n.meta
	w.step(n, member.Tick{})
	w.tickLoop(n)
	w.joinLoop(n, 0)
	return n
}

func (w *world) tickLoop(n *simNode) {
	w.after(50*time.Millisecond, func() {
		if n.up {
			w.step(n, member.Tick{})
			w.tickLoop(n)
		}
	})
}

func (w *world) poolOf(n *simNode) []*simNode {
	var out []*simNode
	for _, o := range w.sorted() {
		if o.up && o.pool == n.pool {
			out = append(out, o)
		}
	}
	return out
}

func (w *world) sorted() []*simNode {
	out := make([]*simNode, 0, len(w.nodes))
	for _, n := range w.nodes {
		out = append(out, n)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].id.Name() < out[j].id.Name() })
	return out
}

// joinLoop models the adapter: retry seeds with backoff until the member
// is in a pool with someone else, then keep re-joining seeds outside it.
func (w *world) joinLoop(n *simNode, attempt int) {
	if !n.up || w.cur[n.id.Broker] != n {
		return
	}
	alone := len(w.poolOf(n)) == 1
	for _, i := range w.rng.Perm(len(n.seeds)) {
		s := w.cur[n.seeds[i]]
		if s == nil || !s.up || s == n || s.pool == n.pool {
			continue
		}
		w.merge(n, s)
		break
	}
	next := w.cfg.Rejoin
	if alone && len(w.poolOf(n)) == 1 {
		next = w.cfg.JoinBackoff << min(attempt, 3)
		next += time.Duration(w.rng.Int64N(int64(next/2) + 1))
	}
	w.after(next, func() { w.joinLoop(n, attempt+1) })
}

// merge: n joined through seed s. n gets s's view (push/pull); the two
// pools become one and every member learns of the others.
func (w *world) merge(n, s *simNode) {
	if v, ok := s.m.LocalState(); ok {
		w.deliver(s.id, n.id, member.Message{Kind: member.Announce, View: &v}, true)
	}
	a, b := w.poolOf(n), w.poolOf(s)
	for _, x := range b {
		x.pool = n.pool
	}
	for _, x := range a {
		for _, y := range b {
			w.fd(x, member.Alive{Member: member.Member{ID: y.id, Meta: y.meta}}, w.cfg.GossipDelay)
			w.fd(y, member.Alive{Member: member.Member{ID: x.id, Meta: x.meta}}, w.cfg.GossipDelay)
		}
	}
}

// fd schedules a failure-detector report at observer, in order per
// (observer, subject) like memberlist's incarnation-ordered updates.
func (w *world) fd(obs *simNode, in member.Input, delay [2]time.Duration) {
	var subj member.ID
	switch in := in.(type) {
	case member.Alive:
		subj = in.Member.ID
	case member.Suspect:
		subj = in.ID
	case member.Failed:
		subj = in.ID
	case member.Departed:
		subj = in.ID
	}
	key := [2]member.ID{obs.id, subj}
	at := w.now.Add(w.rand(delay))
	if last := w.fdAt[key]; at <= last {
		at = last + 1
	}
	w.fdAt[key] = at
	w.at(at, func() {
		if obs.up {
			w.step(obs, in)
		}
	})
}

func (w *world) deliver(from, to member.ID, msg member.Message, reliable bool) {
	w.sent++
	if !reliable && w.cfg.Loss > 0 && w.rng.Float64() < w.cfg.Loss {
		return
	}
	w.after(w.rand(w.cfg.MsgDelay), func() {
		if n := w.nodes[to]; n != nil && n.up {
			w.step(n, member.Recv{From: from, Msg: msg})
		}
	})
}

// crash stops broker's incarnation without a leave.
func (w *world) crash(broker string) {
	n := w.cur[broker]
	if n == nil || !n.up {
		return
	}
	w.faults++
	n.up = false
	w.truth[n.id] = "crashed"
	for _, o := range w.poolOf(n) {
		if w.cfg.SuspectFirst {
			w.fd(o, member.Suspect{ID: n.id}, [2]time.Duration{w.cfg.Detect[0] / 2, w.cfg.Detect[0]})
		}
		w.fd(o, member.Failed{ID: n.id}, w.cfg.Detect)
	}
}

// leave stops broker's incarnation after a graceful leave.
func (w *world) leave(broker string) {
	n := w.cur[broker]
	if n == nil || !n.up {
		return
	}
	w.faults++
	n.up = false
	w.truth[n.id] = "left"
	for _, o := range w.poolOf(n) {
		w.fd(o, member.Departed{ID: n.id}, w.cfg.LeaveDelay)
	}
}
