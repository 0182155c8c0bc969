package broker_test

import (
	"context"
	"os"
	"slices"
	"testing"
	"time"

	"github.com/aerie-mq/aerie/client"
	"github.com/aerie-mq/aerie/internal/broker"
)

// TestRaftWipedMajorityStops: the whole cell of 3 stops; two members lose
// their data directories and start again before the third. Their Raft
// state is empty, so each waits to learn whether the cell is new
// (raftphb/newcell.go): neither serves, a publish through them is never
// acked, their status says whom they wait for, and each warns what it
// waits for and what the operator must do. When the third returns with
// the cell's history, they learn that they lost their state and wait to
// be admitted as new members; the third alone is no majority, so no
// member serves: the cell stays stopped instead of forming a new one on
// an empty log (before, the two elected a leader of their own).
func TestRaftWipedMajorityStops(t *testing.T) {
	if testing.Short() {
		t.Skip("a replicated cell with fsyncs and an election")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	c, logs := startRaftCellLogged(t, ctx, 3, func(o *broker.RaftOptions) { o.TickInterval, o.ElectionTicks = 20*time.Millisecond, 3 })
	publishSeqs(t, ctx, c.nodes[c.leader], 100)
	wiped := []int{c.leader, (c.leader + 1) % 3}
	kept := (c.leader + 2) % 3
	for j := range 3 {
		c.stops[j]()
	}
	for _, w := range wiped {
		if err := os.RemoveAll(c.opts[w].DataDir); err != nil {
			t.Fatal(err)
		}
		c.restart(w)
	}
	// A publish through a wiped member: forwarded to no leader, never acked.
	pctx, pcancel := context.WithTimeout(ctx, 1500*time.Millisecond)
	if p, err := client.Dial(pctx, c.nodes[wiped[0]].ClientAddr(), client.Options{ID: "pub2", Pubend: "P1", Logger: quietLogger()}); err == nil {
		if _, err := p.Publish(pctx, client.Message{Topic: "t", Props: map[string]any{"seq": int64(101)}}); err == nil {
			t.Fatalf("a publish through wiped p%d was acked", wiped[0]+1)
		}
		p.Close()
	}
	pcancel()
	// 10 election timeouts of 60 ms: the warning after 0.6 s.
	noMemberServes(t, ctx, c, 1500*time.Millisecond, "data directories wiped", wiped...)
	for _, w := range wiped {
		st, err := c.nodes[w].Status(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if !st.Raft.Awaiting || !slices.Equal(st.Raft.AwaitingFrom, []string{"p" + string(rune('1'+kept))}) {
			t.Fatalf("p%d: awaiting %v from %v; want p%d", w+1, st.Raft.Awaiting, st.Raft.AwaitingFrom, kept+1)
		}
		if logs[w].has("WARN", "still waits to learn whether its cell is new", "majority") == "" {
			t.Fatalf("p%d did not warn that it waits", w+1)
		}
	}
	c.restart(kept)
	// 30 election timeouts: the joiners' warning after 1.8 s.
	noMemberServes(t, ctx, c, 3*time.Second, "data directories wiped", 0, 1, 2)
	for _, w := range wiped {
		st, err := c.nodes[w].Status(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if st.Raft.Awaiting || !st.Raft.Joining || st.Raft.ID <= 255 {
			t.Fatalf("p%d: Raft id %d, awaiting %v, joining %v: want a joiner under a new id", w+1, st.Raft.ID, st.Raft.Awaiting, st.Raft.Joining)
		}
		if logs[w].has("WARN", "lost the Raft state") == "" || logs[w].has("WARN", "still waits to be admitted") == "" {
			t.Fatalf("p%d did not log that it lost its state and waits to be admitted", w+1)
		}
	}
}
