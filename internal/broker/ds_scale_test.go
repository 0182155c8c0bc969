package broker_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aerie-mq/aerie/client"
	"github.com/aerie-mq/aerie/internal/broker"
	"github.com/aerie-mq/aerie/internal/gd"
	"github.com/aerie-mq/aerie/internal/msg"
)

// The scalability experiment of Gryphon DS §5.1 (Figs. 3, 4), in one
// process: 800 events/s over pubends P1–P4 at PHB p1, durable subscribers
// each matching one pubend (200 events/s), hosted by p1 itself (one
// broker) or by 1, 2 or 4 SHBs under p1; with churn, each subscriber goes
// away for 5 s once every scaleChurnEvery and resumes from its checkpoint.
// The paper measured peak aggregate rates with one 6-way machine per
// broker; here every broker shares this process's cores, so the figures
// are the delivered rate at a fixed offered load and the process CPU per
// delivered event: if that stays flat as SHBs are added, each SHB on a
// machine of its own would add the same capacity (the paper's linear
// shape).
//
//	go test ./internal/broker -run '^$' -bench DSScalability -benchtime 1x
const (
	scaleSubsPerSHB = 10
	scaleRun        = 20 * time.Second
	scaleChurnEvery = 10 * time.Second
	scaleAway       = 5 * time.Second
)

var scalePubends = []msg.PubendID{"P1", "P2", "P3", "P4"}

func BenchmarkDSScalability(b *testing.B) {
	for _, shbs := range []int{0, 1, 2, 4} {
		for _, churn := range []bool{false, true} {
			name := fmt.Sprintf("shbs=%d/churn=%v", shbs, churn)
			b.Run(name, func(b *testing.B) { benchScale(b, shbs, churn) })
		}
	}
}

// scaleNet starts p1 and k SHBs under it (k = 0: p1 hosts the
// subscribers) and returns the client addresses subscribers use.
func scaleNet(b *testing.B, k int) (pubAddr string, subAddrs []string) {
	var shbs []msg.NodeID
	for i := 1; i <= k; i++ {
		shbs = append(shbs, msg.NodeID(fmt.Sprintf("s%d", i)))
	}
	var routes []gd.Route
	for _, p := range scalePubends {
		routes = append(routes, gd.Route{Pubend: p, Down: shbs})
	}
	p1 := broker.Options{ID: "p1", Routes: routes, GD: gd.DefaultConfig(), Listen: freeAddr(b), Clients: freeAddr(b),
		DataDir: b.TempDir(), Logger: quietLogger()}
	startScaleNode(b, p1)
	if k == 0 {
		return p1.Clients, []string{p1.Clients}
	}
	for _, id := range shbs {
		var rs []gd.Route
		for _, p := range scalePubends {
			rs = append(rs, gd.Route{Pubend: p, Up: "p1"})
		}
		o := broker.Options{ID: id, Routes: rs, GD: gd.DefaultConfig(), Clients: freeAddr(b), DataDir: b.TempDir(),
			Upstreams: map[msg.NodeID]string{"p1": p1.Listen}, Logger: quietLogger()}
		startScaleNode(b, o)
		subAddrs = append(subAddrs, o.Clients)
	}
	return p1.Clients, subAddrs
}

func startScaleNode(b *testing.B, o broker.Options) {
	_, stop := runNode(b, o)
	b.Cleanup(func() { stop() })
}

func benchScale(b *testing.B, shbs int, churn bool) {
	pubAddr, subAddrs := scaleNet(b, shbs)
	ctx, cancel := context.WithTimeout(context.Background(), scaleRun+time.Minute)
	defer cancel()
	var delivered atomic.Int64
	stop := make(chan struct{})
	var wg sync.WaitGroup
	rng := rand.New(rand.NewPCG(1, 2))
	ready := make(chan struct{}, len(subAddrs)*scaleSubsPerSHB)
	for i, addr := range subAddrs {
		for j := range scaleSubsPerSHB {
			name := fmt.Sprintf("d%d-%d", i, j)
			pe := scalePubends[j%len(scalePubends)]
			phase := time.Duration(rng.Int64N(int64(scaleChurnEvery)))
			wg.Add(1)
			go func() {
				defer wg.Done()
				runScaleSub(b, ctx, addr, name, "ds."+string(pe), churn, phase, ready, stop, &delivered)
			}()
		}
	}
	pubs := make([]*client.Client, len(scalePubends))
	for i, p := range scalePubends {
		c, err := client.Dial(ctx, pubAddr, client.Options{ID: "pub-" + string(p), Pubend: string(p), Logger: quietLogger()})
		if err != nil {
			b.Fatal(err)
		}
		defer c.Close()
		pubs[i] = c
	}
	for range cap(ready) {
		select {
		case <-ready:
		case <-ctx.Done():
			b.Fatal("subscribers not in force")
		}
	}
	b.ResetTimer()
	cpu0, t0 := processCPU(), time.Now()
	publishAtRate(b, ctx, pubs, scaleRun)
	got, cpu, wall := delivered.Load(), processCPU()-cpu0, time.Since(t0)
	close(stop)
	wg.Wait()
	b.StopTimer()
	b.ReportMetric(float64(got)/wall.Seconds(), "deliveries/s")
	b.ReportMetric(float64(len(subAddrs)*scaleSubsPerSHB*200), "offered/s")
	b.ReportMetric(float64(cpu.Nanoseconds())/float64(max(got, 1)), "cpu-ns/delivery")
}

// publishAtRate publishes 200 events/s (250-byte payloads) on each
// publisher's pubend for d, in 20 ms steps of 4 events each.
func publishAtRate(b *testing.B, ctx context.Context, pubs []*client.Client, d time.Duration) {
	t := time.NewTicker(20 * time.Millisecond)
	defer t.Stop()
	end := time.Now().Add(d)
	var pending []<-chan client.Result
	for time.Now().Before(end) {
		for i, c := range pubs {
			for range 4 {
				ch, err := c.PublishAsync(client.Message{Topic: "ds." + string(scalePubends[i]), Payload: make([]byte, 250)})
				if err != nil {
					b.Fatal(err)
				}
				pending = append(pending, ch)
			}
		}
		select {
		case <-t.C:
		case <-ctx.Done():
			b.Fatal(ctx.Err())
		}
	}
	for _, ch := range pending {
		if r := <-ch; r.Err != nil {
			b.Fatal(r.Err)
		}
	}
}

// runScaleSub holds durable subscription name until stop, counting its
// events; with churn it goes away for scaleAway every scaleChurnEvery
// (first after phase) and resumes from its last checkpoint.
func runScaleSub(b *testing.B, ctx context.Context, addr, name, pattern string, churn bool, phase time.Duration, ready chan<- struct{}, stop <-chan struct{}, delivered *atomic.Int64) {
	checkpoint := ""
	next := time.Now().Add(phase)
	for {
		c, err := client.Dial(ctx, addr, client.Options{ID: name, Logger: quietLogger()})
		if err != nil {
			b.Error(err)
			return
		}
		sub, err := c.SubscribeDurable(ctx, client.Durable{Name: name, Pattern: pattern, From: checkpoint})
		if err != nil {
			c.Close()
			b.Error(err)
			return
		}
		if checkpoint == "" {
			ready <- struct{}{}
		}
		var leave <-chan time.Time
		if churn {
			leave = time.After(time.Until(next))
		}
		checkpoint = consumeUntil(sub, stop, leave, delivered)
		c.Close()
		select {
		case <-stop:
			return
		default:
		}
		next = next.Add(scaleChurnEvery)
		select {
		case <-stop:
			return
		case <-time.After(scaleAway):
		}
	}
}

// consumeUntil counts events until stop or leave, acknowledging every 100,
// and returns the last checkpoint.
func consumeUntil(sub *client.Subscription, stop <-chan struct{}, leave <-chan time.Time, delivered *atomic.Int64) string {
	cp, n := "", 0
	for {
		select {
		case ev, ok := <-sub.Events():
			if !ok {
				return cp
			}
			cp = ev.Checkpoint
			if ev.Gap != nil || ev.Progress {
				continue
			}
			delivered.Add(1)
			if n++; n%100 == 0 {
				_ = sub.Ack(cp) // a lost ack only delays release
			}
		case <-stop:
			return cp
		case <-leave:
			return cp
		}
	}
}
