package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/aerie-mq/aerie/client"
)

type propFlags []string

func (p *propFlags) String() string     { return strings.Join(*p, ",") }
func (p *propFlags) Set(v string) error { *p = append(*p, v); return nil }

// parseProp reads k=v where v is a JSON literal when it parses as one
// (150 integer, 150.5 float, true, "150" string), else a plain string
// (docs/GUIDE.md).
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
	// Acks are read in publish order by a goroutine of their own, so that
	// progress (sent, acked, the ack rate) can be told while publishing: a
	// pubend under congestion control acks more slowly (Gryphon CC §4),
	// and this is where a publisher sees it.
	acks := newAckReader(*count, *timeout)
	go acks.run()
	stopProgress := acks.progress(stderr, time.Second)
	defer stopProgress()
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
			acks.allSent() // the reader ends with what is in flight
			fmt.Fprintf(stderr, "aerie pub: %v\n", err)
			return 1
		}
		acks.add(ch)
	}
	acks.allSent()
	<-acks.done
	stopProgress()
	acked, dups, last := int(acks.acked.Load()), acks.dups, acks.last
	for _, err := range acks.errs {
		fmt.Fprintf(stderr, "aerie pub: %v\n", err)
	}
	if acks.timedOut {
		fmt.Fprintf(stdout, "published %d acked %d (timed out after %v)\n", *count, acked, *timeout)
		return 1
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

// ackReader reads one publisher's acks in publish order while it publishes,
// and reports progress.
type ackReader struct {
	pending chan (<-chan client.Result)
	sentAll chan struct{}
	done    chan struct{}
	timeout time.Duration

	sent, acked atomic.Int64
	// Set by run, read after done.
	dups     int
	last     client.Ack
	errs     []error
	timedOut bool
}

func newAckReader(count int, timeout time.Duration) *ackReader {
	// Room for every publish the client can have unacknowledged
	// (client.Options.MaxInflight, 10 000) and more, so that this queue is
	// never what holds the publisher back.
	return &ackReader{pending: make(chan (<-chan client.Result), min(max(count, 1), 1<<15)),
		sentAll: make(chan struct{}), done: make(chan struct{}), timeout: timeout}
}

func (a *ackReader) add(ch <-chan client.Result) {
	a.sent.Add(1)
	a.pending <- ch
}

// allSent says the last publish is sent: the timeout runs from here.
func (a *ackReader) allSent() {
	close(a.pending)
	close(a.sentAll)
}

func (a *ackReader) run() {
	defer close(a.done)
	var deadline <-chan time.Time
	sentAll := a.sentAll
	for ch := range a.pending {
		for waiting := true; waiting; {
			select {
			case r := <-ch:
				waiting = false
				if r.Err != nil {
					a.errs = append(a.errs, r.Err)
					continue
				}
				if r.Ack.Duplicate {
					a.dups++
				}
				a.last = r.Ack
				a.acked.Add(1)
			case <-sentAll:
				sentAll, deadline = nil, time.After(a.timeout)
			case <-deadline:
				a.timedOut = true
				return
			}
		}
	}
}

// progress writes a line to w every interval while acks come in: what was
// sent and acknowledged, and the ack rate over the interval. It returns
// the function that stops it (idempotent).
func (a *ackReader) progress(w io.Writer, every time.Duration) func() {
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		t := time.NewTicker(every)
		defer t.Stop()
		prev := int64(0)
		for {
			select {
			case <-stop:
				return
			case <-a.done:
				return
			case <-t.C:
				n := a.acked.Load()
				fmt.Fprintf(w, "pub: %d sent %d acked, %.0f/s acked\n", a.sent.Load(), n, float64(n-prev)/every.Seconds())
				prev = n
			}
		}
	}()
	var once sync.Once
	return func() { once.Do(func() { close(stop); wg.Wait() }) }
}
