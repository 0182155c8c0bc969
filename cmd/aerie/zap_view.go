package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/aerie-mq/aerie/client"
	"github.com/aerie-mq/aerie/internal/zap"
)

// runZapView implements `aerie zap view`.
func runZapView(args []string, stdout, stderr io.Writer) int {
	fset := flag.NewFlagSet("aerie zap view", flag.ContinueOnError)
	fset.SetOutput(stderr)
	usageWith(fset, "aerie zap view [--connect ADDR] [--durable NAME] [--checkpoint FILE] [--top N] [flags]",
		"The ZapViewers subscriber of P2S (DEBS 2014 §3.3): a durable subscription to zap.> that counts the boxes "+
			"watching each channel (a channel change moves its box, power off and on take it away and back) and prints "+
			"the --top channels every --every, while anything changed. Its state is exact across restarts: every "+
			"--save-every (and when it stops) it writes the state together with the checkpoint token that covers exactly "+
			"the events in it, in one file (--checkpoint: write, fsync, rename), and only then acknowledges that token; "+
			"started again with the same file, it resumes from that token, so each event is counted once whether it was "+
			"killed (-9) or stopped. stderr says \"subscribed <token>\" or \"resumed <token>\". A gap notice (events "+
			"discarded while it was away, max_retain) is counted in \"gaps\": the counts are then no longer exact. "+
			"Removing the file while the subscription lives at its broker loses exactness too: use a new --durable name "+
			"with a new file.",
		"aerie zap view --connect 127.0.0.1:7203 --top 5 --checkpoint zap.state",
		"aerie zap view --connect 127.0.0.1:7203 --channels ch003,ch042 --json --until 100000")
	addr := fset.String("connect", "127.0.0.1:7203", "broker client addresses, comma-separated: the first that answers is used, the next when it fails")
	name := fset.String("durable", "zapviewers", "durable subscription name")
	path := fset.String("checkpoint", "", "file of the state and its checkpoint token (default: NAME.zapstate)")
	top := fset.Int("top", 10, "channels in each report (0: every channel with a viewer)")
	every := fset.Duration("every", 2*time.Second, "report interval")
	saveEvery := fset.Duration("save-every", time.Second, "how often the state is saved and its token acknowledged")
	until := fset.Uint64("until", 0, "save, report and exit 0 once the state holds this many events, counting those before a restart (0: run until interrupted)")
	named := fset.String("channels", "", "also report the viewers of these channels, comma-separated (P2S's numViewers), e.g. ch003,ch042")
	asJSON := fset.Bool("json", false, "reports as one JSON object per line")
	timeout := fset.Duration("timeout", 30*time.Second, "how long to wait for the outcome once connected: exit 1 if not subscribed within this long (0: no limit)")
	wait := fset.Duration("wait-for-broker", 0, "at start, while no address answers, keep trying this long, saying so on stderr (0: fail at once; once connected, failures are always retried)")
	sec := addClientSecurity(fset)
	if code, ok := parseFlags(fset, args); !ok {
		return code
	}
	if *path == "" {
		*path = *name + ".zapstate"
	}
	if err := firstErr(someAddress(*addr), positiveDuration("every", *every), positiveDuration("save-every", *saveEvery), atLeast("top", *top, 0), nonNegativeDuration("timeout", *timeout, "no limit"), nonNegativeDuration("wait-for-broker", *wait, "fail at once")); err != nil {
		fmt.Fprintf(stderr, "aerie zap view: %v\n", err)
		return 2
	}
	state, token, resumed, err := loadZapState(*path)
	if err != nil {
		fmt.Fprintf(stderr, "aerie zap view: %v\n", err)
		return 2
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	var copts client.Options
	if err := sec.apply(&copts, stderr); err != nil {
		fmt.Fprintf(stderr, "aerie zap view: %v\n", err)
		return 2
	}
	c, err := dialClient(ctx, "zap view", *addr, *wait, copts, stderr)
	if err != nil {
		fmt.Fprintf(stderr, "aerie zap view: %v\n", err)
		return 1
	}
	defer c.Close()
	subCtx := ctx
	if *timeout > 0 {
		var cancel context.CancelFunc
		subCtx, cancel = context.WithTimeout(ctx, *timeout)
		defer cancel()
	}
	sub, err := c.SubscribeDurable(subCtx, client.Durable{Name: *name, Pattern: zap.TopicPattern, From: token})
	if err != nil {
		fmt.Fprintf(stderr, "aerie zap view: %v\n", err)
		return 1
	}
	v := &zapViewer{state: state, token: token, path: *path, sub: sub, out: bufio.NewWriter(stdout), stderr: stderr,
		top: *top, json: *asJSON}
	for _, ch := range strings.Split(*named, ",") {
		if ch = strings.TrimSpace(ch); ch != "" {
			v.named = append(v.named, ch)
		}
	}
	if resumed {
		fmt.Fprintf(stderr, "resumed %s\n", sub.TokenString())
		v.saved, v.savedEvents = token, state.Events // the file holds them already
	} else {
		fmt.Fprintf(stderr, "subscribed %s\n", sub.TokenString())
		v.token = sub.TokenString()
		if !v.save() { // a restart resumes this subscription from its start
			return 1
		}
	}
	return v.run(ctx, *every, *saveEvery, *until)
}

// idleSaves: with no new event, the state (and the token that silence
// moved) is saved every idleSaves × --save-every.
const idleSaves = 10

// zapViewer is the shell around zap.State: it feeds it the subscription's
// events, saves it with its token and reports it.
type zapViewer struct {
	state       *zap.State
	token       string // the checkpoint covering exactly the events in state
	saved       string // the token last saved with the state
	savedEvents uint64 // state.Events when saved
	path        string
	sub         *client.Subscription
	out         *bufio.Writer
	stderr      io.Writer
	top         int
	named       []string // channels reported by name (--channels)
	json        bool
	reported    uint64 // state.Events at the last report
}

func (v *zapViewer) run(ctx context.Context, every, saveEvery time.Duration, until uint64) int {
	report, save := time.NewTicker(every), time.NewTicker(saveEvery)
	defer report.Stop()
	defer save.Stop()
	idle := 0
	finish := func(code int) int {
		if !v.save() {
			code = 1
		}
		v.report(true)
		fmt.Fprintf(v.stderr, "zap view: stopped with %d events; checkpoint %s\n", v.state.Events, v.saved)
		return code
	}
	if until > 0 && v.state.Events >= until {
		return finish(0)
	}
	for {
		select {
		case ev, ok := <-v.sub.Events():
			if !ok {
				fmt.Fprintf(v.stderr, "aerie zap view: subscription ended: %v\n", v.sub.Err())
				return finish(1)
			}
			v.apply(ev)
			if until > 0 && v.state.Events >= until {
				return finish(0)
			}
		case <-save.C:
			// Progress alone (silence) moves the token every few hundred
			// ms: saving the whole state for it once in a while is enough.
			if idle++; v.state.Events == v.savedEvents && idle < idleSaves {
				continue
			}
			idle = 0
			if !v.save() {
				return 1
			}
		case <-report.C:
			v.report(false)
		case <-ctx.Done():
			return finish(0)
		}
	}
}

func (v *zapViewer) apply(ev client.Event) {
	switch {
	case ev.Progress:
	case ev.Gap != nil:
		v.state.Gaps++
		fmt.Fprintf(v.stderr, "aerie zap view: events of %s in ticks (%d, %d] were discarded by the network while this subscriber was away: the counts are no longer exact\n",
			ev.Gap.Pubend, ev.Gap.From, ev.Gap.To)
	default:
		if err := v.state.ApplyPayload(ev.Payload); err != nil && v.state.Malformed <= 10 {
			fmt.Fprintf(v.stderr, "aerie zap view: %s@%d: %v\n", ev.Pubend, ev.Tick, err)
		}
	}
	if ev.Checkpoint != "" {
		v.token = ev.Checkpoint
	}
}

// save writes the state with its token, then acknowledges the token: the
// network may discard only what a saved state holds.
func (v *zapViewer) save() bool {
	if v.token == v.saved {
		return true
	}
	if err := writeFileAtomic(v.path, v.state.Marshal(v.token)); err != nil {
		fmt.Fprintf(v.stderr, "aerie zap view: save state: %v\n", err)
		return false
	}
	v.saved, v.savedEvents = v.token, v.state.Events
	if v.saved != "" {
		v.sub.Ack(v.saved) // lost with the connection: the next save acknowledges again
	}
	return true
}

// zapReport is one report as --json writes it.
type zapReport struct {
	Events     uint64               `json:"events"`
	Changes    uint64               `json:"changes"`
	Statuses   uint64               `json:"statuses"`
	Malformed  uint64               `json:"malformed"`
	Gaps       uint64               `json:"gaps"`
	Boxes      int                  `json:"boxes"`
	Watching   int                  `json:"watching"`
	Top        []zap.ChannelViewers `json:"top"`
	Channels   []zap.ChannelViewers `json:"channels,omitempty"` // --channels
	Checkpoint string               `json:"checkpoint"`
}

// report writes the top list, unless nothing changed since the last one
// and final is false.
func (v *zapViewer) report(final bool) {
	s := v.state
	if !final && s.Events == v.reported {
		return
	}
	v.reported = s.Events
	r := zapReport{Events: s.Events, Changes: s.Changes, Statuses: s.Statuses, Malformed: s.Malformed, Gaps: s.Gaps,
		Top: s.TopList(v.top), Checkpoint: v.token}
	r.Boxes, r.Watching = s.Boxes()
	for _, ch := range v.named {
		r.Channels = append(r.Channels, zap.ChannelViewers{Channel: ch, Viewers: s.NumViewers(ch)})
	}
	defer v.out.Flush()
	if v.json {
		b, _ := json.Marshal(r)
		v.out.Write(append(b, '\n'))
		return
	}
	fmt.Fprintf(v.out, "%s  %d events (%d changes, %d status, %d malformed, %d gaps), %d boxes, %d watching, checkpoint %s\n",
		time.Now().Format("15:04:05"), r.Events, r.Changes, r.Statuses, r.Malformed, r.Gaps, r.Boxes, r.Watching, r.Checkpoint)
	for i, cv := range r.Top {
		share := 0.0
		if r.Watching > 0 {
			share = 100 * float64(cv.Viewers) / float64(r.Watching)
		}
		fmt.Fprintf(v.out, "  %3d  %-8s %7d  %5.1f%%\n", i+1, cv.Channel, cv.Viewers, share)
	}
	for _, cv := range r.Channels {
		fmt.Fprintf(v.out, "       %-8s %7d\n", cv.Channel, cv.Viewers)
	}
}

// loadZapState reads the state file; a missing one is a new subscription.
func loadZapState(path string) (*zap.State, string, bool, error) {
	b, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return zap.NewState(), "", false, nil
	}
	if err != nil {
		return nil, "", false, fmt.Errorf("read state: %w", err)
	}
	s, tok, err := zap.Unmarshal(b)
	if err != nil {
		return nil, "", false, fmt.Errorf("state file %s is corrupt (%v): remove it and use a new --durable name to start anew", path, err)
	}
	return s, tok, true, nil
}
