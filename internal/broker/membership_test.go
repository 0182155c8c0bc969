package broker_test

import (
	"context"
	"os"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aerie-mq/aerie/client"
	"github.com/aerie-mq/aerie/internal/broker"
	"github.com/aerie-mq/aerie/internal/faultnet"
	"github.com/aerie-mq/aerie/internal/member"
	"github.com/aerie-mq/aerie/internal/msg"
)

// TestCellMemberStall stalls b1, one broker of the two-broker cell ib1,
// while events flow: every one of its broker links accepts and forwards
// nothing (seed 000 §4.2's stall), and its memberlist stops answering.
// Membership must declare it dead, p1 and the SHBs must drop their links
// to it at once (not after the 5 s heartbeat timeout), the flows it
// carried move to b2, and every event reaches both SHBs exactly once and in
// order while b1 is still stalled. That the link was dropped by a
// membership view and not by the heartbeat timeout is read from p1's log
// (an ordering of events, which a loaded host cannot fail); the detection
// time and latencies are logged. Then b1's links resume: it is linked
// again and the flows stay exactly-once.
//
// AERIE_STALL_BASELINE=1 also runs the stall without membership and logs
// its latency (the heartbeat path), for comparison.
func TestCellMemberStall(t *testing.T) {
	if testing.Short() {
		t.Skip("runs five brokers with membership for several seconds")
	}
	t.Run("membership", func(t *testing.T) { stallCellMember(t, true) })
	if os.Getenv("AERIE_STALL_BASELINE") != "" {
		t.Run("heartbeat-only", func(t *testing.T) { stallCellMember(t, false) })
	}
}

func stallCellMember(t *testing.T, gossip bool) {
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	n, proxies := startCellNet(t, ctx, gossip)
	if gossip {
		waitStatus(t, ctx, n, "p1", "a view of all five brokers", func(s broker.Status) bool {
			return s.Membership != nil && len(s.Membership.Members) == 5
		})
	}
	c1, c2 := subscribeAt(t, ctx, n, "s1", ""), subscribeAt(t, ctx, n, "s2", "")
	pubs := fourPublishers(n)
	want := map[int64]bool{}
	publishFour(t, pubs, 1, 200, want)
	c1.waitFor(t, len(want), 20*time.Second)
	c2.waitFor(t, len(want), 20*time.Second)

	// A steady stream, 200 events/s over the four pubends, through the
	// stall: some pubends are routed through b1 (the bundle splits them,
	// as TestCellMemberCrash checks).
	stream := newStreamer(t, pubs, 201)
	b1Name := ""
	if gossip {
		st, err := n.nodes["b1"].Status(ctx)
		if err != nil {
			t.Fatal(err)
		}
		b1Name = st.Membership.Self
	}
	stream.waitSent(t, ctx, 100)
	stalled := time.Now()
	for _, l := range []string{"p1-b1", "b2-b1", "b1-s1", "b1-s2"} {
		proxies[l].Set(faultnet.Stall)
	}
	if gossip {
		n.nodes["b1"].KillMembership()
	}
	// p1 must notice: b1 gone from its view (with membership) and its
	// link to b1 down.
	waitStatus(t, ctx, n, "p1", "b1 out of the view and its link down", func(s broker.Status) bool {
		if slices.Contains(s.Peers, "b1") {
			return false
		}
		return s.Membership == nil || !slices.Contains(s.Membership.Members, b1Name)
	})
	detected := time.Since(stalled)
	// Keep publishing for 1.5 s after detection (on the stream's own clock:
	// 300 events at 200/s), then stop and collect.
	stream.waitSent(t, ctx, stream.sent()+300)
	stream.stop(t, want)
	c1.waitFor(t, len(want), 30*time.Second)
	c2.waitFor(t, len(want), 30*time.Second)
	during := time.Now()
	lat1, at1 := c1.maxLatency(stalled.Add(-time.Second), during)
	lat2, at2 := c2.maxLatency(stalled.Add(-time.Second), during)
	t.Logf("membership=%v: b1 stalled; p1 dropped its link after %v; max latency of events published from 1 s before the stall: s1 %v (published %v after the stall), s2 %v (%v)",
		gossip, detected.Round(time.Millisecond), lat1.Round(time.Millisecond), at1.Sub(stalled).Round(time.Millisecond),
		lat2.Round(time.Millisecond), at2.Sub(stalled).Round(time.Millisecond))
	// Every event has arrived and b1 is still stalled: the flows it
	// carried moved to b2. With membership, what dropped p1's link to b1
	// must have been a view (the heartbeat timeout says otherwise).
	if cause := n.firstLinkDown("p1", "b1"); gossip && !strings.HasPrefix(cause, "membership view ") {
		t.Errorf("p1 first dropped its link to the stalled b1 for %q, want a membership view", cause)
	}

	// b1 resumes: its links are accepted again (the view excluded b1, but
	// a link to it is still welcome), and the flows stay exactly-once.
	for _, l := range []string{"p1-b1", "b2-b1", "b1-s1", "b1-s2"} {
		proxies[l].Set(faultnet.Pass)
	}
	waitStatus(t, ctx, n, "p1", "b1 linked again", func(s broker.Status) bool { return slices.Contains(s.Peers, "b1") })
	publishFour(t, pubs, 10001, 200, want)
	c1.waitFor(t, len(want), 30*time.Second)
	c2.waitFor(t, len(want), 30*time.Second)
	c1.check(t, want)
	c2.check(t, want)
}

// waitStatus polls broker id's Status until cond holds. The poll waits on
// a condition with a deadline, never on a guessed duration.
func waitStatus(t *testing.T, ctx context.Context, n *net4, id msg.NodeID, what string, cond func(broker.Status) bool) {
	t.Helper()
	tk := time.NewTicker(5 * time.Millisecond)
	defer tk.Stop()
	var last broker.Status
	for {
		st, err := n.nodes[id].Status(ctx)
		if err == nil && cond(st) {
			return
		}
		last = st
		select {
		case <-ctx.Done():
			t.Fatalf("%s: waiting for %s: %v (last status: peers %v membership %+v)", id, what, ctx.Err(), last.Peers, last.Membership)
		case <-tk.C:
		}
	}
}

// streamer publishes at a steady 200 events/s, round-robin over pubs.
type streamer struct {
	mu    sync.Mutex
	n     int
	chans []<-chan client.Result
	seqs  []int64
	err   error
	more  chan struct{}
	quit  chan struct{}
	done  chan struct{}
}

func newStreamer(t *testing.T, pubs []*client.Client, from int) *streamer {
	s := &streamer{more: make(chan struct{}, 1), quit: make(chan struct{}), done: make(chan struct{})}
	go func() {
		defer close(s.done)
		tk := time.NewTicker(5 * time.Millisecond)
		defer tk.Stop()
		for i := from; ; i++ {
			select {
			case <-s.quit:
				return
			case <-tk.C:
			}
			ch, err := pubs[i%len(pubs)].PublishAsync(client.Message{Topic: topicOf(i), Props: map[string]any{"seq": int64(i)}})
			s.mu.Lock()
			if err != nil {
				s.err = err
				s.mu.Unlock()
				return
			}
			s.chans, s.seqs = append(s.chans, ch), append(s.seqs, int64(i))
			s.n++
			s.mu.Unlock()
			select {
			case s.more <- struct{}{}:
			default:
			}
		}
	}()
	return s
}

func (s *streamer) sent() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.n
}

// waitSent waits until the streamer has published k events.
func (s *streamer) waitSent(t *testing.T, ctx context.Context, k int) {
	t.Helper()
	for s.sent() < k {
		select {
		case <-s.more:
		case <-s.done:
			t.Fatalf("publisher stopped: %v", s.err)
		case <-ctx.Done():
			t.Fatalf("only %d of %d published", s.sent(), k)
		}
	}
}

// stop ends the stream, waits for every ack and adds the seqs to want.
func (s *streamer) stop(t *testing.T, want map[int64]bool) {
	t.Helper()
	close(s.quit)
	<-s.done
	if s.err != nil {
		t.Fatal(s.err)
	}
	waitAcks(t, s.chans)
	for _, q := range s.seqs {
		want[q] = true
	}
}

// TestMembershipLeaveAndRestart: a broker stopped gracefully leaves the
// membership (its peers record a leave, not a crash), and its restart is a
// new incarnation, with a larger boot nonce, that the views admit.
func TestMembershipLeaveAndRestart(t *testing.T) {
	if testing.Short() {
		t.Skip("runs five brokers with membership")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	n, _ := startCellNet(t, ctx, true)
	waitStatus(t, ctx, n, "p1", "a quorate view of all five brokers", func(s broker.Status) bool {
		return s.Membership != nil && len(s.Membership.Members) == 5 && s.Membership.Quorate
	})
	st, err := n.nodes["b2"].Status(ctx)
	if err != nil {
		t.Fatal(err)
	}
	old := st.Membership.Self
	n.stop("b2") // graceful: Bye, then memberlist's leave
	waitStatus(t, ctx, n, "p1", "b2 out of the view", func(s broker.Status) bool {
		return !slices.Contains(s.Membership.Members, old)
	})
	st, err = n.nodes["p1"].Status(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Contains(st.Membership.Left, old) || slices.Contains(st.Membership.Crashed, old) {
		t.Fatalf("b2 stopped gracefully, but p1's view change says left %v crashed %v", st.Membership.Left, st.Membership.Crashed)
	}
	n.start("b2")
	st, err = n.nodes["b2"].Status(ctx)
	if err != nil {
		t.Fatal(err)
	}
	restarted := st.Membership.Self
	oldID, err1 := member.ParseName(old)
	newID, err2 := member.ParseName(restarted)
	if err1 != nil || err2 != nil || newID.BootNonce <= oldID.BootNonce {
		t.Fatalf("restarted b2 is %s, not a newer incarnation than %s (%v, %v)", restarted, old, err1, err2)
	}
	waitStatus(t, ctx, n, "p1", "the restarted b2 in the view", func(s broker.Status) bool {
		return slices.Contains(s.Membership.Members, restarted) && len(s.Membership.Members) == 5
	})
}
