package broker_test

import (
	"context"
	"sort"
	"testing"
	"time"

	"github.com/aerie-mq/aerie/client"
	"github.com/aerie-mq/aerie/internal/broker"
	"github.com/aerie-mq/aerie/internal/faultnet"
	"github.com/aerie-mq/aerie/internal/msg"
	"github.com/aerie-mq/aerie/internal/vfs"
)

// BenchmarkPublishDeliver: 256-byte events from one publisher through
// PHB → IB → SHB over loopback TCP, each fsynced before its ack (group
// commit), to one subscriber. Reports delivered events per second and the
// publish→deliver latency percentiles, with at most `window` publishes
// unacknowledged.
func BenchmarkPublishDeliver(b *testing.B) {
	n := startNet(b, vfs.OS())
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	sub, err := n.dial("s1", client.Options{}).Subscribe(ctx, ">")
	if err != nil {
		b.Fatal(err)
	}
	pub := n.dial("p1", client.Options{ID: "bench", Pubend: "P1"})
	payload := make([]byte, 256)
	sent := make([]time.Time, b.N+1)
	lat := make([]time.Duration, 0, b.N)
	done := make(chan struct{})
	go func() {
		defer close(done)
		for ev := range sub.Events() {
			seq, _ := ev.Props.Int("seq")
			lat = append(lat, time.Since(sent[seq]))
			if len(lat) == b.N {
				return
			}
		}
	}()
	const window = 1024
	inflight := make(chan (<-chan client.Result), window)
	b.SetBytes(int64(len(payload)))
	b.ResetTimer()
	began := time.Now()
	go func() {
		for ch := range inflight {
			<-ch
		}
	}()
	for i := 1; i <= b.N; i++ {
		sent[i] = time.Now()
		ch, err := pub.PublishAsync(client.Message{Topic: "bench.t", Props: map[string]any{"seq": int64(i)}, Payload: payload})
		if err != nil {
			b.Fatal(err)
		}
		inflight <- ch
	}
	<-done
	el := time.Since(began)
	close(inflight)
	b.StopTimer()
	sort.Slice(lat, func(i, j int) bool { return lat[i] < lat[j] })
	pct := func(p float64) float64 { return float64(lat[int(p*float64(len(lat)-1))].Microseconds()) }
	b.ReportMetric(float64(b.N)/el.Seconds(), "msgs/s")
	b.ReportMetric(pct(0.50), "p50_us")
	b.ReportMetric(pct(0.99), "p99_us")
	b.ReportMetric(pct(0.999), "p999_us")
}

// BenchmarkFilteredLinkBytes measures what filtering inside the network
// saves on the IB→SHB links (issue 4). s1's subscriber selects 1 event in
// 10 (`k < 10`, k uniform in 0..99); s2's takes every event. Both SHBs
// reach b1 through byte-counting proxies, and the same events flow through
// both links in one run, so the ratio of bytes b1→s2 to bytes b1→s1 is what
// the selector saves on the wire (knowledge, silence and control included).
// Deliveries are checked exactly once and in order on both. Run with
// -benchtime 1x: each iteration publishes `events` events.
func BenchmarkFilteredLinkBytes(b *testing.B) {
	const events = 5000
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	proxies := map[msg.NodeID]*faultnet.Proxy{}
	n := startNetWith(b, vfs.OS(), func(opts map[msg.NodeID]broker.Options) {
		for _, id := range []msg.NodeID{"s1", "s2"} {
			p, err := faultnet.Listen(ctx, opts["b1"].Listen)
			if err != nil {
				b.Fatal(err)
			}
			proxies[id] = p
			o := opts[id]
			o.Upstreams = map[msg.NodeID]string{"b1": p.Addr()}
			opts[id] = o
		}
	})
	sel, err := n.dial("s1", client.Options{}).SubscribeSelector(ctx, ">", "k < 10")
	if err != nil {
		b.Fatal(err)
	}
	all, err := n.dial("s2", client.Options{}).Subscribe(ctx, ">")
	if err != nil {
		b.Fatal(err)
	}
	cSel, cAll := collect(b, sel), collect(b, all)
	pub := n.dial("p1", client.Options{ID: "bench-sel", Pubend: "P1"})
	payload := make([]byte, 256)
	wantSel, wantAll := map[int64]bool{}, map[int64]bool{}
	_, before1 := proxies["s1"].Forwarded()
	_, before2 := proxies["s2"].Forwarded()
	b.ResetTimer()
	seq := int64(0)
	for it := 0; it < b.N; it++ {
		var chans []<-chan client.Result
		for i := 0; i < events; i++ {
			seq++
			k := (seq * 37) % 100 // uniform over 0..99, deterministic
			ch, err := pub.PublishAsync(client.Message{Topic: "bench.t", Props: map[string]any{"seq": seq, "k": k}, Payload: payload})
			if err != nil {
				b.Fatal(err)
			}
			chans = append(chans, ch)
			wantAll[seq] = true
			if k < 10 {
				wantSel[seq] = true
			}
		}
		for _, ch := range chans {
			if r := <-ch; r.Err != nil {
				b.Fatal(r.Err)
			}
		}
		cSel.waitFor(b, len(wantSel), time.Minute)
		cAll.waitFor(b, len(wantAll), time.Minute)
	}
	b.StopTimer()
	cSel.check(b, wantSel)
	cAll.check(b, wantAll)
	_, after1 := proxies["s1"].Forwarded()
	_, after2 := proxies["s2"].Forwarded()
	selBytes, allBytes := float64(after1-before1), float64(after2-before2)
	b.ReportMetric(selBytes/float64(seq), "B/event_selective")
	b.ReportMetric(allBytes/float64(seq), "B/event_unfiltered")
	b.ReportMetric(allBytes/selBytes, "x_saved")
}
