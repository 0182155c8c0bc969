package broker_test

import (
	"context"
	"sort"
	"testing"
	"time"

	"github.com/aerie-mq/aerie/client"
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
			seq := ev.Props["seq"].(int64)
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
