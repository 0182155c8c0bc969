package broker_test

import (
	"context"
	"fmt"
	"runtime/pprof"
	"slices"
	"sort"
	"syscall"
	"testing"
	"time"

	"github.com/aerie-mq/aerie/client"
	"github.com/aerie-mq/aerie/internal/broker"
	"github.com/aerie-mq/aerie/internal/gd"
	"github.com/aerie-mq/aerie/internal/msg"
	raftnode "github.com/aerie-mq/aerie/internal/raftphb/node"
)

// BenchmarkReplicationCost measures what replicating a PHB costs (P2S,
// DEBS 2014 §4, Tables 1–2: 3–7 replicas): one PHB (R1) against a cell of
// three members (R3, one Raft group), each feeding one SHB over loopback
// TCP, every member fsyncing to its own directory. One publisher at the
// (leading) PHB publishes 256-byte events with at most 1024
// unacknowledged: acked events per second, and the publish→ack latency
// percentiles; then 200 publishes one at a time (the commit latency
// alone, p50_seq_us). All members share this machine's CPUs and disk,
// so compare R3 with R1, not with P2S's separate machines.
func BenchmarkReplicationCost(b *testing.B) {
	for _, k := range []int{1, 3} {
		b.Run(fmt.Sprintf("R%d", k), func(b *testing.B) { benchReplicas(b, k, 0) })
	}
	// R3 with one batch proposed at a time (no pipelining): the cost
	// pipelining removes.
	b.Run("R3w1", func(b *testing.B) { benchReplicas(b, 3, 1) })
}

// benchReplicas measures a cell of k members whose leader proposes at
// most window batches ahead of the commit (0: the default).
func benchReplicas(b *testing.B, k, window int) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	leader, members := startCell(b, ctx, k, window)
	pub, err := client.Dial(ctx, leader, client.Options{ID: "bench", Pubend: "P1", Logger: quietLogger()})
	if err != nil {
		b.Fatal(err)
	}
	defer pub.Close()
	flows := func() []raftnode.Flow {
		var out []raftnode.Flow
		for _, n := range members {
			var f raftnode.Flow
			if st, err := n.Status(ctx); err == nil && st.Raft != nil {
				f = st.Raft.Flow
			}
			out = append(out, f)
		}
		return out
	}
	var flow0 []raftnode.Flow
	r := publishLoad(b, ctx, pub, func() { flow0 = flows() })
	flow1 := flows()
	el, cpu, lat, seq := r.elapsed, r.cpu, r.lat, r.seq
	b.ReportMetric(float64(b.N)/el.Seconds(), "msgs/s")
	b.ReportMetric(percentileUS(lat, 0.50), "p50_us")
	b.ReportMetric(percentileUS(lat, 0.99), "p99_us")
	b.ReportMetric(percentileUS(seq, 0.50), "p50_seq_us")
	// CPU of the whole process (every member, the SHB and the client):
	// on a shared machine, throughput follows the CPU each event costs.
	b.ReportMetric(float64(cpu.Microseconds())/float64(b.N), "cpu_us/msg")
	// The largest Raft log of a member at the end (compaction bounds it)
	// and the compactions over the run.
	var logBytes int64
	var compactions, entries uint64
	for _, n := range members {
		if st, err := n.Status(ctx); err == nil && st.Raft != nil {
			logBytes, compactions = max(logBytes, st.Raft.LogBytes), compactions+st.Raft.Compactions
			entries = max(entries, st.Raft.LogEntries)
		}
	}
	if k > 1 {
		b.ReportMetric(float64(logBytes)/1024, "raft_log_KiB")
		b.ReportMetric(float64(compactions), "compactions")
		// Raft entries the leader's log holds: events per entry is the
		// group commit's size (the 200 one at a time are one each).
		b.ReportMetric(float64(entries), "raft_entries")
		// The group commit over the pipelined part, at the leader: records
		// per batch proposed, entries per append sent, and the Raft log's
		// fsyncs per 1000 events (leader, and the followers' mean).
		var lead raftnode.Flow
		var fsyncs uint64
		for i := range members {
			d := flowDelta(flow1[i], flow0[i])
			if d.Proposed > 0 {
				lead = d
			} else {
				fsyncs += d.Syncs
			}
		}
		if lead.Proposed > 0 {
			b.ReportMetric(float64(lead.ProposedRecords)/float64(lead.Proposed), "recs/batch")
			b.ReportMetric(float64(lead.AppendEntries)/float64(max(lead.Appends, 1)), "ents/app")
			b.ReportMetric(float64(lead.Syncs)*1000/float64(b.N), "lead_fsyncs/kmsg")
			b.ReportMetric(float64(fsyncs)*1000/float64(b.N)/float64(k-1), "foll_fsyncs/kmsg")
		}
	}
}

// flowDelta is a member's flow between two readings.
func flowDelta(a, b raftnode.Flow) raftnode.Flow {
	return raftnode.Flow{Proposed: a.Proposed - b.Proposed, ProposedRecords: a.ProposedRecords - b.ProposedRecords,
		Applied: a.Applied - b.Applied, AppliedRecords: a.AppliedRecords - b.AppliedRecords,
		Writes: a.Writes - b.Writes, Syncs: a.Syncs - b.Syncs, Appends: a.Appends - b.Appends, AppendEntries: a.AppendEntries - b.AppendEntries}
}

// loadResult is what publishLoad measured.
type loadResult struct {
	seq, lat     []time.Duration // publish→ack: one at a time, pipelined
	elapsed, cpu time.Duration   // of the pipelined part (cpu: the whole process)
}

// publishLoad is the load of the replication benchmarks: 200 publishes of
// 256 bytes one at a time (the commit latency alone), then b.N with at
// most 1024 unacknowledged, timed.
func publishLoad(b *testing.B, ctx context.Context, pub *client.Client, atStart func()) loadResult {
	payload := make([]byte, 256)
	msgOf := func(i int) client.Message {
		return client.Message{Topic: "bench.t", Props: map[string]any{"seq": int64(i)}, Payload: payload}
	}
	var r loadResult
	for i := 1; i <= 200; i++ {
		at := time.Now()
		if _, err := pub.Publish(ctx, msgOf(i)); err != nil {
			b.Fatal(err)
		}
		r.seq = append(r.seq, time.Since(at))
	}
	const window = 1024
	type sent struct {
		at time.Time
		ch <-chan client.Result
	}
	inflight := make(chan sent, window)
	r.lat = make([]time.Duration, 0, b.N)
	done := make(chan error, 1)
	go func() {
		for s := range inflight {
			if res := <-s.ch; res.Err != nil {
				done <- res.Err
				return
			}
			r.lat = append(r.lat, time.Since(s.at))
		}
		done <- nil
	}()
	b.SetBytes(int64(len(payload)))
	if atStart != nil {
		atStart()
	}
	b.ResetTimer()
	began, cpu0 := time.Now(), cpuTime()
	for i := 1; i <= b.N; i++ {
		at := time.Now()
		ch, err := pub.PublishAsync(msgOf(200 + i))
		if err != nil {
			b.Fatal(err)
		}
		inflight <- sent{at, ch}
	}
	close(inflight)
	if err := <-done; err != nil {
		b.Fatal(err)
	}
	r.elapsed, r.cpu = time.Since(began), cpuTime()-cpu0
	b.StopTimer()
	return r
}

// percentileUS is the p-quantile of l in microseconds (l is sorted).
func percentileUS(l []time.Duration, p float64) float64 {
	sort.Slice(l, func(i, j int) bool { return l[i] < l[j] })
	return float64(l[int(p*float64(len(l)-1))].Microseconds())
}

// cpuTime is the process's user and system CPU time so far.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// startCell starts a PHB cell of k members (k = 1: a plain PHB) hosting
// P1 and an SHB below it, and returns the client address of the member
// that serves P1, and the cell's members.
func startCell(b *testing.B, ctx context.Context, k, window int) (string, []*broker.Node) {
	c := startRaftCell(b, ctx, k, "", func(o *broker.RaftOptions) { o.Window = window })
	return c.nodes[c.leader].ClientAddr(), c.nodes[:k]
}

// raftCell is a running PHB cell and its SHB s1 (the last of nodes).
type raftCell struct {
	nodes  []*broker.Node
	stops  []func() // stop member i (graceful: its context ends)
	leader int      // the member that served when startRaftCell returned
	// opts and run start member i again (restart): its options, and
	// what starts a broker and appends it to nodes and stops.
	opts []broker.Options
	run  func(o broker.Options) *broker.Node
}

// restart starts member i again (stopped first with stops[i]) with its
// options; it becomes nodes[i].
func (c *raftCell) restart(i int) {
	c.run(c.opts[i])
	last := len(c.nodes) - 1
	c.nodes[i], c.stops[i] = c.nodes[last], c.stops[last]
	c.nodes, c.stops = c.nodes[:last], c.stops[:last]
}

// startRaftCell starts a PHB cell of k members hosting P1, with clients
// (a member that does not serve forwards or redirects; "" the default),
// and an SHB s1 below it, and waits for a member to serve.
func startRaftCell(t testing.TB, ctx context.Context, k int, clients broker.RaftClients, mods ...func(*broker.RaftOptions)) *raftCell {
	return startRaftCellWith(t, ctx, k, clients, nil, mods...)
}

// startRaftCellWith is startRaftCell with nodeMod applied to every
// member's options (nil: none).
func startRaftCellWith(t testing.TB, ctx context.Context, k int, clients broker.RaftClients, nodeMod func(*broker.Options), mods ...func(*broker.RaftOptions)) *raftCell {
	cfg := gd.DefaultConfig()
	var members []msg.NodeID
	for i := 1; i <= k; i++ {
		members = append(members, msg.NodeID(fmt.Sprintf("p%d", i)))
	}
	cell := members[0]
	if k > 1 {
		cell = "phb"
	}
	cells := gd.Cells{cell: members}
	listen := map[msg.NodeID]string{}
	for _, m := range members {
		listen[m] = freeAddr(t)
	}
	c := &raftCell{}
	run := func(o broker.Options) *broker.Node {
		if o.Logger == nil {
			o.Logger = quietLogger()
		}
		n, err := broker.New(o)
		if err != nil {
			t.Fatal(err)
		}
		runCtx, stop := context.WithCancel(context.Background())
		done := make(chan struct{})
		var runErr error
		go func() {
			defer close(done)
			// Every goroutine of the broker inherits the label, so that a
			// CPU profile (-cpuprofile; go tool pprof -tags) splits the
			// process's CPU by broker: the cost per member.
			pprof.Do(runCtx, pprof.Labels("broker", string(o.ID)), func(ctx context.Context) { runErr = n.Run(ctx) })
		}()
		stopWait := func() {
			stop()
			<-done
		}
		t.Cleanup(stopWait)
		select {
		case <-n.Listening():
		case <-done:
			t.Fatalf("%s stopped before it listened: %v", o.ID, runErr)
		}
		c.nodes = append(c.nodes, n)
		c.stops = append(c.stops, stopWait)
		return n
	}
	route := []gd.Route{{Pubend: "P1", Down: []msg.NodeID{"s1"}}}
	for _, m := range members {
		o := broker.Options{ID: m, Routes: route, Cells: cells, GD: cfg, Listen: listen[m], Clients: freeAddr(t),
			DataDir: t.TempDir(), Upstreams: map[msg.NodeID]string{}}
		for _, p := range members {
			if p > m {
				o.Upstreams[p] = listen[p]
			}
		}
		if k > 1 {
			o.Raft = &broker.RaftOptions{Cell: cell, Members: members, Clients: clients}
			for _, mod := range mods {
				mod(o.Raft)
			}
		}
		if nodeMod != nil {
			nodeMod(&o)
		}
		c.opts = append(c.opts, o)
		run(o)
	}
	c.run = run
	ups := map[msg.NodeID]string{}
	for _, m := range members {
		ups[m] = listen[m]
	}
	run(broker.Options{ID: "s1", Routes: []gd.Route{{Pubend: "P1", Up: cell}}, Cells: cells, GD: cfg, Listen: freeAddr(t),
		Clients: freeAddr(t), Upstreams: ups})
	if k == 1 {
		return c
	}
	c.leader = c.waitServing(t, ctx, -1)
	return c
}

// waitServing waits until a member other than not serves, and returns it.
func (c *raftCell) waitServing(t testing.TB, ctx context.Context, not int) int {
	tk := time.NewTicker(20 * time.Millisecond)
	defer tk.Stop()
	for {
		for i, n := range c.nodes[:len(c.nodes)-1] {
			if i == not {
				continue
			}
			if st, err := n.Status(ctx); err == nil && st.Raft != nil && st.Raft.Serving {
				return i
			}
		}
		select {
		case <-ctx.Done():
			t.Fatal("no member of the cell serves")
		case <-tk.C:
		}
	}
}

// BenchmarkRaftClients measures what a publisher pays for connecting to a
// member of a 3-member cell that does not serve (docs/BENCHMARKS.md §10):
// at the leader itself; at a follower that forwards its publishes to the
// leader (raft_clients = "forward", one more hop each way); at a follower
// that redirects it (raft_clients = "redirect": the follower closes the
// connection after 200 ms and the client moves on to the leader, its
// second address). first_ack_ms is the median, over 5 new clients, of the
// time from Dial to the first publish's ack; then one client publishes
// 200 events one at a time (p50_seq_us) and b.N events with at most 1024
// unacknowledged (msgs/s, p50_us, p99_us), as BenchmarkReplicationCost.
func BenchmarkRaftClients(b *testing.B) {
	for _, mode := range []string{"leader", "forward", "redirect"} {
		b.Run(mode, func(b *testing.B) { benchRaftClients(b, mode) })
	}
}

func benchRaftClients(b *testing.B, mode string) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	clients := broker.RaftClientsForward
	if mode == "redirect" {
		clients = broker.RaftClientsRedirect
	}
	c := startRaftCell(b, ctx, 3, clients)
	leader := c.nodes[c.leader].ClientAddr()
	addr := leader
	switch mode {
	case "forward":
		addr = c.nodes[(c.leader+1)%3].ClientAddr()
	case "redirect":
		addr = c.nodes[(c.leader+1)%3].ClientAddr() + "," + leader
	}
	payload := make([]byte, 256)
	msgOf := func(i int) client.Message {
		return client.Message{Topic: "bench.t", Props: map[string]any{"seq": int64(i)}, Payload: payload}
	}
	var first []time.Duration
	for i := range 5 {
		at := time.Now()
		pc, err := client.Dial(ctx, addr, client.Options{ID: fmt.Sprintf("first-%d", i), Pubend: "P1", Logger: quietLogger()})
		if err != nil {
			b.Fatal(err)
		}
		if _, err := pc.Publish(ctx, msgOf(1)); err != nil {
			b.Fatal(err)
		}
		first = append(first, time.Since(at))
		pc.Close()
	}
	pub, err := client.Dial(ctx, addr, client.Options{ID: "bench", Pubend: "P1", Logger: quietLogger()})
	if err != nil {
		b.Fatal(err)
	}
	defer pub.Close()
	r := publishLoad(b, ctx, pub, nil)
	el, lat, seq := r.elapsed, r.lat, r.seq
	b.ReportMetric(float64(b.N)/el.Seconds(), "msgs/s")
	b.ReportMetric(percentileUS(lat, 0.50), "p50_us")
	b.ReportMetric(percentileUS(lat, 0.99), "p99_us")
	b.ReportMetric(percentileUS(seq, 0.50), "p50_seq_us")
	b.ReportMetric(percentileUS(seq, 0.99), "p99_seq_us")
	b.ReportMetric(percentileUS(first, 0.5)/1000, "first_ack_ms")
}

// BenchmarkRaftClientsFailover measures a publisher's outage when the
// leader of a 3-member cell stops (gracefully: its connections close at
// once; the members elect a new leader after an election timeout, 1–2 s):
// the time from the stop to the publisher's next ack, median over b.N
// cells (-benchtime 5x). The publisher publishes one event at a time.
// redirect and forward: it is at the leader and has every member's
// address (leader first), so it moves to the next one, which redirects or
// forwards; forward-follower: it is at a follower and has only its
// address.
func BenchmarkRaftClientsFailover(b *testing.B) {
	for _, mode := range []string{"redirect", "forward", "forward-follower"} {
		b.Run(mode, func(b *testing.B) { benchFailover(b, mode, 0) })
	}
}

// BenchmarkFailoverElectionTimeout is BenchmarkRaftClientsFailover's
// forwarding publisher (every member's address) under election timeouts
// from the default down to what raft_election_timeout allows: the outage
// follows the timeout (a follower campaigns after between it and twice it).
func BenchmarkFailoverElectionTimeout(b *testing.B) {
	for _, et := range []time.Duration{time.Second, 500 * time.Millisecond, 300 * time.Millisecond} {
		b.Run(et.String(), func(b *testing.B) { benchFailover(b, "forward", et) })
	}
}

// benchFailover measures the publisher's outage when the leader stops;
// election is the cell's election timeout (0: the broker's default).
func benchFailover(b *testing.B, mode string, election time.Duration) {
	var outages []time.Duration
	for i := 0; i < b.N; i++ {
		func() {
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			clients := broker.RaftClientsForward
			if mode == "redirect" {
				clients = broker.RaftClientsRedirect
			}
			c := startRaftCell(b, ctx, 3, clients, func(o *broker.RaftOptions) {
				if election > 0 {
					o.TickInterval, o.ElectionTicks = election/10, 10 // as raft_election_timeout sets them
				}
			})
			addr := c.nodes[c.leader].ClientAddr()
			for j := 1; j < 3; j++ {
				addr += "," + c.nodes[(c.leader+j)%3].ClientAddr()
			}
			if mode == "forward-follower" {
				addr = c.nodes[(c.leader+1)%3].ClientAddr()
			}
			pub, err := client.Dial(ctx, addr, client.Options{ID: "fail", Pubend: "P1", Logger: quietLogger()})
			if err != nil {
				b.Fatal(err)
			}
			defer pub.Close()
			msgOf := func(i int) client.Message { return client.Message{Topic: "t", Props: map[string]any{"seq": int64(i)}} }
			for k := 1; k <= 20; k++ {
				if _, err := pub.Publish(ctx, msgOf(k)); err != nil {
					b.Fatal(err)
				}
			}
			stopped := time.Now()
			c.stops[c.leader]()
			if _, err := pub.Publish(ctx, msgOf(21)); err != nil {
				b.Fatal(err)
			}
			outages = append(outages, time.Since(stopped))
			for _, stop := range c.stops {
				stop() // before the next cell starts: two cells would share the cores
			}
		}()
	}
	slices.Sort(outages)
	b.ReportMetric(float64(outages[len(outages)/2].Milliseconds()), "outage_ms")
	b.ReportMetric(float64(outages[0].Milliseconds()), "min_ms")
	b.ReportMetric(float64(outages[len(outages)-1].Milliseconds()), "max_ms")
}
