package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"github.com/aerie-mq/aerie/client"
)

// dialClient connects a client command: at once, or, when the user asked
// for it with --wait-for-broker, trying again for up to wait, saying so
// on stderr. An address that never answered is an error with its reason
// (a broker that was reached and then fails is the client's to retry).
func dialClient(ctx context.Context, name, addr string, wait time.Duration, opts client.Options, stderr io.Writer) (*client.Client, error) {
	opts.RetryDial = false
	c, err := client.Dial(ctx, addr, opts)
	if err == nil {
		return c, nil
	}
	if wait == 0 || errors.Is(err, client.ErrRefused) || ctx.Err() != nil {
		return nil, errors.New(strings.TrimPrefix(err.Error(), "aerie: "))
	}
	fmt.Fprintf(stderr, "aerie %s: %s; trying again for up to %v (--wait-for-broker)\n", name, strings.TrimPrefix(err.Error(), "aerie: "), wait)
	wctx, cancel := context.WithTimeout(ctx, wait)
	defer cancel()
	opts.RetryDial = true
	c, err = client.Dial(wctx, addr, opts)
	switch {
	case err == nil:
		return c, nil
	case wctx.Err() != nil && ctx.Err() == nil:
		return nil, fmt.Errorf("no broker of %s answered within %v (--wait-for-broker)", addr, wait)
	}
	return nil, errors.New(strings.TrimPrefix(err.Error(), "aerie: "))
}

// readLimited reads at most limit bytes of the file at path: enough to
// tell that a payload is too large without reading all of it.
func readLimited(path string, limit int64) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return io.ReadAll(io.LimitReader(f, limit))
}
