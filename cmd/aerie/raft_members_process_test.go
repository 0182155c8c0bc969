package main

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/aerie-mq/aerie/internal/raftphb"
)

// TestReplicatedPHBMembersChange changes the members of a running
// replicated PHB cell of `aerie broker` processes while an `aerie pub`
// process publishes through it (docs/REPLICATION.md "Changing a cell's
// members"): a fourth member p4 is added — the config gains it, p4 starts
// with an empty data directory, the three others restart one at a time
// with the new config — and must become a voter (a new generation of slot
// 4, admitted as a learner and caught up from the leader's store image);
// then p1 is removed — the others reload (SIGHUP) a config without it, in
// which p2, p3 and p4 keep their slots by raft_slot, and p1 stops — and
// the serving leader's voters must be p2, p3 and p4. The
// publisher must exit 0 with every event acked, and the subscriber must
// get every event exactly once, in order.
func TestReplicatedPHBMembersChange(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs processes")
	}
	f := newProcFixture(t)
	ids := []string{"p1", "p2", "p3", "p4"}
	listen, clients, https := map[string]string{}, map[string]string{}, map[string]string{}
	for _, id := range ids {
		listen[id], clients[id], https[id] = f.addr(), f.addr(), f.addr()
	}
	shbListen, shbClients := f.addr(), f.addr()
	// config writes the network with members ms, each on slot slots[id]
	// when given.
	config := func(ms []string, slots map[string]int) {
		cfg := ""
		for _, id := range ms {
			cfg += fmt.Sprintf("[[broker]]\nid = %q\ncell = \"phb\"\nlisten = %q\nclients = %q\nhttp = %q\ndata = \"data/%s\"\npubends = [\"P1\"]\n",
				id, listen[id], clients[id], https[id], id)
			if s := slots[id]; s != 0 {
				cfg += fmt.Sprintf("raft_slot = %d\n", s)
			}
			cfg += "\n"
		}
		cfg += fmt.Sprintf("[[broker]]\nid = \"s1\"\nlisten = %q\nclients = %q\n\n[[link]]\nup = \"phb\"\ndown = \"s1\"\n", shbListen, shbClients)
		f.writeConfig(cfg)
	}
	members := func(ms []string) map[string]string {
		out := map[string]string{}
		for _, id := range ms {
			out[id] = https[id]
		}
		return out
	}
	// rolling restarts each of ms, one at a time, each caught up before
	// the next, any member of cell leading: the others learn the new
	// config.
	rolling := func(ctx context.Context, ms, cell []string) {
		for _, id := range ms {
			f.kill(id)
			f.start(id)
			waitCaughtUp(t, ctx, members(cell), id)
		}
	}

	config(ids[:3], nil)
	for _, id := range ids[:3] {
		f.start(id)
	}
	f.start("s1")
	ctx, cancel := context.WithTimeout(context.Background(), 240*time.Second)
	defer cancel()
	waitLeader(t, ctx, members(ids[:3]), "")
	sub, err := f.dial(ctx, shbClients, "sub").Subscribe(ctx, ">")
	if err != nil {
		t.Fatal(err)
	}
	got := collectPublishers(sub)
	addrs := strings.Join([]string{clients["p1"], clients["p2"], clients["p3"], clients["p4"]}, ",")
	const name, count, rate = "pub-a", 4000, 100
	pub := startPubProc(t, ctx, f, name, addrs, "orders."+name, count, rate)
	began := time.Now()
	got.waitCount(t, ctx, name, 300)

	// Add p4.
	config(ids, nil)
	f.start("p4")
	added := time.Now()
	rolling(ctx, ids[:3], ids)
	id4 := waitVoters(t, ctx, members(ids), []uint64{1, 2, 3, 4})
	if raftphb.Slot(id4[3]) != 4 || raftphb.Gen(id4[3]) == 0 {
		t.Fatalf("p4 is Raft member %d: want a later generation of slot 4 (a new member joins by snapshot)", id4[3])
	}
	t.Logf("p4 added: a voter (Raft id %d) %v after it started, the three others restarted meanwhile; voters %v",
		id4[3], time.Since(added).Round(time.Millisecond), id4)

	// Remove p1: the others keep their slots, learn of it by SIGHUP, and
	// p1 stops (as its operator would, right after).
	config(ids[1:], map[string]int{"p2": 2, "p3": 3, "p4": 4})
	for _, id := range ids[1:] {
		f.signal(id, syscall.SIGHUP)
	}
	f.kill("p1")
	removed := time.Now()
	voters := waitVoters(t, ctx, members(ids[1:]), []uint64{2, 3, 4})
	t.Logf("p1 removed: voters %v, %v after it stopped", voters, time.Since(removed).Round(time.Millisecond))
	if n := got.count(name); n >= count || pub.exited() {
		t.Fatalf("the publisher had finished (%d delivered) before p1 was removed: the run does not span both changes", n)
	}

	pub.mustAckAll(t, ctx, count)
	got.waitCount(t, ctx, name, count)
	got.inOrder(t, name, count)
	t.Logf("longest pause between two deliveries (100 events/s published): %v from p4's start on (three restarts, one of a leader), %v from p1's stop on",
		got.maxGap(name, added).Round(time.Millisecond), got.maxGap(name, removed).Round(time.Millisecond))
	t.Logf("%d events acked and delivered once, in order, in %v, across both changes", count, time.Since(began).Round(time.Millisecond))
}

// waitVoters waits until the serving leader among https has exactly the
// voters of slots, none a learner, and returns them.
func waitVoters(t *testing.T, ctx context.Context, https map[string]string, slots []uint64) []uint64 {
	t.Helper()
	tk := time.NewTicker(50 * time.Millisecond)
	defer tk.Stop()
	var last []uint64
	for {
		for _, addr := range https {
			st, ok := tryStatus(ctx, addr)
			if !ok || st.Raft == nil || !st.Raft.Serving {
				continue
			}
			last = slices.Sorted(slices.Values(st.Raft.Voters))
			have := make([]uint64, len(last))
			for i, v := range last {
				have[i] = raftphb.Slot(v)
			}
			if len(st.Raft.Learners) == 0 && slices.Equal(have, slots) {
				return last
			}
		}
		select {
		case <-ctx.Done():
			t.Fatalf("the leader's voters are %v, not slots %v: %v", last, slots, ctx.Err())
		case <-tk.C:
		}
	}
}
