package main

import (
	"bufio"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"syscall"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/aerie-mq/aerie/client"
	"github.com/aerie-mq/aerie/internal/match"
	"github.com/aerie-mq/aerie/internal/msg"
	"github.com/aerie-mq/aerie/internal/tick"
)

// subOptions are the flags of `aerie sub`, checked.
type subOptions struct {
	addr, topic, selector string
	count                 int
	timeout, wait         time.Duration
	json, total, delete   bool
	durable, checkpoint   string
	from                  string
	group                 string
	sec                   *clientSecurity
}

// parseSub reads and checks the flags of `aerie sub`: a bad pattern,
// selector or number is refused here, before anything is sent.
func parseSub(args []string, stderr io.Writer) (o subOptions, code int, ok bool) {
	fs := flag.NewFlagSet("aerie sub", flag.ContinueOnError)
	fs.SetOutput(stderr)
	usageWith(fs, "aerie sub [--connect ADDR] [--topic PATTERN] [--selector EXPR] [--count N] [--json] [--durable NAME] [flags]",
		"Subscribe to the events whose topic matches a pattern (\"*\" one word, \">\" the rest) and whose properties pass a "+
			"JMS SQL-92 selector, and write each to stdout as it is delivered, in publish order per pubend: one line of text "+
			"(pubend@tick, topic, properties as k=v, payload), or one JSON object with --json. Writes \"subscribed <token>\" to "+
			"stderr once the subscription is in force. A durable subscription (--durable) is kept by its broker while away and "+
			"resumed from its checkpoint, missing nothing; the members of a group (--group) share its events, each to one of them. "+
			"On SIGINT or SIGTERM it says how many events it wrote and where it stopped.",
		"aerie sub --connect 127.0.0.1:7203 --topic 'orders.>' --selector \"region = 'EU' AND qty > 3\" --group billing",
		"aerie sub --connect 127.0.0.1:7203 --topic 'orders.*' --durable audit --checkpoint audit.cp --json")
	fs.StringVar(&o.addr, "connect", "127.0.0.1:7203", "broker client addresses, comma-separated: the first that answers is used, and the subscription moves to the next when its broker fails")
	fs.StringVar(&o.topic, "topic", ">", "topic pattern: words separated by dots, * one word, > the rest")
	fs.StringVar(&o.selector, "selector", "", "JMS SQL-92 selector over properties, e.g. \"region = 'EU' AND qty > 3\" (docs/SELECTORS.md)")
	fs.IntVar(&o.count, "count", 0, "exit 0 after this many events (0: run until interrupted)")
	fs.DurationVar(&o.timeout, "timeout", 0, "how long to wait for the outcome once subscribed: exit 1 if --count events have not arrived this long after subscribing (0: no limit)")
	fs.DurationVar(&o.wait, "wait-for-broker", 0, "at start, while no address answers, keep trying this long, saying so on stderr (0: fail at once; once connected, failures are always retried)")
	fs.BoolVar(&o.json, "json", false, "one JSON object per event on stdout")
	fs.StringVar(&o.durable, "durable", "", "durable subscription name: kept by its broker while this subscriber is away, resumed from its checkpoint at any broker")
	fs.StringVar(&o.checkpoint, "checkpoint", "", "with --durable: file holding the checkpoint token, read at start and saved after every line written and at a graceful stop")
	fs.StringVar(&o.group, "group", "", "consumer group name: each matching event goes to one member of the group, wherever its members are connected; "+
		"each event is acknowledged once written, and one left unwritten goes to another member (docs/GUIDE.md \"Competing consumers\")")
	fs.BoolVar(&o.delete, "delete", false, "with --durable: delete the durable subscription at its broker, while its subscriber is away, and exit (an addition); "+
		"with --group: delete the group at its home while it has no member there")
	fs.StringVar(&o.from, "from", "", "with --durable: checkpoint token to resume from (overrides --checkpoint's)")
	fs.BoolVar(&o.total, "total-order", false, "uniform total order across pubends: every pubend's events merged in (tick, pubend) order, the same at every broker (not with --durable; adds about a round trip to the furthest PHB)")
	o.sec = addClientSecurity(fs)
	if code, ok := parseFlags(fs, args); !ok {
		return o, code, false
	}
	if err := o.check(); err != nil {
		fmt.Fprintf(stderr, "aerie sub: %v\n", err)
		return o, 2, false
	}
	return o, 0, true
}

// check refuses flags that make no sense, naming the value and the rule.
func (o *subOptions) check() error {
	if _, err := match.ParsePattern(o.topic); err != nil {
		return fmt.Errorf("--topic: %w", err)
	}
	if o.selector != "" {
		if _, err := match.ParseSelector(o.selector); err != nil {
			return fmt.Errorf("--selector %q: %w", o.selector, err)
		}
	}
	for _, err := range []error{
		someAddress(o.addr),
		atLeast("count", o.count, 0),
		nonNegativeDuration("timeout", o.timeout, "no limit"),
		nonNegativeDuration("wait-for-broker", o.wait, "fail at once"),
	} {
		if err != nil {
			return err
		}
	}
	switch {
	case o.group != "" && o.durable != "":
		return fmt.Errorf("--group and --durable: a group keeps its own checkpoint at its home, so its members are not durable subscriptions")
	case o.group != "" && (o.checkpoint != "" || o.from != ""):
		return fmt.Errorf("--checkpoint and --from are not for --group: the group resumes from its own checkpoint")
	case o.group != "" && o.total:
		return fmt.Errorf("--total-order is not offered for groups: each member sees only its share")
	case o.total && o.durable != "":
		return fmt.Errorf("--total-order is not offered for durable subscriptions")
	case o.durable == "" && o.group == "" && (o.checkpoint != "" || o.from != "" || o.delete):
		return fmt.Errorf("--checkpoint, --from and --delete need --durable NAME (--delete: or --group NAME)")
	}
	if strings.ContainsAny(o.group, " \t\n/") {
		return fmt.Errorf("--group %q: no spaces or slashes", o.group)
	}
	return nil
}

// runSub implements `aerie sub`.
func runSub(args []string, stdout, stderr io.Writer) int {
	o, code, ok := parseSub(args, stderr)
	if !ok {
		return code
	}
	if o.delete && o.group != "" {
		o.durable = "group:" + o.group // a group's subscription at its home
		return runDeleteDurable(o, stderr)
	}
	if o.delete {
		return runDeleteDurable(o, stderr)
	}
	if o.group != "" {
		return runGroupSub(o, stdout, stderr)
	}
	if o.durable != "" {
		return runDurableSub(durableArgs{addr: o.addr, topic: o.topic, selector: o.selector, count: o.count, timeout: o.timeout,
			wait: o.wait, json: o.json, name: o.durable, checkpoint: o.checkpoint, from: o.from, sec: o.sec}, stdout, stderr)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	copts := client.Options{Resubscribe: true}
	if err := o.sec.apply(&copts, stderr); err != nil {
		fmt.Fprintf(stderr, "aerie sub: %v\n", err)
		return 2
	}
	c, err := dialClient(ctx, "sub", o.addr, o.wait, copts, stderr)
	if err != nil {
		fmt.Fprintf(stderr, "aerie sub: %v\n", err)
		return 1
	}
	defer c.Close()
	subscribe := c.SubscribeSelector
	if o.total {
		subscribe = c.SubscribeTotalOrder
	}
	subCtx := ctx
	if o.timeout > 0 { // a subscription that never comes into force also times out
		var cancel context.CancelFunc
		subCtx, cancel = context.WithTimeout(ctx, o.timeout)
		defer cancel()
	}
	sub, err := subscribe(subCtx, o.topic, o.selector)
	if err != nil && ctx.Err() != nil {
		fmt.Fprintln(stderr, "aerie sub: interrupted before the subscription was in force")
		return 1
	}
	if err != nil {
		fmt.Fprintf(stderr, "aerie sub: %v\n", err)
		return 1
	}
	fmt.Fprintf(stderr, "subscribed %s\n", sub.TokenString())
	return o.deliver(ctx, sub, stdout, stderr)
}

// deliver writes the subscription's events until --count, --timeout, the
// end of the subscription or an interrupt.
func (o *subOptions) deliver(ctx context.Context, sub *client.Subscription, stdout, stderr io.Writer) int {
	out := bufio.NewWriter(stdout)
	defer out.Flush()
	var deadline <-chan time.Time
	if o.timeout > 0 {
		t := time.NewTimer(o.timeout)
		defer t.Stop()
		deadline = t.C
	}
	got := 0
	last := msg.Token{} // per pubend, the tick of the last event written
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
				writeGap(out, *ev.Gap, o.json)
				continue
			}
			got++
			last[msg.PubendID(ev.Pubend)] = tick.Tick(ev.Tick)
			if o.group != "" {
				cp := ev.Checkpoint
				ev.Checkpoint = "" // it names the event alone: no token to print
				writeEvent(out, ev, o.json)
				if err := sub.Ack(cp); err != nil {
					// The connection is lost: the group gives the event to
					// another member, maybe again after it was written here.
					fmt.Fprintf(stderr, "aerie sub: %v\n", err)
				}
			} else {
				writeEvent(out, ev, o.json)
			}
			if o.count > 0 && got >= o.count {
				return 0
			}
		case <-ctx.Done():
			out.Flush()
			fmt.Fprintf(stderr, "aerie sub: stopped after %d events; last delivered %s\n", got, last)
			return 0
		case <-deadline:
			out.Flush()
			fmt.Fprintf(stderr, "aerie sub: %d of %d events within %v\n", got, o.count, o.timeout)
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
		writeJSON(w, struct {
			Gap gap `json:"gap"`
		}{gap{g.Pubend, g.From, g.To}})
	} else {
		fmt.Fprintf(w, "%s gap (%d,%d]\n", g.Pubend, g.From, g.To)
	}
	w.Flush()
}

// eventJSON is one event as `aerie sub --json` writes it; token, the
// checkpoint once this event is consumed, on durable subscriptions only.
type eventJSON struct {
	Pubend  string         `json:"pubend"`
	Tick    uint64         `json:"tick"`
	Topic   string         `json:"topic"`
	Props   map[string]any `json:"props"`
	Payload string         `json:"payload"`
	PubMs   int64          `json:"pub_ms"`
	RecvMs  int64          `json:"recv_ms"`
	Token   string         `json:"token,omitempty"`
}

func writeEvent(w *bufio.Writer, ev client.Event, asJSON bool) {
	recv := time.Now()
	if asJSON {
		writeJSON(w, eventJSON{ev.Pubend, ev.Tick, ev.Topic, ev.Props.Map(), string(ev.Payload), ev.PubTime.UnixMilli(), recv.UnixMilli(), ev.Checkpoint})
	} else {
		w.WriteString(eventText(ev))
		w.WriteByte('\n')
	}
	w.Flush() // written as it is delivered
}

// writeJSON writes v as one line, without HTML escaping: a topic pattern's
// '>' stays '>' (encoding/json would write \u003e).
func writeJSON(w io.Writer, v any) {
	enc := json.NewEncoder(w)
	enc.SetEscapeHTML(false)
	enc.Encode(v) // of our own types: cannot fail; ends the line
}

// eventText is the plain form of an event: "P1@12 orders.eu qty=3
// region=EU seq=1 | payload", properties in name order, a string value
// quoted when it would not read back as one word, the payload as it is
// when it is printable text, else quoted; no "|" when it is empty.
func eventText(ev client.Event) string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s@%d %s", ev.Pubend, ev.Tick, ev.Topic)
	for name, v := range ev.Props.All() {
		b.WriteByte(' ')
		b.WriteString(name)
		b.WriteByte('=')
		switch v := v.(type) {
		case string:
			b.WriteString(textValue(v))
		case float64:
			b.WriteString(strconv.FormatFloat(v, 'g', -1, 64))
		default:
			fmt.Fprint(&b, v)
		}
	}
	if len(ev.Payload) > 0 {
		b.WriteString(" | ")
		b.WriteString(textPayload(ev.Payload))
	}
	return b.String()
}

// textValue quotes a string property unless it reads back as itself.
func textValue(s string) string {
	if s == "" || strings.ContainsAny(s, " =|\"") || !printable(s) {
		return strconv.Quote(s)
	}
	return s
}

func textPayload(p []byte) string {
	if utf8.Valid(p) && printable(string(p)) {
		return string(p)
	}
	return strconv.Quote(string(p))
}

func printable(s string) bool {
	for _, r := range s {
		if !unicode.IsPrint(r) {
			return false
		}
	}
	return true
}
