package client

import (
	"context"
	"errors"
	"net"
	"strings"
	"testing"
	"time"
)

// TestDialFailsAtOnceNamingAddressAndReason: where nothing listens, Dial
// returns the operating system's reason for every address, without
// waiting for its context (a minute here) and without retrying, unless
// RetryDial asks for it.
func TestDialFailsAtOnceNamingAddressAndReason(t *testing.T) {
	var closed []string
	for range 2 {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		closed = append(closed, l.Addr().String())
		l.Close() // nothing listens there now
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	for _, c := range []struct {
		addrs string
		want  []string
	}{
		{closed[0], []string{closed[0], "connection refused"}},
		{closed[0] + "," + closed[1], []string{closed[0], closed[1], "connection refused"}},
		{"127.0.0.1", []string{"127.0.0.1", "missing port"}},
		{" , ", []string{`no broker address in " , "`}},
	} {
		_, err := Dial(ctx, c.addrs, Options{})
		if err == nil || errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("Dial(%q): %v, want a failure at once", c.addrs, err)
		}
		for _, w := range c.want {
			if !strings.Contains(err.Error(), w) {
				t.Errorf("Dial(%q): %v, want it to say %q", c.addrs, err, w)
			}
		}
	}
	if ctx.Err() != nil {
		t.Fatal("Dial waited for its context")
	}
	// Asked to retry, it tries until its context ends, and says so.
	short, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	if _, err := Dial(short, closed[0], Options{RetryDial: true}); !errors.Is(err, context.DeadlineExceeded) || !strings.Contains(err.Error(), closed[0]) {
		t.Errorf("Dial with RetryDial: %v, want the context's end naming the address", err)
	}
}
