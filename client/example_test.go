package client_test

import (
	"context"
	"errors"
	"fmt"
	"log"
	"os"
	"os/signal"
	"sync"
	"sync/atomic"
	"time"

	"github.com/aerie-mq/aerie/client"
)

// Connect to a broker's client port (the `clients` address of a
// [[broker]] in the network config; `aerie dev` prints them), trying the
// next address of the list when one does not answer.
func ExampleDial() {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	c, err := client.Dial(ctx, "127.0.0.1:7201,127.0.0.1:7202", client.Options{ID: "orders-svc"})
	if err != nil {
		log.Fatal(err) // e.g. connect: 127.0.0.1:7201: dial tcp …: connection refused
	}
	defer c.Close()
	fmt.Println("connected as", c.ID())
}

// Publish returns once the event is durable at its pubend; a publisher
// that keeps its ID across restarts is never logged twice.
func ExampleClient_Publish() {
	ctx := context.Background()
	c, err := client.Dial(ctx, "127.0.0.1:7201", client.Options{ID: "orders-svc"})
	if err != nil {
		log.Fatal(err)
	}
	defer c.Close()
	ack, err := c.Publish(ctx, client.Message{
		Topic:   "orders.eu",
		Props:   map[string]any{"region": "EU", "qty": 3},
		Payload: []byte(`{"id":42}`),
	})
	if err != nil {
		log.Fatal(err)
	}
	fmt.Printf("durable at %s, tick %d\n", ack.Pubend, ack.Tick)
}

// PublishAsync keeps many publishes in flight; each outcome arrives on
// its own channel, in publish order.
func ExampleClient_PublishAsync() {
	c, err := client.Dial(context.Background(), "127.0.0.1:7201", client.Options{})
	if err != nil {
		log.Fatal(err)
	}
	defer c.Close()
	var results []<-chan client.Result
	for i := 1; i <= 100; i++ {
		ch, err := c.PublishAsync(client.Message{Topic: "sensors.t1", Props: map[string]any{"seq": i}})
		if err != nil {
			log.Fatal(err)
		}
		results = append(results, ch)
	}
	for _, ch := range results {
		if r := <-ch; r.Err != nil {
			log.Fatal(r.Err)
		}
	}
}

// Subscribe by topic pattern and selector at a subscriber's broker (an
// SHB's client port); events of each pubend arrive in publish order.
func ExampleClient_SubscribeSelector() {
	ctx := context.Background()
	c, err := client.Dial(ctx, "127.0.0.1:7203", client.Options{Resubscribe: true})
	if err != nil {
		log.Fatal(err)
	}
	defer c.Close()
	sub, err := c.SubscribeSelector(ctx, "orders.>", "region = 'EU' AND qty > 2")
	if err != nil {
		log.Fatal(err) // a bad pattern or selector is refused here, naming the fault
	}
	for ev := range sub.Events() {
		if ev.Gap != nil { // moved to another broker: events may have been missed
			continue
		}
		qty, _ := ev.Props.Int("qty")
		fmt.Println(ev.Topic, qty, string(ev.Payload))
	}
	log.Print(sub.Err())
}

// A durable subscription outlives its connection: save each event's
// checkpoint, acknowledge it, and resume from it — at any broker — to get
// everything published meanwhile, exactly once.
func ExampleClient_SubscribeDurable() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	c, err := client.Dial(ctx, "127.0.0.1:7203,127.0.0.1:7204", client.Options{})
	if err != nil {
		log.Fatal(err)
	}
	defer c.Close()
	saved, _ := os.ReadFile("audit.ckpt") // empty the first time: a new subscription
	sub, err := c.SubscribeDurable(ctx, client.Durable{Name: "audit", Pattern: "orders.>", From: string(saved)})
	if err != nil {
		log.Fatal(err)
	}
	for {
		select {
		case ev, ok := <-sub.Events():
			if !ok {
				log.Fatal(sub.Err())
			}
			if !ev.Progress && ev.Gap == nil {
				fmt.Println(ev.Topic, string(ev.Payload))
			}
			if err := os.WriteFile("audit.ckpt", []byte(ev.Checkpoint), 0o644); err != nil {
				log.Fatal(err)
			}
			sub.Ack(ev.Checkpoint) // what is saved may be released by the network
		case <-ctx.Done():
			return
		}
	}
}

// Join a consumer group: each matching event goes to one member of group
// "billing", wherever its members are connected. A broker that is not the
// group's home names it; join there. Acknowledge each event once handled:
// one not acknowledged when this member leaves goes to another member.
func ExampleClient_SubscribeGroup() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	g := client.Group{Name: "billing", Pattern: "orders.>"}
	c, err := client.Dial(ctx, "127.0.0.1:7203", client.Options{})
	if err != nil {
		log.Fatal(err)
	}
	sub, err := c.SubscribeGroup(ctx, g)
	var home *client.GroupHomeError
	if errors.As(err, &home) { // served elsewhere: join at its home
		c.Close()
		if c, err = client.Dial(ctx, home.Addr, client.Options{}); err != nil {
			log.Fatal(err)
		}
		sub, err = c.SubscribeGroup(ctx, g)
	}
	if err != nil {
		log.Fatal(err)
	}
	defer c.Close()
	for {
		select {
		case ev, ok := <-sub.Events():
			if !ok {
				log.Fatal(sub.Err())
			}
			if ev.Gap != nil {
				continue // events the network discarded (max_retain)
			}
			fmt.Println(ev.Topic, string(ev.Payload))
			sub.Ack(ev.Checkpoint) // this event is done: no other member gets it
		case <-ctx.Done():
			return
		}
	}
}

// The client refuses a topic no broker would take before sending it.
func ExampleCheckTopic() {
	for _, topic := range []string{"orders.eu", "orders..eu", "orders.>"} {
		err := client.CheckTopic(topic)
		fmt.Println(topic, errors.Is(err, client.ErrRejected))
	}
	// Output:
	// orders.eu false
	// orders..eu true
	// orders.> true
}

// A bad selector is refused with the column of the fault.
func ExampleCheckSelector() {
	fmt.Println(client.CheckSelector("region = 'EU' AND qty >"))
	// Output:
	// aerie: selector "region = 'EU' AND qty >": match: bad selector: column 24: expected an expression, found end of selector
}

// PublishFunc hands each outcome to a callback instead of a channel: for
// a publisher that counts acks rather than waiting on each.
func ExampleClient_PublishFunc() {
	c, err := client.Dial(context.Background(), "127.0.0.1:7201", client.Options{ID: "meter-7"})
	if err != nil {
		log.Fatal(err)
	}
	defer c.Close()
	var acked atomic.Int64
	var wg sync.WaitGroup
	for i := 1; i <= 1000; i++ {
		wg.Add(1)
		err := c.PublishFunc(client.Message{Topic: "meters.m7", Props: map[string]any{"kwh": 0.25 * float64(i)}}, func(r client.Result) {
			defer wg.Done()
			if r.Err == nil {
				acked.Add(1)
			}
		})
		if err != nil {
			log.Fatal(err) // refused before sending: nothing to wait for
		}
	}
	wg.Wait()
	fmt.Println(acked.Load(), "acknowledged")
}

// PublishNoAck sends at most once, as MQTT QoS 0: no ack is awaited and
// none is kept for a resend, so an event may be lost with its broker.
func ExampleClient_PublishNoAck() {
	ctx := context.Background()
	c, err := client.Dial(ctx, "127.0.0.1:7201", client.Options{})
	if err != nil {
		log.Fatal(err)
	}
	defer c.Close()
	if err := c.PublishNoAck(ctx, client.Message{Topic: "telemetry.cpu", Props: map[string]any{"load": 0.42}}); err != nil {
		log.Fatal(err)
	}
}

// Subscribe by topic pattern alone: "*" is one word, ">" the rest.
func ExampleClient_Subscribe() {
	ctx := context.Background()
	c, err := client.Dial(ctx, "127.0.0.1:7203", client.Options{})
	if err != nil {
		log.Fatal(err)
	}
	defer c.Close()
	sub, err := c.Subscribe(ctx, "orders.*.new")
	if err != nil {
		log.Fatal(err)
	}
	for ev := range sub.Events() {
		fmt.Printf("%s@%d %s %s\n", ev.Pubend, ev.Tick, ev.Topic, ev.Payload)
	}
}

// SubscribeTotalOrder merges every pubend's events in (tick, pubend)
// order: every subscriber of the network sees them in the same order.
func ExampleClient_SubscribeTotalOrder() {
	ctx := context.Background()
	c, err := client.Dial(ctx, "127.0.0.1:7203", client.Options{})
	if err != nil {
		log.Fatal(err)
	}
	defer c.Close()
	sub, err := c.SubscribeTotalOrder(ctx, "ledger.>", "")
	if err != nil {
		log.Fatal(err)
	}
	for ev := range sub.Events() {
		fmt.Println(ev.Tick, ev.Pubend, ev.Topic)
	}
}

// DeleteDurable removes a durable subscription while no subscriber is
// attached: its broker stops holding events for it, and the name may be
// taken again under another filter.
func ExampleClient_DeleteDurable() {
	ctx := context.Background()
	c, err := client.Dial(ctx, "127.0.0.1:7203", client.Options{})
	if err != nil {
		log.Fatal(err)
	}
	defer c.Close()
	if err := c.DeleteDurable(ctx, "audit"); err != nil {
		log.Fatal(err)
	}
}

// A pattern is checked as the broker would check it.
func ExampleCheckPattern() {
	for _, p := range []string{"orders.*.new", "orders.>", "orders.>.new"} {
		fmt.Println(p, client.CheckPattern(p) == nil)
	}
	// Output:
	// orders.*.new true
	// orders.> true
	// orders.>.new false
}

// PropsOf encodes properties as an event carries them; they read back
// typed.
func ExamplePropsOf() {
	p, err := client.PropsOf(map[string]any{"region": "EU", "qty": 3, "price": 9.5})
	if err != nil {
		log.Fatal(err)
	}
	qty, _ := p.Int("qty")
	region, _ := p.Str("region")
	fmt.Println(region, qty)
	// Output:
	// EU 3
}
