package client_test

import (
	"context"
	"errors"
	"fmt"
	"log"
	"os"
	"os/signal"
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
