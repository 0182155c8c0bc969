package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"

	"github.com/aerie-mq/aerie/client"
)

// runGroupSub implements `aerie sub --group NAME`: it joins the group at
// its home (following a refusal that names the home, once) and writes
// each event it is given, acknowledging it once written.
func runGroupSub(o subOptions, stdout, stderr io.Writer) int {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	copts := client.Options{Resubscribe: true}
	if err := o.sec.apply(&copts, stderr); err != nil {
		fmt.Fprintf(stderr, "aerie sub: %v\n", err)
		return 2
	}
	subCtx := ctx
	if o.timeout > 0 {
		var cancel context.CancelFunc
		subCtx, cancel = context.WithTimeout(ctx, o.timeout)
		defer cancel()
	}
	g := client.Group{Name: o.group, Pattern: o.topic, Selector: o.selector}
	addr := o.addr
	for hop := 0; ; hop++ {
		c, err := dialClient(ctx, "sub", addr, o.wait, copts, stderr)
		if err != nil {
			fmt.Fprintf(stderr, "aerie sub: %v\n", err)
			return 1
		}
		sub, err := c.SubscribeGroup(subCtx, g)
		var home *client.GroupHomeError
		if errors.As(err, &home) && hop == 0 {
			c.Close()
			fmt.Fprintf(stderr, "aerie sub: group %s is served at broker %s; joining there (%s)\n", o.group, home.Home, home.Addr)
			addr = home.Addr
			continue
		}
		if err != nil {
			c.Close()
			if ctx.Err() != nil {
				fmt.Fprintln(stderr, "aerie sub: interrupted before the subscription was in force")
			} else {
				fmt.Fprintf(stderr, "aerie sub: %v\n", err)
			}
			return 1
		}
		defer c.Close()
		if tok := sub.TokenString(); tok != "" {
			fmt.Fprintf(stderr, "joined group %s at checkpoint %s\n", o.group, tok)
		} else {
			fmt.Fprintf(stderr, "joined group %s (new)\n", o.group)
		}
		return o.deliver(ctx, sub, stdout, stderr)
	}
}
