package broker_test

import (
	"context"
	"testing"
	"time"

	"github.com/aerie-mq/aerie/client"
	"github.com/aerie-mq/aerie/internal/broker"
	"github.com/aerie-mq/aerie/internal/msg"
	"github.com/aerie-mq/aerie/internal/vfs"
)

// BenchmarkPublishAnywhere measures what publishing at a broker that does
// not host the pubend costs (docs/ARCHITECTURE.md "Publishing anywhere"):
// in the dev topology p1 (P1, P2) → b1 → s1, s2 on loopback TCP, one
// publisher of 256-byte events at p1 (the PHB), at b1 (one hop relayed)
// or at s1 (two hops). serial: b.N publishes one at a time, the
// publish→ack latency percentiles and the CPU of the whole process (every
// broker and the client) per event; window: 200 one at a time, then b.N
// with at most 1024 unacknowledged (acked msgs/s, as
// BenchmarkReplicationCost).
func BenchmarkPublishAnywhere(b *testing.B) {
	for _, mode := range []string{"serial", "window"} {
		for _, at := range []msg.NodeID{"p1", "b1", "s1"} {
			b.Run(mode+"/at="+string(at), func(b *testing.B) { benchPublishAt(b, at, mode == "window") })
		}
	}
}

func benchPublishAt(b *testing.B, at msg.NodeID, window bool) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	n := startNetWith(b, vfs.OS(), func(o map[msg.NodeID]broker.Options) {
		b1 := o["b1"]
		b1.Clients = freeAddr(b)
		o["b1"] = b1
	})
	pub := n.dial(at, client.Options{ID: "bench", Pubend: "P1"})
	if window {
		r := publishLoad(b, ctx, pub, nil)
		b.ReportMetric(float64(b.N)/r.elapsed.Seconds(), "msgs/s")
		b.ReportMetric(percentileUS(r.lat, 0.50), "p50_us")
		b.ReportMetric(percentileUS(r.lat, 0.99), "p99_us")
		b.ReportMetric(float64(r.cpu.Microseconds())/float64(b.N), "cpu_us/msg")
		return
	}
	payload := make([]byte, 256)
	props := map[string]any{}
	for i := 1; i <= 100; i++ { // the path warmed up
		if _, err := pub.Publish(ctx, client.Message{Topic: "bench.t", Payload: payload}); err != nil {
			b.Fatal(err)
		}
	}
	lat := make([]time.Duration, 0, b.N)
	b.SetBytes(int64(len(payload)))
	b.ResetTimer()
	cpu0 := cpuTime()
	for i := 1; i <= b.N; i++ {
		props["seq"] = int64(i)
		t0 := time.Now()
		if _, err := pub.Publish(ctx, client.Message{Topic: "bench.t", Props: props, Payload: payload}); err != nil {
			b.Fatal(err)
		}
		lat = append(lat, time.Since(t0))
	}
	cpu := cpuTime() - cpu0
	b.StopTimer()
	b.ReportMetric(percentileUS(lat, 0.50), "p50_us")
	b.ReportMetric(percentileUS(lat, 0.99), "p99_us")
	b.ReportMetric(float64(cpu.Microseconds())/float64(b.N), "cpu_us/msg")
}
