package main

import (
	"bufio"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"time"

	"github.com/aerie-mq/aerie/client"
)

// runSub implements `aerie sub`.
func runSub(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("aerie sub", flag.ContinueOnError)
	fs.SetOutput(stderr)
	addr := fs.String("connect", "127.0.0.1:7203", "broker client addresses, comma-separated: the first that answers is used, and the subscription moves to the next when its broker fails")
	topic := fs.String("topic", ">", "topic pattern: words separated by dots, * one word, > the rest")
	selector := fs.String("selector", "", "JMS SQL-92 selector over properties, e.g. \"region = 'EU' AND qty > 3\" (docs/SELECTORS.md)")
	count := fs.Int("count", 0, "exit 0 after this many events (0: run until interrupted)")
	timeout := fs.Duration("timeout", 0, "exit 1 if --count events have not arrived this long after subscribing (0: no limit)")
	asJSON := fs.Bool("json", false, "one JSON object per event on stdout")
	durable := fs.String("durable", "", "durable subscription name: kept by its broker while this subscriber is away, resumed from its checkpoint at any broker")
	checkpoint := fs.String("checkpoint", "", "with --durable: file holding the checkpoint token, read at start and saved after every line written and at a graceful stop")
	from := fs.String("from", "", "with --durable: checkpoint token to resume from (overrides --checkpoint's)")
	total := fs.Bool("total-order", false, "uniform total order across pubends: every pubend's events merged in (tick, pubend) order, the same at every broker (not with --durable; adds about a round trip to the furthest PHB)")
	sec := addClientSecurity(fs)
	if err := fs.Parse(args); err != nil {
		if err == flag.ErrHelp {
			return 0
		}
		return 2
	}
	if *total && *durable != "" {
		fmt.Fprintln(stderr, "aerie sub: --total-order is not offered for durable subscriptions")
		return 2
	}
	if *durable != "" {
		return runDurableSub(durableArgs{addr: *addr, topic: *topic, selector: *selector, count: *count, timeout: *timeout,
			json: *asJSON, name: *durable, checkpoint: *checkpoint, from: *from, sec: sec}, stdout, stderr)
	}
	if *checkpoint != "" || *from != "" {
		fmt.Fprintln(stderr, "aerie sub: --checkpoint and --from need --durable NAME")
		return 2
	}
	ctx := context.Background()
	if *timeout > 0 { // a subscription that never comes into force also times out
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, *timeout)
		defer cancel()
	}
	copts := client.Options{RetryDial: *timeout > 0, Resubscribe: true}
	if err := sec.apply(&copts, stderr); err != nil {
		fmt.Fprintf(stderr, "aerie sub: %v\n", err)
		return 2
	}
	c, err := client.Dial(ctx, *addr, copts)
	if err != nil {
		fmt.Fprintf(stderr, "aerie sub: %v\n", err)
		return 1
	}
	defer c.Close()
	subscribe := c.SubscribeSelector
	if *total {
		subscribe = c.SubscribeTotalOrder
	}
	sub, err := subscribe(ctx, *topic, *selector)
	if err != nil {
		fmt.Fprintf(stderr, "aerie sub: %v\n", err)
		return 1
	}
	fmt.Fprintf(stderr, "subscribed %s\n", sub.TokenString())
	out := bufio.NewWriter(stdout)
	defer out.Flush()
	var deadline <-chan time.Time
	if *timeout > 0 {
		t := time.NewTimer(*timeout)
		defer t.Stop()
		deadline = t.C
	}
	got := 0
	for {
		select {
		case ev, ok := <-sub.Events():
			if !ok {
				out.Flush()
				fmt.Fprintf(stderr, "aerie sub: subscription ended after %d events: %v\n", got, sub.Err())
				return 1
			}
			if ev.Gap != nil {
				// The subscription moved to another broker (or reconnected)
				// and starts again beyond what it had delivered.
				fmt.Fprintf(stderr, "aerie sub: resubscribed; events of %s in ticks (%d, %d] may have been missed\n", ev.Gap.Pubend, ev.Gap.From, ev.Gap.To)
				writeGap(out, *ev.Gap, *asJSON)
				continue
			}
			got++
			writeEvent(out, ev, *asJSON)
			if *count > 0 && got >= *count {
				return 0
			}
		case <-deadline:
			out.Flush()
			fmt.Fprintf(stderr, "aerie sub: %d of %d events within %v\n", got, *count, *timeout)
			return 1
		}
	}
}

// writeGap writes a gap notice: with --json as
// {"gap":{"pubend":"P1","from":T0,"to":T1}} (docs/GUIDE.md "Output for scripts").
func writeGap(w *bufio.Writer, g client.Gap, asJSON bool) {
	if asJSON {
		type gap struct {
			Pubend string `json:"pubend"`
			From   uint64 `json:"from"`
			To     uint64 `json:"to"`
		}
		b, _ := json.Marshal(struct {
			Gap gap `json:"gap"`
		}{gap{g.Pubend, g.From, g.To}})
		w.Write(b)
		w.WriteByte('\n')
	} else {
		fmt.Fprintf(w, "%s gap (%d,%d]\n", g.Pubend, g.From, g.To)
	}
	w.Flush()
}

func writeEvent(w *bufio.Writer, ev client.Event, asJSON bool) {
	recv := time.Now()
	if asJSON {
		b, _ := json.Marshal(struct {
			Pubend  string         `json:"pubend"`
			Tick    uint64         `json:"tick"`
			Topic   string         `json:"topic"`
			Props   map[string]any `json:"props"`
			Payload string         `json:"payload"`
			PubMs   int64          `json:"pub_ms"`
			RecvMs  int64          `json:"recv_ms"`
		}{ev.Pubend, ev.Tick, ev.Topic, ev.Props.Map(), string(ev.Payload), ev.PubTime.UnixMilli(), recv.UnixMilli()})
		w.Write(b)
		w.WriteByte('\n')
	} else {
		fmt.Fprintf(w, "%s@%d %s %v %q\n", ev.Pubend, ev.Tick, ev.Topic, ev.Props.Map(), ev.Payload)
	}
	w.Flush() // written as it is delivered (docs/GUIDE.md "Output for scripts")
}
