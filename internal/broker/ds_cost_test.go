package broker_test

import (
	"context"
	"fmt"
	"syscall"
	"testing"
	"time"

	"github.com/aerie-mq/aerie/client"
	"github.com/aerie-mq/aerie/internal/broker"
	"github.com/aerie-mq/aerie/internal/msg"
)

// Durable vs non-durable delivery cost at the SHB (issue 11, Done means;
// Gryphon DS §5). The same four-broker network, load and subscriber count
// in both sub-benchmarks of one `go test -bench` run; only the kind of
// subscription differs. The PHB and IB do the same work either way, so the
// difference in process CPU per delivered event is what durability costs
// at the SHB (durable subscription state, checkpoints, acknowledgements
// and the release protocol) plus the clients' acknowledgements.
//
//	go test ./internal/broker -run '^$' -bench DurableDeliveryCost -benchtime 20000x
const costSubscribers = 20

// BenchmarkDurableDeliveryCost: b.N events published to t.x at p1, each
// delivered to costSubscribers subscribers at s1; reports process CPU per
// delivered event.
func BenchmarkDurableDeliveryCost(b *testing.B) {
	for _, durable := range []bool{false, true} {
		name := "non-durable"
		if durable {
			name = "durable"
		}
		b.Run(name, func(b *testing.B) { benchDelivery(b, durable) })
	}
}

func benchDelivery(b *testing.B, durable bool) {
	n := startNetWith(b, nil, func(o map[msg.NodeID]broker.Options) {
		s := o["s1"]
		s.DataDir = b.TempDir()
		o["s1"] = s
	})
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	done := make(chan int, costSubscribers)
	for i := range costSubscribers {
		c := n.dial("s1", client.Options{ID: fmt.Sprintf("sub%d", i)})
		var sub *client.Subscription
		var err error
		if durable {
			sub, err = c.SubscribeDurable(ctx, client.Durable{Name: fmt.Sprintf("d%d", i), Pattern: "t.>"})
		} else {
			sub, err = c.Subscribe(ctx, "t.>")
		}
		if err != nil {
			b.Fatal(err)
		}
		go consume(sub, b.N, durable, done)
	}
	pub := n.dial("p1", client.Options{ID: "pub", Pubend: "P1"})
	b.ResetTimer()
	cpu0 := processCPU()
	publishWindowed(b, pub, b.N)
	for range costSubscribers {
		select {
		case got := <-done:
			if got != b.N {
				b.Fatalf("a subscriber got %d of %d events", got, b.N)
			}
		case <-ctx.Done():
			b.Fatal("subscribers did not get every event in 5 minutes")
		}
	}
	cpu := processCPU() - cpu0
	b.StopTimer()
	b.ReportMetric(float64(cpu.Nanoseconds())/float64(b.N*costSubscribers), "cpu-ns/delivery")
}

// consume counts events until want, acknowledging a durable subscription's
// checkpoint every 100 events (the paper's SHB updated released(s) every
// 250 ms).
func consume(sub *client.Subscription, want int, durable bool, done chan<- int) {
	got := 0
	for ev := range sub.Events() {
		if ev.Gap != nil || ev.Progress {
			continue
		}
		got++
		if durable && got%100 == 0 {
			_ = sub.Ack(ev.Checkpoint) // a lost ack only delays release
		}
		if got == want {
			break
		}
	}
	done <- got
}

// publishWindowed publishes k 250-byte events with at most 256 unacked.
func publishWindowed(b *testing.B, c *client.Client, k int) {
	window := make(chan (<-chan client.Result), 256)
	errs := make(chan error, 1)
	go func() {
		for ch := range window {
			if r := <-ch; r.Err != nil {
				select {
				case errs <- r.Err:
				default:
				}
			}
		}
		close(errs)
	}()
	for range k {
		ch, err := c.PublishAsync(client.Message{Topic: "t.x", Payload: make([]byte, 250)})
		if err != nil {
			b.Fatal(err)
		}
		window <- ch
	}
	close(window)
	if err := <-errs; err != nil {
		b.Fatal(err)
	}
}

// processCPU is the user and system CPU time of this process so far.
func processCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
