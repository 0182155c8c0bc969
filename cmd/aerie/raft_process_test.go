package main

import (
	"context"
	"encoding/json"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/aerie-mq/aerie/client"
	"github.com/aerie-mq/aerie/internal/broker"
)

// TestKill9ReplicatedPHBLeader runs a replicated PHB cell of three
// `aerie broker` processes (one Raft group for P1, docs/CONFIG.md) feeding
// an SHB. A publisher given all three client addresses publishes a stream;
// mid-stream the cell's leader is killed with SIGKILL, and restarted later.
// The publisher carries on through the failover (its members redirect: a
// member that does not lead sends it on to the next address; the forward
// mode is TestKill9ReplicatedPHBLeaderForwarded), every publish is acknowledged,
// and the subscriber gets every acknowledged event exactly once, in order.
// Then two of the three members are killed: the last one stops serving
// and acks nothing; when one of the others returns, the waiting publish
// is acked and delivered after everything before it.
func TestKill9ReplicatedPHBLeader(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs processes")
	}
	f := newProcFixture(t)
	cell := startReplicatedCell(f, "redirect")
	ids, clients, https := cell.ids, cell.clients, cell.https
	ctx, cancel := context.WithTimeout(context.Background(), 120*time.Second)
	defer cancel()
	leader := waitLeader(t, ctx, https, "")

	sub, err := f.dial(ctx, cell.shbClients, "sub").Subscribe(ctx, ">")
	if err != nil {
		t.Fatal(err)
	}
	const total = 1500
	got := collectSeqs(sub, total, total+1)

	pub := f.dial(ctx, strings.Join([]string{clients["p1"], clients["p2"], clients["p3"]}, ","), "pub")
	var acks []<-chan client.Result
	killedAt := time.Time{}
	for i := 1; i <= total; i++ {
		ch, err := pub.PublishAsync(client.Message{Topic: "orders.eu", Props: map[string]any{"seq": int64(i)}})
		if err != nil {
			t.Fatal(err)
		}
		acks = append(acks, ch)
		switch i {
		case 500:
			// Wait for the first third to be acked, so that the kill
			// lands with acknowledged events behind it.
			waitAcked(t, ctx, acks)
			f.kill(leader)
			killedAt = time.Now()
			t.Logf("killed the leader %s", leader)
		case 1000:
			next := waitLeader(t, ctx, https, leader)
			t.Logf("%s leads after the kill (%v)", next, time.Since(killedAt).Round(time.Millisecond))
			f.start(leader)
		}
	}
	waitAcked(t, ctx, acks)
	got.wait(t, ctx, total)
	got.inOrder(t)

	// A majority lost: the survivor stops serving (CheckQuorum) and acks
	// nothing until a second member returns.
	current := waitLeader(t, ctx, https, "")
	var others []string
	for _, id := range ids {
		if id != current {
			others = append(others, id)
		}
	}
	f.kill(current)
	f.kill(others[0])
	waitNotServing(t, ctx, https[others[1]])
	ch, err := pub.PublishAsync(client.Message{Topic: "orders.eu", Props: map[string]any{"seq": int64(total + 1)}})
	if err != nil {
		t.Fatal(err)
	}
	waitNotServing(t, ctx, https[others[1]])
	select {
	case r := <-ch:
		t.Fatalf("a publish was acked (%+v) while two of three members were down", r)
	default:
	}
	f.start(others[0])
	waitAcked(t, ctx, []<-chan client.Result{ch})
	got.wait(t, ctx, total+1) // the publish acked after the cell recovered is delivered
	got.inOrder(t)
}

// TestKill9ReplicatedPHBLeaderForwarded: the cell's members forward
// (raft_clients = "forward"; seed 001's "one hop, ack client"). A
// publisher given only the address of a member that does not lead
// publishes a stream; every publish is forwarded to the leader and acked
// through that member. Mid-stream the leader is killed with SIGKILL: the
// member resends what was not answered to the new leader (or serves it,
// elected itself), and later the old leader is restarted. Every publish is
// acknowledged, and the subscriber gets every event exactly once, in order.
func TestKill9ReplicatedPHBLeaderForwarded(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs processes")
	}
	f := newProcFixture(t)
	cell := startReplicatedCell(f, "forward")
	ids, clients, https := cell.ids, cell.clients, cell.https
	ctx, cancel := context.WithTimeout(context.Background(), 120*time.Second)
	defer cancel()
	leader := waitLeader(t, ctx, https, "")
	at := ids[0]
	for at == leader {
		at = ids[(slices.Index(ids, at)+1)%len(ids)]
	}

	sub, err := f.dial(ctx, cell.shbClients, "sub").Subscribe(ctx, ">")
	if err != nil {
		t.Fatal(err)
	}
	const total = 1500
	got := collectSeqs(sub, total)

	pub := f.dial(ctx, clients[at], "pub")
	var acks []<-chan client.Result
	for i := 1; i <= total; i++ {
		ch, err := pub.PublishAsync(client.Message{Topic: "orders.eu", Props: map[string]any{"seq": int64(i)}})
		if err != nil {
			t.Fatal(err)
		}
		acks = append(acks, ch)
		switch i {
		case 500:
			waitAcked(t, ctx, acks)
			if st := memberStatus(t, ctx, https[at]); st.Raft.Serving || st.Raft.Forwarding != 1 {
				t.Fatalf("%s: serving %v, forwarding for %d clients: want a member that forwards for the publisher", at, st.Raft.Serving, st.Raft.Forwarding)
			}
			f.kill(leader)
			t.Logf("killed the leader %s; the publisher is at %s", leader, at)
		case 1000:
			next := waitLeader(t, ctx, https, leader)
			t.Logf("%s leads after the kill", next)
			f.start(leader)
		}
	}
	waitAcked(t, ctx, acks)
	got.wait(t, ctx, total)
	got.inOrder(t)
}

// memberStatus reads a member's /status.
func memberStatus(t *testing.T, ctx context.Context, addr string) broker.Status {
	t.Helper()
	var sts []broker.Status
	req, _ := http.NewRequestWithContext(ctx, "GET", "http://"+addr+"/status", nil)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if err := json.NewDecoder(resp.Body).Decode(&sts); err != nil || len(sts) != 1 || sts[0].Raft == nil {
		t.Fatalf("status of %s: %v (%d entries)", addr, err, len(sts))
	}
	return sts[0]
}

// tryStatus reads a member's /status; false if it does not answer (yet).
func tryStatus(ctx context.Context, addr string) (broker.Status, bool) {
	var sts []broker.Status
	req, _ := http.NewRequestWithContext(ctx, "GET", "http://"+addr+"/status", nil)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return broker.Status{}, false
	}
	defer resp.Body.Close()
	if err := json.NewDecoder(resp.Body).Decode(&sts); err != nil || len(sts) != 1 {
		return broker.Status{}, false
	}
	return sts[0], true
}

// waitNotServing polls a member's /status until it answers and does not
// serve its cell.
func waitNotServing(t *testing.T, ctx context.Context, addr string) {
	t.Helper()
	tk := time.NewTicker(20 * time.Millisecond)
	defer tk.Stop()
	for {
		if st, ok := tryStatus(ctx, addr); ok && st.Raft != nil && !st.Raft.Serving {
			return
		}
		select {
		case <-ctx.Done():
			t.Fatalf("%s still serves with two of three members down: %v", addr, ctx.Err())
		case <-tk.C:
		}
	}
}

// waitAcked waits until every publish so far is acknowledged.
func waitAcked(t *testing.T, ctx context.Context, acks []<-chan client.Result) {
	t.Helper()
	for i, ch := range acks {
		if ch == nil {
			continue
		}
		select {
		case r := <-ch:
			if r.Err != nil {
				t.Fatalf("publish %d: %v", i+1, r.Err)
			}
			acks[i] = nil
		case <-ctx.Done():
			t.Fatalf("publish %d never acked", i+1)
		}
	}
}

// waitLeader polls the members' /status until one other than not serves
// the cell, and returns its id.
func waitLeader(t *testing.T, ctx context.Context, https map[string]string, not string) string {
	t.Helper()
	tk := time.NewTicker(20 * time.Millisecond)
	defer tk.Stop()
	for {
		for id, addr := range https {
			if id == not {
				continue
			}
			if st, ok := tryStatus(ctx, addr); ok && st.Raft != nil && st.Raft.Serving {
				return id
			}
		}
		select {
		case <-ctx.Done():
			t.Fatalf("no member other than %q serves the cell: %v", not, ctx.Err())
		case <-tk.C:
		}
	}
}
