// Package faultnet is a TCP proxy that injects the link failures of seed 000
// §4.2 between real processes: a cut (every connection closed, new ones
// refused) and a stall (connections stay open and keep accepting bytes, but
// nothing is forwarded — the failure neighbours notice late). It can also
// limit the bandwidth from the target, changeable at any time (limit.go).
package faultnet

import (
	"context"
	"errors"
	"io"
	"net"
	"sync"
	"sync/atomic"
)

// Mode is the proxy's state.
type Mode int

const (
	Pass  Mode = iota // forward everything
	Stall             // accept and read, forward nothing
	Cut               // close every connection, refuse new ones
)

// Proxy forwards connections from its address to a target.
type Proxy struct {
	target string
	ln     net.Listener

	mu    sync.Mutex
	mode  Mode
	conns map[net.Conn]struct{}
	gate  chan struct{} // closed while passing; stalled copiers wait on it
	wg    sync.WaitGroup

	// Bytes forwarded towards the target and back from it, for benchmarks
	// that measure what crosses a link.
	toTarget, fromTarget atomic.Int64

	// down limits what is forwarded from the target (SetBandwidth).
	down bucket
}

// Forwarded returns the bytes forwarded so far towards the target (from
// the dialing side) and from the target (towards the dialing side).
func (p *Proxy) Forwarded() (toTarget, fromTarget int64) {
	return p.toTarget.Load(), p.fromTarget.Load()
}

// Listen starts a proxy on 127.0.0.1 (random port) towards target.
func Listen(ctx context.Context, target string) (*Proxy, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	p := &Proxy{target: target, ln: ln, conns: map[net.Conn]struct{}{}, gate: make(chan struct{})}
	close(p.gate)
	p.wg.Add(1)
	go p.accept(ctx)
	go func() {
		<-ctx.Done()
		p.Close()
	}()
	return p, nil
}

// Addr is where to connect instead of the target.
func (p *Proxy) Addr() string { return p.ln.Addr().String() }

// Set switches the mode. Leaving Stall releases what was held only if the
// new mode is Pass; a Cut drops it with the connections.
func (p *Proxy) Set(m Mode) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if m == p.mode {
		return
	}
	switch m {
	case Pass:
		select {
		case <-p.gate:
		default:
			close(p.gate)
		}
	case Stall:
		p.gate = make(chan struct{})
	case Cut:
		for c := range p.conns {
			c.Close()
		}
		p.conns = map[net.Conn]struct{}{}
		select {
		case <-p.gate:
		default:
			close(p.gate) // wake stalled copiers so they notice their conns are gone
		}
	}
	p.mode = m
}

func (p *Proxy) accept(ctx context.Context) {
	defer p.wg.Done()
	for {
		c, err := p.ln.Accept()
		if err != nil {
			return
		}
		p.mu.Lock()
		if p.mode == Cut {
			p.mu.Unlock()
			c.Close()
			continue
		}
		p.mu.Unlock()
		var d net.Dialer
		t, err := d.DialContext(ctx, "tcp", p.target)
		if err != nil {
			c.Close()
			continue
		}
		p.mu.Lock()
		if p.mode == Cut { // cut while dialing
			p.mu.Unlock()
			c.Close()
			t.Close()
			continue
		}
		p.conns[c], p.conns[t] = struct{}{}, struct{}{}
		p.mu.Unlock()
		if p.down.limited() {
			shrinkReadBuffer(t)
		}
		p.wg.Add(2)
		go p.copy(t, c, &p.toTarget, nil)
		go p.copy(c, t, &p.fromTarget, &p.down)
	}
}

// copy forwards src to dst, holding bytes back while stalled and, with a
// bucket, pacing them to its bandwidth.
func (p *Proxy) copy(dst, src net.Conn, count *atomic.Int64, limit *bucket) {
	defer p.wg.Done()
	defer dst.Close()
	defer src.Close()
	buf := make([]byte, 32<<10)
	for {
		rd := buf
		if limit != nil && limit.limited() {
			rd = buf[:limitChunk]
		}
		n, err := src.Read(rd)
		if n > 0 && limit != nil {
			limit.take(n)
		}
		if n > 0 {
			p.mu.Lock()
			gate := p.gate
			p.mu.Unlock()
			<-gate // a stall holds here: the source keeps writing into our socket buffers
			p.mu.Lock()
			_, alive := p.conns[dst]
			p.mu.Unlock()
			if !alive {
				return // cut while stalled: what was held is lost
			}
			if _, werr := dst.Write(buf[:n]); werr != nil {
				return
			}
			count.Add(int64(n))
		}
		if err != nil {
			if !errors.Is(err, io.EOF) {
				return
			}
			return
		}
	}
}

// Close stops the proxy and every connection through it.
func (p *Proxy) Close() {
	p.ln.Close()
	p.Set(Cut)
	p.wg.Wait()
}
