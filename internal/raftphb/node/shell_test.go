package node

import (
	"bytes"
	"fmt"
	"log/slog"
	"slices"
	"testing"
	"time"

	"github.com/aerie-mq/aerie/internal/eventlog"
	"github.com/aerie-mq/aerie/internal/gd"
	"github.com/aerie-mq/aerie/internal/msg"
	"github.com/aerie-mq/aerie/internal/shell"
	"github.com/aerie-mq/aerie/internal/tick"
)

// realShell is the runtime shell (gd.Engine inside shell.Broker) at a
// serving leader, with a clock that may lag the old leader's, one client
// connection for the publisher, and no downstream.
type realShell struct {
	c      *cell
	m      *member
	b      *shell.Broker
	skew   time.Duration
	dead   bool
	pub    *publisher
	client shell.ClientID
}

func (s *realShell) Now() tick.Time {
	return tick.Time(1767225600*int64(time.Second) + int64(s.c.now)*int64(time.Millisecond) + int64(s.skew))
}
func (s *realShell) Send(msg.NodeID, msg.Msg) {}
func (s *realShell) ToClient(_ shell.ClientID, m msg.Msg) {
	if a, ok := msg.AsPubAck(m); ok && !s.dead {
		s.pub.acked(s, a)
	}
}
func (s *realShell) CloseClient(shell.ClientID, error, string) {}

func (s *realShell) Persisted(first uint64, err error) error {
	if err := s.b.Persisted(first, err); err != nil {
		s.dead = true // crash-only: this shell is done
		return err
	}
	s.c.at(0, s.drain)
	return nil
}
func (s *realShell) Fetched(f gd.Fetched) { s.b.Fetched(f) }
func (s *realShell) Trimmed(first, dropped uint64, err error) {
	s.b.Trimmed(first, dropped, err)
}

func (s *realShell) drain() {
	if s.dead || s.m.node == nil || s.m.sh2 != s {
		return
	}
	s.b.Drain()
	s.c.work(s.m)
}

// publisher publishes seq 1… in order to whichever member serves, and
// resends everything unacknowledged after a failover, as the client does.
type publisher struct {
	t     *testing.T
	next  uint64 // next new seq
	ticks map[uint64]tick.Tick
	max   tick.Tick // highest tick acked so far
	fails []string
}

func (p *publisher) acked(s *realShell, a msg.PubAck) {
	if old, ok := p.ticks[a.Seq]; ok && old != a.Tick {
		p.fails = append(p.fails, fmt.Sprintf("seq %d acked at tick %d, then at %d", a.Seq, old, a.Tick))
	}
	p.ticks[a.Seq] = a.Tick
	if a.Tick > p.max {
		p.max = a.Tick
	}
}

// TestShellFailover runs the runtime shell on the cell: a publisher
// publishes 300 events while the serving leader crashes three times and
// the new leaders' clocks lag by up to a second. Every publish is acked;
// a retried publish that had been logged keeps its tick; ticks increase
// with the publisher's sequence (publisher order), so no tick is reused
// across leaders — the new leader allocates above the committed high-water
// mark, not from its lagging clock (docs/CONCEPTS.md P2, I9).
func TestShellFailover(t *testing.T) {
	for seed := uint64(1); seed <= 10; seed++ {
		runShellFailover(t, seed, false)
	}
}

// TestFollowersTrimWithTheLeader is TestShellFailover with the serving
// leader trimming its store as the release protocol allows (every event is
// released: there is no downstream): every member's store is trimmed, the
// followers' through the leader's trim entries, and the failovers'
// guarantees hold on trimmed stores (a new leader restores its
// deduplication table from the snapshot a trim entry wrote).
func TestFollowersTrimWithTheLeader(t *testing.T) {
	for seed := uint64(1); seed <= 10; seed++ {
		c := runShellFailover(t, seed, true)
		var followerTrims uint64
		snaps := map[uint64][][]byte{} // the snapshot of the stores trimmed at each first index
		for _, m := range c.ms {
			if m.node == nil {
				continue
			}
			st := m.node.Stats()
			first, next := m.node.store.Bounds()
			if first == 0 {
				t.Errorf("seed %d: member %d's store was never trimmed (holds %d records; %+v)", seed, m.id, next, st)
			}
			if st.TrimsProposed == 0 {
				followerTrims += st.TrimsApplied
			}
			// A trimmed store's snapshot summarises what went, the same
			// at every member trimmed at the same index.
			_, path := m.node.storePaths(m.node.storeGen)
			snap, err := eventlog.ReadSnapshot(m.fs, path)
			if err != nil || (first > 0 && len(snap) == 0) {
				t.Errorf("seed %d: member %d's store starts at %d with snapshot %d records, %v", seed, m.id, first, len(snap), err)
			}
			if other, ok := snaps[first]; ok && !slices.EqualFunc(snap, other, bytes.Equal) {
				t.Errorf("seed %d: member %d's snapshot at %d differs from another member's", seed, m.id, first)
			}
			snaps[first] = snap
		}
		if followerTrims == 0 {
			t.Errorf("seed %d: no member that never proposed a trim applied one", seed)
		}
	}
}

// runShellFailover is TestShellFailover's run with one seed; with trim,
// the serving shell trims its store every 100 ms.
func runShellFailover(t *testing.T, seed uint64, trim bool) *cell {
	t.Helper()
	c := newCell(t, 3, seed, faults{maxDelay: 3, diskMs: 2})
	pub := &publisher{t: t, next: 1, ticks: map[uint64]tick.Tick{}}
	const total = 300
	var leaders int
	c.serveHook = func(m *member, ev Event) {
		eng, err := gd.New(msg.NodeID(fmt.Sprintf("p%d", m.id)), gd.DefaultConfig(), []gd.Route{{Pubend: "P1"}})
		if err != nil {
			t.Fatal(err)
		}
		s := &realShell{c: c, m: m, pub: pub, skew: -time.Duration(c.rng.IntN(1000)) * time.Millisecond, client: 1}
		s.b = shell.New(shell.Config{ID: msg.NodeID(fmt.Sprintf("p%d", m.id)), Engine: eng, Clock: s, Net: s,
			Durability: m.node, Hosted: []msg.PubendID{"P1"}, Strict: true, Logger: slog.New(slog.DiscardHandler)})
		if err := s.b.Restore(ev.Loaded); err != nil {
			t.Fatalf("seed %d: restore at member %d: %v", seed, m.id, err)
		}
		m.node.Attach(s)
		m.sh2 = s
		leaders++
		s.b.ClientUp(s.client)
		// The client reconnects and resends what was not acked.
		for seq := uint64(1); seq < pub.next; seq++ {
			if _, ok := pub.ticks[seq]; !ok {
				s.b.ClientRequest(s.client, msg.Publish{Publisher: "pub", Seq: seq, Topic: "a.b", Payload: []byte(fmt.Sprint(seq))})
			}
		}
		c.at(0, s.drain)
	}
	for _, m := range c.ms {
		c.start(m)
	}
	for at := 0; at < 20000; at += tickMs {
		c.at(at, func() {
			for _, m := range c.ms {
				if m.node == nil {
					continue
				}
				m.node.Tick()
				if s := m.sh2; s != nil && !s.dead {
					s.b.Tick()
					if pub.next <= total && at%20 == 0 {
						s.b.ClientRequest(s.client, msg.Publish{Publisher: "pub", Seq: pub.next, Topic: "a.b", Payload: []byte(fmt.Sprint(pub.next))})
						pub.next++
					}
					if trim && at%100 == 0 {
						s.b.Trim()
					}
					s.b.Drain()
				}
				c.work(m)
			}
		})
	}
	// Crash the serving leader three times, restarting it later.
	for _, at := range []int{1500, 3500, 5500} {
		c.at(at, func() {
			for _, m := range c.ms {
				if m.sh2 != nil && !m.sh2.dead && m.node != nil {
					c.crash(m)
					c.at(300, func() { c.restart(m) })
					return
				}
			}
		})
	}
	c.loop(20000)
	if len(c.errs) > 0 {
		t.Fatalf("seed %d: %s", seed, c.errs[0])
	}
	if len(pub.fails) > 0 {
		t.Fatalf("seed %d: %s", seed, pub.fails[0])
	}
	var prev tick.Tick
	for seq := uint64(1); seq <= total; seq++ {
		tk, ok := pub.ticks[seq]
		if !ok {
			t.Fatalf("seed %d: seq %d never acked (%d leaders served)", seed, seq, leaders)
		}
		if tk <= prev {
			t.Fatalf("seed %d: seq %d acked at tick %d, not above seq %d's %d", seed, seq, tk, seq-1, prev)
		}
		prev = tk
	}
	if leaders < 4 {
		t.Fatalf("seed %d: %d leaders served, want at least 4 (three crashes)", seed, leaders)
	}
	return c
}
