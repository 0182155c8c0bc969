package main

import (
	"context"
	crand "crypto/rand"
	"encoding/hex"
	"flag"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"os/signal"
	"sort"
	"strings"
	"syscall"
	"time"

	"github.com/aerie-mq/aerie/client"
	"github.com/aerie-mq/aerie/internal/zap"
)

// zapEpoch is model time zero unless --start says otherwise: a fixed
// evening, so that the stream (payloads included) depends on the flags only.
const zapEpoch = "2026-01-01T18:00:00Z"

// runZapPub implements `aerie zap pub`.
func runZapPub(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("aerie zap pub", flag.ContinueOnError)
	fs.SetOutput(stderr)
	usageWith(fs, "aerie zap pub [--connect ADDR] [--boxes N] [--rate R] [--count N | --duration D] [flags]",
		"Publish the events of --boxes IPTV set-top boxes as P2S (DEBS 2014 §3.3) describes them: channel changes "+
			"⟨DATE,TIME,STB-IP,TOCH,FROMCH⟩ on topic zap.change and status changes ⟨DATE,TIME,STB-IP,STATUS⟩ (volume, "+
			"mute, power) on zap.status, as text payloads under 60 bytes. When boxes zap comes from a seeded model of "+
			"the paper's description (the package doc of internal/zap): the stream is a function of --seed, --boxes, "+
			"--publishers, --channels and --start. Box i is sent by publisher i mod P, a client of its own (id PREFIX-i), "+
			"so each box's events stay in order. Stops after --count events or --duration, or at SIGINT/SIGTERM, then "+
			"waits for every ack; prints \"published N acked N …\" last and exits 0 only if all were acknowledged durable.",
		"aerie zap pub --connect 127.0.0.1:7201 --boxes 10000 --rate 1000 --duration 1m",
		"aerie zap pub --connect 127.0.0.1:7201,127.0.0.1:7202 --publishers 8 --count 100000 --id zap-run1")
	addr := fs.String("connect", "127.0.0.1:7201", "broker client addresses, comma-separated: the first that answers is used, the next when it fails")
	boxes := fs.Int("boxes", 10000, "set-top boxes (the paper's publishers simulated about 180 000 each)")
	pubs := fs.Int("publishers", 4, "publishers (client connections) sharing the boxes")
	channels := fs.Int("channels", 100, "TV channels")
	rate := fs.Float64("rate", 1000, "events per second over all publishers (0: as fast as acks allow)")
	count := fs.Int("count", 0, "stop after this many events (0: no limit)")
	duration := fs.Duration("duration", 0, "stop after this long (0: no limit)")
	seed := fs.Uint64("seed", 1, "seed of the model")
	startAt := fs.String("start", zapEpoch, "model time zero (RFC 3339): DATE and TIME of the events count from it")
	id := fs.String("id", "", "client id prefix; publisher i is PREFIX-i, so a rerun with the same prefix and seed is deduplicated (default: random)")
	timeout := fs.Duration("timeout", time.Minute, "how long to wait for the outcome once publishing: for every ack, after the last event is sent (0: no limit)")
	wait := fs.Duration("wait-for-broker", 0, "at start, while no address answers, keep trying this long, saying so on stderr (0: fail at once; once connected, failures are always retried)")
	sec := addClientSecurity(fs)
	if code, ok := parseFlags(fs, args); !ok {
		return code
	}
	t0, err := time.Parse(time.RFC3339, *startAt)
	if err != nil {
		fmt.Fprintf(stderr, "aerie zap pub: --start: %v\n", err)
		return 2
	}
	g, err := newZapGenerator(zap.Config{Boxes: *boxes, Publishers: *pubs, Channels: *channels, Start: t0}, *seed)
	if err != nil {
		fmt.Fprintf(stderr, "aerie zap pub: %v\n", err)
		return 2
	}
	if err := firstErr(
		someAddress(*addr),
		nonNegativeFloat("rate", *rate, "as fast as acks allow"),
		atLeast("count", *count, 0),
		nonNegativeDuration("duration", *duration, "no limit"),
		nonNegativeDuration("timeout", *timeout, "no limit"),
		nonNegativeDuration("wait-for-broker", *wait, "fail at once"),
	); err != nil {
		fmt.Fprintf(stderr, "aerie zap pub: %v\n", err)
		return 2
	}
	if *id == "" {
		b := make([]byte, 4)
		crand.Read(b)
		*id = "zap-" + hex.EncodeToString(b)
	}
	var copts client.Options
	if err := sec.apply(&copts, stderr); err != nil {
		fmt.Fprintf(stderr, "aerie zap pub: %v\n", err)
		return 2
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if *duration > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, *duration)
		defer cancel()
	}
	clients := make([]*client.Client, *pubs)
	for i := range clients {
		o := copts
		o.ID = fmt.Sprintf("%s-%d", *id, i)
		clients[i], err = dialClient(ctx, "zap pub", *addr, *wait, o, stderr)
		if err != nil {
			fmt.Fprintf(stderr, "aerie zap pub: publisher %d: %v\n", i, err)
			return 1
		}
		defer clients[i].Close()
	}
	return zapPublish(ctx, g, clients, zapPace{rate: *rate, count: *count, timeout: *timeout}, stdout, stderr)
}

// newZapGenerator is the generator of `aerie zap pub --seed seed`.
func newZapGenerator(cfg zap.Config, seed uint64) (*zap.Generator, error) {
	return zap.NewGenerator(cfg, rand.NewPCG(seed, 0))
}

type zapPace struct {
	rate    float64
	count   int
	timeout time.Duration
}

// zapTally is what the acks said.
type zapTally struct {
	acked, dups, failed int
	timedOut            bool
	pubends             map[string]bool
}

// zapPublish publishes the generator's events until pace.count or ctx
// ends, then waits (up to pace.timeout) for the acks, counted in order by
// one collector goroutine.
func zapPublish(ctx context.Context, g *zap.Generator, clients []*client.Client, pace zapPace, stdout, stderr io.Writer) int {
	results := make(chan (<-chan client.Result), 4096)
	ackCtx, ackCancel := context.WithCancel(context.Background())
	defer ackCancel()
	tallied := make(chan zapTally, 1)
	go func() {
		t := zapTally{pubends: map[string]bool{}}
		for ch := range results {
			r, ok := awaitResult(ackCtx, ch)
			switch {
			case !ok:
				t.timedOut = true
			case r.Err != nil:
				t.failed++
				fmt.Fprintf(stderr, "aerie zap pub: %v\n", r.Err)
			default:
				t.acked++
				t.pubends[r.Ack.Pubend] = true
				if r.Ack.Duplicate {
					t.dups++
				}
			}
		}
		tallied <- t
	}()
	began := time.Now()
	sent := 0
	var pacer *time.Timer
	for pace.count == 0 || sent < pace.count {
		if pace.rate > 0 {
			if d := time.Until(began.Add(time.Duration(float64(sent) / pace.rate * float64(time.Second)))); d > 0 {
				if pacer == nil {
					pacer = time.NewTimer(d)
				} else {
					pacer.Reset(d)
				}
				select { // pacing the publish rate, not synchronisation
				case <-pacer.C:
				case <-ctx.Done():
				}
			}
		}
		if ctx.Err() != nil {
			break
		}
		p := g.Next()
		ch, err := clients[p.Publisher].PublishAsync(client.Message{Topic: p.Event.Topic(), Payload: p.Event.Encode()})
		if err != nil {
			fmt.Fprintf(stderr, "aerie zap pub: %v\n", err)
			break
		}
		results <- ch
		if sent++; sent%10000 == 0 {
			fmt.Fprintf(stderr, "zap pub: %d sent\n", sent)
		}
	}
	close(results)
	if pace.timeout > 0 {
		stopAcks := time.AfterFunc(pace.timeout, ackCancel)
		defer stopAcks.Stop()
	}
	t := <-tallied
	el := time.Since(began)
	pe := make([]string, 0, len(t.pubends))
	for p := range t.pubends {
		pe = append(pe, p)
	}
	sort.Strings(pe)
	note := ""
	if t.timedOut {
		note = fmt.Sprintf(" (timed out after %v)", pace.timeout)
	}
	fmt.Fprintf(stdout, "published %d acked %d duplicates %d publishers %d pubends %s in %v (%.0f/s)%s\n", sent, t.acked, t.dups,
		len(clients), strings.Join(pe, ","), el.Round(time.Millisecond), float64(t.acked)/el.Seconds(), note)
	if t.acked != sent || (pace.count > 0 && sent != pace.count && ctx.Err() == nil) {
		return 1
	}
	return 0
}

// awaitResult waits for a publish's outcome until ctx ends; one already
// there is taken even after that.
func awaitResult(ctx context.Context, ch <-chan client.Result) (client.Result, bool) {
	select {
	case r := <-ch:
		return r, true
	default:
	}
	select {
	case r := <-ch:
		return r, true
	case <-ctx.Done():
		return client.Result{}, false
	}
}
