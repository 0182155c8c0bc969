package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/aerie-mq/aerie/client"
	"github.com/aerie-mq/aerie/internal/msg"
)

type durableArgs struct {
	addr, topic, selector string
	count                 int
	timeout, wait         time.Duration
	json                  bool
	name, checkpoint      string
	from                  string
	sec                   *clientSecurity
}

// ackEvery is how often the subscriber acknowledges its saved checkpoint
// (Gryphon DS §5.1 updated released(s) every 250 ms).
const ackEvery = 250 * time.Millisecond

// runDurableSub is `aerie sub --durable NAME`: every line it writes is
// followed by saving the checkpoint (atomically, to --checkpoint), and what
// is saved is acknowledged, so a restart from the file misses nothing and
// repeats nothing.
func runDurableSub(a durableArgs, stdout, stderr io.Writer) int {
	from := a.from
	if from == "" && a.checkpoint != "" {
		saved, err := readCheckpoint(a.checkpoint)
		if err != nil {
			fmt.Fprintf(stderr, "aerie sub: %v\n", err)
			return 2
		}
		from = saved
	}
	if from != "" {
		if _, err := msg.ParseToken(from); err != nil {
			fmt.Fprintf(stderr, "aerie sub: checkpoint %q: %v\n", from, err)
			return 2
		}
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	var copts client.Options
	if err := a.sec.apply(&copts, stderr); err != nil {
		fmt.Fprintf(stderr, "aerie sub: %v\n", err)
		return 2
	}
	c, err := dialClient(ctx, "sub", a.addr, a.wait, copts, stderr)
	if err != nil {
		fmt.Fprintf(stderr, "aerie sub: %v\n", err)
		return 1
	}
	defer c.Close()
	subCtx := ctx
	if a.timeout > 0 { // a subscription that never comes into force also times out
		var cancel context.CancelFunc
		subCtx, cancel = context.WithTimeout(ctx, a.timeout)
		defer cancel()
	}
	sub, err := c.SubscribeDurable(subCtx, client.Durable{Name: a.name, Pattern: a.topic, Selector: a.selector, From: from})
	if err != nil {
		fmt.Fprintf(stderr, "aerie sub: %v\n", err)
		return 1
	}
	if from != "" {
		fmt.Fprintf(stderr, "resumed %s\n", sub.TokenString())
	} else {
		fmt.Fprintf(stderr, "subscribed %s\n", sub.TokenString())
	}
	out := bufio.NewWriter(stdout)
	defer out.Flush()
	saved := from
	save := func(cp string) bool {
		if cp == "" || cp == saved {
			return true
		}
		if a.checkpoint != "" {
			if err := writeCheckpoint(a.checkpoint, cp); err != nil {
				fmt.Fprintf(stderr, "aerie sub: %v\n", err)
				return false
			}
		}
		saved = cp
		return true
	}
	if from == "" && !save(sub.TokenString()) {
		// A new subscription's start is saved at once: a subscriber that
		// dies before its first line resumes from there.
		return 1
	}
	acked := ""
	ack := func() {
		if saved != "" && saved != acked && sub.Ack(saved) == nil {
			acked = saved
		}
	}
	defer ack() // a graceful stop acknowledges what it saved
	tick := time.NewTicker(ackEvery)
	defer tick.Stop()
	var deadline <-chan time.Time
	if a.timeout > 0 {
		t := time.NewTimer(a.timeout)
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
			switch {
			case ev.Progress:
			case ev.Gap != nil:
				fmt.Fprintf(stderr, "aerie sub: events of %s in ticks (%d, %d] were discarded by the network before this subscriber came back\n", ev.Gap.Pubend, ev.Gap.From, ev.Gap.To)
				writeGap(out, *ev.Gap, a.json)
			default:
				got++
				writeEvent(out, ev, a.json)
			}
			if !save(ev.Checkpoint) {
				return 1
			}
			if a.count > 0 && got >= a.count {
				return 0
			}
		case <-tick.C:
			ack()
		case <-ctx.Done():
			out.Flush()
			fmt.Fprintf(stderr, "aerie sub: stopped after %d events; checkpoint %s\n", got, saved)
			return 0
		case <-deadline:
			out.Flush()
			fmt.Fprintf(stderr, "aerie sub: %d of %d events within %v\n", got, a.count, a.timeout)
			return 1
		}
	}
}

// readCheckpoint reads a checkpoint file; a missing one is a new
// subscription.
func readCheckpoint(path string) (string, error) {
	b, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return "", nil
	}
	if err != nil {
		return "", fmt.Errorf("read checkpoint: %w", err)
	}
	tok := strings.TrimSpace(string(b))
	if _, err := msg.ParseToken(tok); err != nil {
		return "", fmt.Errorf("checkpoint file %s is corrupt (%v): fix it, or remove it to start anew", path, err)
	}
	return tok, nil
}

// writeCheckpoint replaces path with tok atomically: a crash leaves the
// old checkpoint or the new one, never a torn one.
func writeCheckpoint(path, tok string) error {
	if err := writeFileAtomic(path, []byte(tok+"\n")); err != nil {
		return fmt.Errorf("save checkpoint: %w", err)
	}
	return nil
}

// writeFileAtomic replaces path with data: write a temporary file beside
// it, fsync, rename over path, fsync the directory.
func writeFileAtomic(path string, data []byte) error {
	tmp, err := os.CreateTemp(filepath.Dir(path), filepath.Base(path)+".tmp*")
	if err != nil {
		return err
	}
	_, err = tmp.Write(data)
	if err == nil {
		err = tmp.Sync()
	}
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp.Name(), path)
	}
	if err != nil {
		os.Remove(tmp.Name())
		return fmt.Errorf("write %s: %w", path, err)
	}
	if d, err := os.Open(filepath.Dir(path)); err == nil {
		d.Sync() // the rename itself; some filesystems cannot sync a directory
		d.Close()
	}
	return nil
}

// runDeleteDurable is `aerie sub --durable NAME --delete`: the way to give
// a name another filter, which a resume refuses.
func runDeleteDurable(o subOptions, stderr io.Writer) int {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	var copts client.Options
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
	if o.timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, o.timeout)
		defer cancel()
	}
	if err := c.DeleteDurable(ctx, o.durable); err != nil {
		fmt.Fprintf(stderr, "aerie sub: %v\n", err)
		return 1
	}
	fmt.Fprintf(stderr, "deleted durable subscription %s\n", o.durable)
	return 0
}
