package faultnet

import (
	"context"
	"io"
	"net"
	"testing"
	"time"
)

// TestSetBandwidthPaces checks that a limited proxy forwards from the
// target at about its bandwidth, and that lifting the limit applies to a
// connection already open.
func TestSetBandwidthPaces(t *testing.T) {
	const (
		rate  = 60_000 // bytes/s
		event = 1082   // a 1 KB event on the wire
		n     = 60     // events: about 1 s at rate
		size  = n * event
	)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() { // the target sends size bytes twice, a byte from the client between
		c, err := ln.Accept()
		if err != nil {
			return
		}
		defer c.Close()
		one := make([]byte, 1)
		for range 2 {
			for range n {
				if _, err := c.Write(make([]byte, event)); err != nil {
					return
				}
			}
			if _, err := c.Read(one); err != nil {
				return
			}
		}
	}()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	p, err := Listen(ctx, ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	p.SetBandwidth(rate)
	c, err := net.Dial("tcp", p.Addr())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	began := time.Now()
	if _, err := io.ReadFull(c, make([]byte, size)); err != nil {
		t.Fatal(err)
	}
	// About 1.08 s; the bound above leaves room for a loaded machine
	// but not for half the rate (a receive buffer too small, limit.go).
	if d := time.Since(began); d < 900*time.Millisecond || d > 1400*time.Millisecond {
		t.Errorf("%d bytes at %d B/s took %v, want about %.2f s", size, rate, d, float64(size)/rate)
	}
	p.SetBandwidth(0)
	began = time.Now()
	if _, err := c.Write([]byte{1}); err != nil {
		t.Fatal(err)
	}
	if _, err := io.ReadFull(c, make([]byte, size)); err != nil {
		t.Fatal(err)
	}
	// At the old limit this would take about 1.08 s.
	if d := time.Since(began); d > 700*time.Millisecond {
		t.Errorf("%d bytes unlimited took %v", size, d)
	}
	// The proxy counts a chunk after writing it, so the count may trail
	// what the client has read by a moment.
	deadline := time.Now().Add(2 * time.Second)
	for {
		_, from := p.Forwarded()
		if from == 2*size {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("forwarded %d bytes from the target, want %d", from, 2*size)
		}
		time.Sleep(time.Millisecond) // polling a counter, with a deadline
	}
}

// TestBucketTakesMoreThanBurst: a read made before the limit was set on a
// live connection may hold more than the bucket's burst; it must pass at
// the limit's pace, not wait forever for tokens the bucket never holds.
func TestBucketTakesMoreThanBurst(t *testing.T) {
	var b bucket
	b.set(60_000)
	done := make(chan time.Duration, 1)
	began := time.Now()
	go func() {
		b.take(30_000) // 15 times the burst
		done <- time.Since(began)
	}()
	select {
	case d := <-done:
		if d < 400*time.Millisecond {
			t.Errorf("30 000 bytes at 60 000 B/s passed in %v: not limited", d)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("30 000 bytes at 60 000 B/s still waiting after 5 s")
	}
}
