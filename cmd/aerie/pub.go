package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/aerie-mq/aerie/client"
	"github.com/aerie-mq/aerie/internal/msg"
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

// pubOptions are the flags of `aerie pub`, checked.
type pubOptions struct {
	addr, topic, id, pubend string
	props                   map[string]any
	count                   int
	rate                    float64
	size                    int
	data, file              string
	timeout, wait           time.Duration
	sec                     *clientSecurity
}

// parsePub reads and checks the flags of `aerie pub`: everything the
// command could refuse is refused here, before anything is sent.
func parsePub(args []string, stderr io.Writer) (o pubOptions, code int, ok bool) {
	fs := flag.NewFlagSet("aerie pub", flag.ContinueOnError)
	fs.SetOutput(stderr)
	usageWith(fs, "aerie pub [--connect ADDR] [--topic T] [--prop k=v]... [--count N] [--data S | --file F | --size N] [flags]",
		"Publish events and wait until each is durable at its pubend. Every event carries the integer property seq (1 to N) "+
			"besides the --prop properties; all events of one publisher go to one pubend, so subscribers see them in publish order. "+
			"Publishes are retried through broker failures, once connected, without duplicates (they are deduplicated per --id "+
			"and seq). Prints progress on stderr and a last line \"published N acked N ...\"; exits 0 only when all N are acknowledged.",
		"aerie pub --connect 127.0.0.1:7201 --topic orders.eu --prop region=EU --prop qty=3 --data '{\"id\":42}'",
		"aerie pub --connect 127.0.0.1:7201,127.0.0.1:7202 --topic sensors.t1 --count 10000 --rate 500 --size 128")
	fs.StringVar(&o.addr, "connect", "127.0.0.1:7201", "broker client addresses, comma-separated: any broker's, one that does not host the pubend relays to it; the first that answers is used, the next when it fails (unacknowledged publishes go again to the same pubend, never to another)")
	fs.StringVar(&o.topic, "topic", "demo", "topic: words separated by dots, none empty, no wildcards")
	var props propFlags
	fs.Var(&props, "prop", "property name=value (repeatable); value is a JSON literal when it parses as one, else a string")
	fs.IntVar(&o.count, "count", 1, "events to publish (at least 1)")
	fs.Float64Var(&o.rate, "rate", 0, "events per second (0: as fast as acks allow)")
	fs.StringVar(&o.data, "data", "", "payload of every event, as given (-: read it from stdin)")
	fs.StringVar(&o.file, "file", "", "payload of every event: the contents of this file")
	fs.IntVar(&o.size, "size", 0, "payload of every event: this many filler bytes (a-z), when neither --data nor --file is given")
	fs.StringVar(&o.id, "id", "", "client id (publishes are deduplicated per id and sequence number)")
	fs.StringVar(&o.pubend, "pubend", "", "pubend to publish to (default: the broker picks one by a hash of the id, among those it hosts or else those it relays to)")
	fs.DurationVar(&o.timeout, "timeout", time.Minute, "how long to wait for the outcome once publishing: for every ack, after the last event is sent (0: no limit)")
	fs.DurationVar(&o.wait, "wait-for-broker", 0, "at start, while no address answers, keep trying this long, saying so on stderr (0: fail at once; once connected, failures are always retried)")
	o.sec = addClientSecurity(fs)
	if code, ok := parseFlags(fs, args); !ok {
		return o, code, false
	}
	o.props = map[string]any{}
	for _, kv := range props {
		k, v, err := parseProp(kv)
		if err != nil {
			fmt.Fprintf(stderr, "aerie pub: %v\n", err)
			return o, 2, false
		}
		o.props[k] = v
	}
	if err := o.check(); err != nil {
		fmt.Fprintf(stderr, "aerie pub: %v\n", err)
		return o, 2, false
	}
	return o, 0, true
}

// check refuses flags that make no sense, naming the value and the rule.
func (o *pubOptions) check() error {
	if err := msg.CheckTopic(o.topic); err != nil {
		return fmt.Errorf("--topic: %w", err)
	}
	payloads := 0
	for _, set := range []bool{o.data != "", o.file != "", o.size != 0} {
		if set {
			payloads++
		}
	}
	for _, err := range []error{
		someAddress(o.addr),
		atLeast("count", o.count, 1),
		nonNegativeFloat("rate", o.rate, "as fast as acks allow"),
		within("size", o.size, 0, client.MaxEventBytes, "an event's limit"),
		nonNegativeDuration("timeout", o.timeout, "no limit"),
		nonNegativeDuration("wait-for-broker", o.wait, "fail at once"),
	} {
		if err != nil {
			return err
		}
	}
	if payloads > 1 {
		return fmt.Errorf("--data, --file and --size each give the payload: give one of them")
	}
	return nil
}

// payload is the payload of every event the flags ask for.
func (o *pubOptions) payload(stdin io.Reader) ([]byte, error) {
	var b []byte
	var err error
	switch {
	case o.data == "-":
		if b, err = io.ReadAll(io.LimitReader(stdin, client.MaxEventBytes+1)); err != nil {
			return nil, fmt.Errorf("--data -: read stdin: %w", err)
		}
	case o.data != "":
		b = []byte(o.data)
	case o.file != "":
		if b, err = readLimited(o.file, client.MaxEventBytes+1); err != nil {
			return nil, fmt.Errorf("--file: %w", err)
		}
	default:
		b = make([]byte, o.size)
		for i := range b {
			b[i] = 'a' + byte(i%26)
		}
	}
	if len(b) > client.MaxEventBytes {
		return nil, fmt.Errorf("payload of more than %d bytes: above an event's limit", client.MaxEventBytes)
	}
	return b, nil
}

// runPub implements `aerie pub`.
func runPub(args []string, stdout, stderr io.Writer) int {
	o, code, ok := parsePub(args, stderr)
	if !ok {
		return code
	}
	return o.run(os.Stdin, stdout, stderr)
}

func (o *pubOptions) run(stdin io.Reader, stdout, stderr io.Writer) int {
	payload, err := o.payload(stdin)
	if err != nil {
		fmt.Fprintf(stderr, "aerie pub: %v\n", err)
		return 2
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	copts := client.Options{ID: o.id, Pubend: o.pubend}
	if err := o.sec.apply(&copts, stderr); err != nil {
		fmt.Fprintf(stderr, "aerie pub: %v\n", err)
		return 2
	}
	c, err := dialClient(ctx, "pub", o.addr, o.wait, copts, stderr)
	if err != nil {
		fmt.Fprintf(stderr, "aerie pub: %v\n", err)
		return 1
	}
	defer c.Close()
	// An interrupt closes the client, so that a publish waiting for room
	// (MaxInflight unacknowledged, say while a broker is down) returns.
	defer context.AfterFunc(ctx, func() { c.Close() })()
	began := time.Now()
	// Acks are read in publish order by a goroutine of their own, so that
	// progress (sent, acked, the ack rate) can be told while publishing: a
	// pubend under congestion control acks more slowly (Gryphon CC §4),
	// and this is where a publisher sees it.
	acks := newAckReader(o.count, o.timeout)
	go acks.run(ctx)
	stopProgress := acks.progress(stderr, time.Second)
	defer stopProgress()
	if err := o.publishAll(ctx, c, payload, acks); err != nil {
		fmt.Fprintf(stderr, "aerie pub: %v\n", err)
	}
	<-acks.done
	stopProgress()
	return o.report(acks, ctx.Err() != nil, began, stdout, stderr)
}

// publishAll publishes the events, paced by --rate, until all are sent or
// ctx ends (an interrupt).
func (o *pubOptions) publishAll(ctx context.Context, c *client.Client, payload []byte, acks *ackReader) error {
	defer acks.allSent() // the reader ends with what is in flight
	began := time.Now()
	for i := 1; i <= o.count; i++ {
		if o.rate > 0 {
			if d := time.Until(began.Add(time.Duration(float64(i-1) / o.rate * float64(time.Second)))); d > 0 {
				select { // pacing the publish rate, not synchronisation
				case <-time.After(d):
				case <-ctx.Done():
				}
			}
		}
		if ctx.Err() != nil {
			return nil
		}
		p := make(map[string]any, len(o.props)+1)
		for k, v := range o.props {
			p[k] = v
		}
		p["seq"] = int64(i)
		ch, err := c.PublishAsync(client.Message{Topic: o.topic, Props: p, Payload: payload})
		if err != nil {
			if ctx.Err() != nil {
				return nil // interrupted: report says so
			}
			return err
		}
		acks.add(ch)
	}
	return nil
}

// report writes the last line: what was published and acknowledged, and
// why it stopped short when it did.
func (o *pubOptions) report(acks *ackReader, interrupted bool, began time.Time, stdout, stderr io.Writer) int {
	sent, acked, dups, last := int(acks.sent.Load()), int(acks.acked.Load()), acks.dups, acks.last
	// A run of the same refusal (a pubend whose disk is full refuses
	// every publish until room returns) is one line, with its count.
	for i, errs := 0, acks.errs; i < len(errs); {
		err, j := errs[i], i+1
		for j < len(errs) && errs[j].Error() == err.Error() {
			j++
		}
		switch {
		case interrupted && errors.Is(err, client.ErrClosed): // closed by the interrupt
		case j-i > 1:
			fmt.Fprintf(stderr, "aerie pub: %v (%d publishes)\n", err, j-i)
		default:
			fmt.Fprintf(stderr, "aerie pub: %v\n", err)
		}
		i = j
	}
	switch {
	case interrupted:
		fmt.Fprintf(stdout, "published %d acked %d (interrupted after %d of %d; last acked pubend %s tick %d)\n", sent, acked, sent, o.count, last.Pubend, last.Tick)
		return 1
	case acks.timedOut:
		fmt.Fprintf(stdout, "published %d acked %d (timed out after %v)\n", sent, acked, o.timeout)
		return 1
	}
	el := time.Since(began)
	fmt.Fprintf(stdout, "published %d acked %d duplicates %d pubend %s last_tick %d in %v (%.0f/s)\n", sent, acked, dups,
		last.Pubend, last.Tick, el.Round(time.Millisecond), float64(acked)/el.Seconds())
	if dups > 0 {
		fmt.Fprintf(stderr, "pub: %d of %d were already logged under client id %q (not logged again)\n", dups, acked, o.id)
	}
	if acked != o.count {
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

// run reads the acks until every publish is answered, --timeout after
// the last was sent (0: no limit), or ctx ends (an interrupt).
func (a *ackReader) run(ctx context.Context) {
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
				sentAll = nil
				if a.timeout > 0 {
					deadline = time.After(a.timeout)
				}
			case <-deadline:
				a.timedOut = true
				return
			case <-ctx.Done():
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
