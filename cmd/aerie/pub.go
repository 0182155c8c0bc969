package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/aerie-mq/aerie/client"
)

type propFlags []string

func (p *propFlags) String() string     { return strings.Join(*p, ",") }
func (p *propFlags) Set(v string) error { *p = append(*p, v); return nil }

// parseProp reads k=v where v is a JSON literal when it parses as one
// (150 integer, 150.5 float, true, "150" string), else a plain string
// (DESIGN.md §6).
func parseProp(kv string) (string, any, error) {
	k, v, ok := strings.Cut(kv, "=")
	if !ok || k == "" {
		return "", nil, fmt.Errorf("--prop %q: want name=value", kv)
	}
	dec := json.NewDecoder(strings.NewReader(v))
	dec.UseNumber()
	var x any
	if err := dec.Decode(&x); err == nil && !dec.More() {
		switch t := x.(type) {
		case json.Number:
			if i, err := t.Int64(); err == nil && !strings.ContainsAny(v, ".eE") {
				return k, i, nil
			}
			f, err := t.Float64()
			if err == nil {
				return k, f, nil
			}
		case bool, string:
			return k, t, nil
		}
	}
	return k, v, nil
}

// runPub implements `aerie pub`.
func runPub(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("aerie pub", flag.ContinueOnError)
	fs.SetOutput(stderr)
	addr := fs.String("connect", "127.0.0.1:7201", "broker client addresses, comma-separated: the first that answers is used, the next when it fails (unacknowledged publishes go again to the same pubend, never to another)")
	topic := fs.String("topic", "demo", "topic")
	var props propFlags
	fs.Var(&props, "prop", "property name=value (repeatable); value is a JSON literal when it parses as one, else a string")
	count := fs.Int("count", 1, "events to publish")
	rate := fs.Float64("rate", 0, "events per second (0: as fast as acks allow)")
	size := fs.Int("size", 0, "payload bytes")
	id := fs.String("id", "", "client id (publishes are deduplicated per id and sequence number)")
	pubend := fs.String("pubend", "", "pubend to publish to (default: a hash of the id)")
	timeout := fs.Duration("timeout", time.Minute, "give up when not all events are acked this long after the last is sent")
	sec := addClientSecurity(fs)
	if err := fs.Parse(args); err != nil {
		if err == flag.ErrHelp {
			return 0
		}
		return 2
	}
	base := map[string]any{}
	for _, kv := range props {
		k, v, err := parseProp(kv)
		if err != nil {
			fmt.Fprintf(stderr, "aerie pub: %v\n", err)
			return 2
		}
		base[k] = v
	}
	dctx, dcancel := context.WithTimeout(context.Background(), *timeout)
	defer dcancel()
	copts := client.Options{ID: *id, Pubend: *pubend, RetryDial: true}
	if err := sec.apply(&copts, stderr); err != nil {
		fmt.Fprintf(stderr, "aerie pub: %v\n", err)
		return 2
	}
	c, err := client.Dial(dctx, *addr, copts)
	if err != nil {
		fmt.Fprintf(stderr, "aerie pub: %v\n", err)
		return 1
	}
	defer c.Close()
	payload := make([]byte, *size)
	for i := range payload {
		payload[i] = 'a' + byte(i%26)
	}
	began := time.Now()
	results := make([]<-chan client.Result, 0, *count)
	for i := 1; i <= *count; i++ {
		if *rate > 0 {
			if d := time.Until(began.Add(time.Duration(float64(i-1) / *rate * float64(time.Second)))); d > 0 {
				time.Sleep(d) // pacing the publish rate, not synchronisation
			}
		}
		p := make(map[string]any, len(base)+1)
		for k, v := range base {
			p[k] = v
		}
		p["seq"] = int64(i)
		ch, err := c.PublishAsync(client.Message{Topic: *topic, Props: p, Payload: payload})
		if err != nil {
			fmt.Fprintf(stderr, "aerie pub: %v\n", err)
			return 1
		}
		results = append(results, ch)
		if i%10000 == 0 {
			fmt.Fprintf(stderr, "pub: %d sent\n", i)
		}
	}
	acked, dups := 0, 0
	var last client.Ack
	ctx, cancel := context.WithTimeout(context.Background(), *timeout) // from the last publish on
	defer cancel()
	for _, ch := range results {
		select {
		case r := <-ch:
			if r.Err != nil {
				fmt.Fprintf(stderr, "aerie pub: %v\n", r.Err)
				continue
			}
			acked++
			if r.Ack.Duplicate {
				dups++
			}
			last = r.Ack
		case <-ctx.Done():
			fmt.Fprintf(stdout, "published %d acked %d (timed out after %v)\n", *count, acked, *timeout)
			return 1
		}
	}
	el := time.Since(began)
	fmt.Fprintf(stdout, "published %d acked %d duplicates %d pubend %s last_tick %d in %v (%.0f/s)\n", *count, acked, dups,
		last.Pubend, last.Tick, el.Round(time.Millisecond), float64(acked)/el.Seconds())
	if dups > 0 {
		fmt.Fprintf(stderr, "pub: %d of %d were already logged under client id %q (not logged again)\n", dups, acked, *id)
	}
	if acked != *count {
		return 1
	}
	return 0
}
