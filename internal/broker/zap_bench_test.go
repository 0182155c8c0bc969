package broker_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/aerie-mq/aerie/client"
	"github.com/aerie-mq/aerie/internal/lab/zapexp"
	"github.com/aerie-mq/aerie/internal/zap"
)

// BenchmarkZapViewers is P2S's evaluation (DEBS 2014 §4, Figs. 6 and 7,
// Tables 1 and 2) on aerie: the ZapViewers workload (set-top boxes'
// channel changes and status records, under 60 bytes each) published by
// 1 to 24 publishers into a PHB of 1, 3, 5 or 7 replicas (one Raft group),
// delivered through the SHB below it to one subscriber.
//
//   - e2e_p50_us, e2e_p99_us: publish → delivery at the subscriber (P2S
//     §4.2's end-to-end latency), every publisher offering 100 events/s;
//   - msgs/s: acknowledged events per second with every publisher keeping
//     up to 256 publishes unacknowledged (P2S §4.3's broker throughput,
//     pipelined as P2S pipelines α = 10 Paxos instances).
//
// Every member, the SHB and the clients share this machine's CPUs and
// disk (P2S gave each replica its own machine): compare the ratios between
// replication degrees, not the absolute figures. Run with -benchtime 1x.
//
// With AERIE_ZAP_OUT=FILE it also writes the points it ran to FILE as
// CSV (internal/lab/zapexp), from which `aerie experiment --case zap-plots
// --from FILE` draws P2S's Figs. 6 and 7.
func BenchmarkZapViewers(b *testing.B) {
	var pts []zapexp.Point
	for _, r := range []int{1, 3, 5, 7} {
		for _, p := range []int{1, 3, 6, 12, 24} {
			var pt *zapexp.Point
			b.Run(fmt.Sprintf("R%d/P%d", r, p), func(b *testing.B) { pt = benchZap(b, r, p) })
			if pt != nil { // nil: filtered out by -bench, or failed
				pts = append(pts, *pt)
			}
		}
	}
	if path := os.Getenv("AERIE_ZAP_OUT"); path != "" {
		if err := writeZapCSV(path, pts); err != nil {
			b.Fatal(err)
		}
		b.Logf("AERIE_ZAP_OUT: %d points in %s", len(pts), path)
	}
}

// writeZapCSV writes the benchmark's points to path.
func writeZapCSV(path string, pts []zapexp.Point) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	if err := zapexp.WriteCSV(f, pts); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

// benchZap runs one point and returns its figures (the last run's, when
// the benchmark runs it more than once).
func benchZap(b *testing.B, replicas, publishers int) *zapexp.Point {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	c := startRaftCell(b, ctx, replicas, "")
	shb := c.nodes[len(c.nodes)-1]
	leader := c.nodes[c.leader].ClientAddr()
	sub, err := client.Dial(ctx, shb.ClientAddr(), client.Options{ID: "viewers", Logger: quietLogger()})
	if err != nil {
		b.Fatal(err)
	}
	defer sub.Close()
	s, err := sub.Subscribe(ctx, "zap.>")
	if err != nil {
		b.Fatal(err)
	}
	pubs := make([]*client.Client, publishers)
	for i := range pubs {
		if pubs[i], err = client.Dial(ctx, leader, client.Options{ID: fmt.Sprintf("stb-%d", i), Pubend: "P1", Logger: quietLogger()}); err != nil {
			b.Fatal(err)
		}
		defer pubs[i].Close()
	}
	gen, err := zap.NewGenerator(zap.Config{Boxes: 10 * publishers, Publishers: publishers, Channels: 100, Start: time.Unix(0, 0)}, rand.NewPCG(1, 2))
	if err != nil {
		b.Fatal(err)
	}
	events := make([]zap.Event, 4096)
	for i := range events {
		events[i] = gen.Next().Event
	}
	b.ResetTimer()
	lat := zapLatency(b, ctx, pubs, s, events, 2*time.Second)
	sub.Close() // the throughput phase is acked, not read
	rate := zapThroughput(b, ctx, pubs, events, 2*time.Second)
	b.StopTimer()
	b.ReportMetric(percentileUS(lat, 0.50), "e2e_p50_us")
	b.ReportMetric(percentileUS(lat, 0.99), "e2e_p99_us")
	b.ReportMetric(rate, "msgs/s")
	return &zapexp.Point{Source: zapexp.SourceAerie, Replicas: replicas, Publishers: publishers,
		P50: percentileUS(lat, 0.50) / 1000, P99: percentileUS(lat, 0.99) / 1000, MsgsPerSec: rate, VsR1: zapexp.NaN}
}

// zapMessage is event i of the workload, stamped with its send time.
func zapMessage(events []zap.Event, i int) client.Message {
	e := events[i%len(events)]
	return client.Message{Topic: e.Topic(), Props: map[string]any{"sent": time.Now().UnixNano()}, Payload: e.Encode()}
}

// zapLatency: every publisher offers 100 events/s for d; the subscriber
// measures publish → delivery of each.
func zapLatency(b *testing.B, ctx context.Context, pubs []*client.Client, s *client.Subscription, events []zap.Event, d time.Duration) []time.Duration {
	const rate = 100
	want := len(pubs) * int(d.Seconds()*rate)
	var wg sync.WaitGroup
	for k, p := range pubs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			tk := time.NewTicker(time.Second / rate)
			defer tk.Stop()
			for i := 0; i < int(d.Seconds()*rate); i++ {
				<-tk.C
				if _, err := p.PublishAsync(zapMessage(events, k+i*len(pubs))); err != nil {
					b.Error(err)
					return
				}
			}
		}()
	}
	lat := make([]time.Duration, 0, want)
	for len(lat) < want {
		select {
		case ev, ok := <-s.Events():
			if !ok {
				b.Fatalf("subscription ended: %v", s.Err())
			}
			if sent, ok := ev.Props.Int("sent"); ok {
				lat = append(lat, time.Since(time.Unix(0, sent)))
			}
		case <-ctx.Done():
			b.Fatalf("%d of %d events delivered", len(lat), want)
		}
	}
	wg.Wait()
	return lat
}

// zapThroughput: every publisher keeps up to 256 publishes unacknowledged
// for d; acknowledged events per second.
func zapThroughput(b *testing.B, ctx context.Context, pubs []*client.Client, events []zap.Event, d time.Duration) float64 {
	const window = 256
	start := time.Now()
	var mu sync.Mutex
	acked := 0
	var wg sync.WaitGroup
	for k, p := range pubs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			inflight := make(chan (<-chan client.Result), window)
			done := make(chan struct{})
			go func() {
				defer close(done)
				for ch := range inflight {
					if r := <-ch; r.Err != nil {
						b.Error(r.Err)
						return
					}
					mu.Lock()
					acked++
					mu.Unlock()
				}
			}()
			for i := 0; time.Since(start) < d && ctx.Err() == nil; i++ {
				ch, err := p.PublishAsync(zapMessage(events, k+i*len(pubs)))
				if err != nil {
					b.Error(err)
					break
				}
				inflight <- ch
			}
			close(inflight)
			<-done
		}()
	}
	wg.Wait()
	return float64(acked) / time.Since(start).Seconds()
}
