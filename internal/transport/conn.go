// Package transport carries wire frames between brokers and clients over
// TCP: a handshake (Hello both ways), batched writes (every frame queued
// while a write is in progress goes out in the next single write),
// heartbeats that detect a dead peer, and a bounded outbound queue.
//
// Loss on a stream is a connection reset: when the outbound queue is full
// the connection is closed instead of dropping one frame, because the GD
// protocol's subscription handshake relies on FIFO links without holes
// (docs/CONCEPTS.md P6); the peers reconnect and the protocol recovers by nacking.
package transport

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"github.com/aerie-mq/aerie/internal/lattrace"
	"github.com/aerie-mq/aerie/internal/msg"
	"github.com/aerie-mq/aerie/internal/wire"
)

// Options of a connection.
type Options struct {
	// QueueFrames bounds the outbound queue; a full queue closes the
	// connection. A KnowledgeRun or DeliveryRun counts as the frames it
	// stands for (one per event, at least one), so the bound in events, and
	// so in bytes, is that of a peer sent a frame per event. Default 65536.
	QueueFrames int
	// Heartbeat is how often an idle side sends a heartbeat (a side that
	// wrote within the interval sends none). Default 1s.
	Heartbeat time.Duration
	// DeadAfter: a peer silent this long is dead. Default DefaultDeadAfter.
	DeadAfter time.Duration
	// MaxFrame bounds an inbound frame. Default wire.DefaultMaxFrame.
	MaxFrame int
	// Bandwidth caps the bytes per second written (0: no cap): a link's
	// bandwidth in the network config (docs/CONFIG.md).
	Bandwidth int64
	// ViewFrames: decoded events and publishes view the frames they came
	// in, each read into memory of its own, instead of owning a copy
	// (wire.Reader.ViewFrames).
	ViewFrames bool
	// AsOlder, when set, makes Accept refuse a peer announcing a later
	// version, as listeners of version 12 and earlier did, in their words:
	// a test's stand-in for a broker of that version (wire.RefusalAsOlder).
	AsOlder uint16
	// PublishRuns makes the writer send the consecutive publishes it finds
	// queued together as PublishRun frames (at most PublishRunMax
	// publishes, PublishRunBytesMax bytes each) when the peer answered
	// the Hello in wire.VersionPublishRun or later; to an older peer each
	// goes in a Publish frame of its own. A client's connection.
	PublishRuns bool
}

// DefaultDeadAfter is the links' heartbeat timeout: how long a peer may be
// silent before its connection is closed as dead. A pubend's max_retain
// must not be shorter (internal/config): it would release past a
// downstream broker that is merely slow, not yet even taken for dead.
const DefaultDeadAfter = 5 * time.Second

// The bounds of a PublishRun the writer sends: as a DeliveryRun's (shell
// RunEventsMax, RunBytesMax), so a run holds up a reader no longer than
// one of those, and its frame, with the type byte and count, is a small
// allocation (msg.SmallAllocMax) at the reader, which allocates each run
// frame.
const (
	PublishRunMax      = 256
	PublishRunBytesMax = msg.SmallAllocMax - 8
)

func (o Options) withDefaults() Options {
	if o.QueueFrames <= 0 {
		o.QueueFrames = 1 << 16
	}
	if o.Heartbeat <= 0 {
		o.Heartbeat = time.Second
	}
	if o.DeadAfter <= 0 {
		o.DeadAfter = DefaultDeadAfter
	}
	if o.MaxFrame <= 0 {
		o.MaxFrame = wire.DefaultMaxFrame
	}
	return o
}

// newReader is the frame reader of a connection.
func newReader(nc net.Conn, opts Options) *wire.Reader {
	r := wire.NewReader(newBufReader(nc), opts.MaxFrame)
	if opts.ViewFrames {
		r.ViewFrames()
	}
	return r
}

// ErrQueueFull closes a connection whose peer does not keep up.
var ErrQueueFull = errors.New("transport: outbound queue full")

// Conn is one established, handshaken connection.
type Conn struct {
	Peer msg.Hello
	nc   net.Conn
	opts Options

	mu    sync.Mutex
	queue []msg.Msg
	// queued counts queue in frames as QueueFrames does (queueWeight).
	queued int
	// urgent holds high-priority control messages (Gryphon CC's DCQ and
	// UCA, §3.1): the writer takes them before the queue, so they do not
	// wait behind a backlog of data. Nothing relies on their order with
	// other messages. Bounded like the queue.
	urgent  []msg.Msg
	wake    chan struct{}
	closed  bool   // no more Sends; the writer winds the connection down
	goodbye string // reason to send the peer before closing
	flush   bool   // write what is queued before the goodbye
	running bool   // the writer goroutine owns the socket
	fin     sync.Once
	err     error
	done    chan struct{} // closed once the socket is closed
	pace    pacer         // the writer's bandwidth cap
	// bw is the bandwidth cap in bytes/s (0: none): Options.Bandwidth
	// until SetBandwidth changes it, which may happen while the writer
	// runs (a config reload).
	bw atomic.Int64
	// traceW and traceR are the hops at which the bench's latency
	// breakdown marks frames written and read (lattrace.ConnHop); -2, the
	// default, marks nothing.
	traceW, traceR int
	// run is the writer's PublishRun, reused from run to run.
	run msg.PublishRun
	// room, while a sender waits in WaitRoom, is closed (and forgotten)
	// when the writer takes the queue or the connection closes.
	room chan struct{}
}

// Handshake sends our Hello, reads the peer's, and checks it. The deadline
// of ctx bounds the exchange.
func Handshake(ctx context.Context, nc net.Conn, me msg.Hello, opts Options) (*Conn, *wire.Reader, error) {
	opts = opts.withDefaults()
	setDeadline(ctx, nc)
	buf, err := wire.AppendFrame(nil, me)
	if err == nil {
		_, err = nc.Write(buf)
	}
	if err != nil {
		return nil, nil, fmt.Errorf("transport: send hello to %s: %w", nc.RemoteAddr(), err)
	}
	r := newReader(nc, opts)
	m, err := r.Next()
	if err != nil {
		return nil, nil, fmt.Errorf("transport: read hello from %s: %w", nc.RemoteAddr(), err)
	}
	h, ok := m.(msg.Hello)
	if bye, isBye := m.(msg.Goodbye); isBye {
		return nil, nil, refused(nc.RemoteAddr().String(), bye.Reason)
	}
	if !ok {
		return nil, nil, fmt.Errorf("transport: %s sent %v before hello", nc.RemoteAddr(), m)
	}
	if err := wire.CheckHello(h); err != nil {
		goodbye(nc, err.Error())
		return nil, nil, err
	}
	if h.Version > me.Version {
		err := fmt.Errorf("%w: answered in protocol version %d to a Hello of version %d", wire.ErrVersion, h.Version, me.Version)
		goodbye(nc, err.Error())
		return nil, nil, err
	}
	nc.SetDeadline(time.Time{})
	return newConn(nc, h, opts), r, nil
}

// OlderPeer returns the version to dial again in when err is a handshake
// that a listener of an older version refused for ours, and the dialer
// speaks that version (lo ≤ it < hi, our Hello's); 0 otherwise.
func OlderPeer(err error, lo, hi uint16) uint16 {
	var ref *RefusedError
	if errors.As(err, &ref) && ref.Version >= lo && ref.Version < hi {
		return ref.Version
	}
	return 0
}

func newConn(nc net.Conn, peer msg.Hello, opts Options) *Conn {
	c := &Conn{Peer: peer, nc: nc, opts: opts, wake: make(chan struct{}, 1), done: make(chan struct{}), traceW: -2, traceR: -2}
	c.bw.Store(max(opts.Bandwidth, 0))
	return c
}

func newBufReader(nc net.Conn) *bufio.Reader { return bufio.NewReaderSize(nc, 64<<10) }

// SetTraceHops sets the hops at which the bench's latency breakdown marks
// this connection's frames (lattrace.ConnHop), before Run.
func (c *Conn) SetTraceHops(write, read int) { c.traceW, c.traceR = write, read }

// SetBandwidth caps the bytes per second written (0: no cap), for a cap
// that depends on who the peer turned out to be, or that an operator
// changed while the connection runs (a config reload). The writer applies
// it from its next chunk on.
func (c *Conn) SetBandwidth(bw int64) { c.bw.Store(max(bw, 0)) }

// Send queues m; it never blocks. It reports false (and closes the
// connection) when the queue is full or the connection is closed.
func (c *Conn) Send(m msg.Msg) bool {
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		return false
	}
	if c.queued >= c.opts.QueueFrames || len(c.urgent) >= c.opts.QueueFrames {
		c.mu.Unlock()
		c.CloseWith(ErrQueueFull, "peer too slow: outbound queue full")
		return false
	}
	switch m.(type) {
	case msg.DCQ, msg.UCA:
		c.urgent = append(c.urgent, m)
	default:
		c.queue = append(c.queue, m)
		c.queued += queueWeight(m)
	}
	c.mu.Unlock()
	select {
	case c.wake <- struct{}{}:
	default:
	}
	return true
}

// Queued is how many frames wait for the writer (as QueueFrames counts).
func (c *Conn) Queued() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.queued
}

// WaitRoom blocks while n or more frames wait for the writer: until the
// writer takes them (to write), the connection closes, or ctx ends (its
// error is returned). It is the back-pressure of a sender that gets no
// answer to wait for (a publish that asks for no ack): without it, such a
// sender could fill the queue faster than the socket drains it, and a full
// queue closes the connection. Another sender may fill the room before
// the caller sends: check Queued again, under the lock that orders sends.
func (c *Conn) WaitRoom(ctx context.Context, n int) error {
	c.mu.Lock()
	if c.closed || c.queued < n {
		c.mu.Unlock()
		return nil
	}
	if c.room == nil {
		c.room = make(chan struct{})
	}
	room := c.room
	c.mu.Unlock()
	select {
	case <-room:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// freeRoom wakes the senders waiting in WaitRoom (mu held).
func (c *Conn) freeRoom() {
	if c.room != nil {
		close(c.room)
		c.room = nil
	}
}

// queueWeight is how many frames m counts as in the queue (QueueFrames).
func queueWeight(m msg.Msg) int {
	switch r := m.(type) {
	case *msg.KnowledgeRun:
		return max(len(r.Events), 1)
	case *msg.DeliveryRun:
		return max(len(r.Events), 1)
	}
	return 1
}

// Run pumps the connection until it fails or ctx ends: every inbound
// message goes to deliver (from one goroutine, in order); outbound frames
// are written in batches; heartbeats flow both ways.
func (c *Conn) Run(ctx context.Context, r *wire.Reader, deliver func(msg.Msg)) error {
	return c.RunBatch(ctx, r, func(ms []msg.Msg) []msg.Msg {
		for _, m := range ms {
			deliver(m)
		}
		clear(ms)
		return ms[:0]
	})
}

// MaxBatch bounds how many inbound messages RunBatch hands over at once.
const MaxBatch = 64

// RunBatch is Run handing inbound messages over in bursts: every whole
// frame that one read from the socket brought in (at most MaxBatch) goes
// to deliver in one call, in order. A receiver that queues them for
// another goroutine then pays one hand-over per burst instead of one per
// message. deliver owns the slice it is given and returns an empty one
// (with capacity, or nil) for the next burst.
func (c *Conn) RunBatch(ctx context.Context, r *wire.Reader, deliver func([]msg.Msg) []msg.Msg) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		c.finish()
		return c.Err()
	}
	c.running = true
	c.mu.Unlock()
	go func() {
		<-ctx.Done()
		c.CloseWith(ctx.Err(), "")
	}()
	errc := make(chan error, 1)
	go func() { errc <- c.writeLoop() }()
	var refreshed time.Time
	var batch []msg.Msg
	for {
		// The read deadline is what detects a silent peer. Moving it costs a
		// runtime timer update (about 5 % of a busy broker's CPU when done
		// per frame), so move it at most every DeadAfter/8: a peer is then
		// declared dead after between 7/8 and all of DeadAfter of silence.
		// Checked once per burst, before the read that may block: after
		// deliver held this loop (an application that stopped reading), the
		// rest of a frame read ahead in part must not meet a deadline that
		// passed meanwhile.
		if now := time.Now(); now.Sub(refreshed) >= c.opts.DeadAfter/8 {
			c.nc.SetReadDeadline(now.Add(c.opts.DeadAfter))
			refreshed = now
		}
		m, err := r.Next()
		// A closing connection (e.g. after a protocol error) reads to EOF
		// and acts on nothing.
		closing := c.isClosed()
		for err == nil && !closing {
			switch mm := m.(type) {
			case msg.Heartbeat:
			case msg.Hello:
				c.CloseWith(fmt.Errorf("transport: %s sent a second hello", c.Peer.ID), "protocol error: hello after the handshake")
				closing = true
			case msg.Goodbye:
				c.CloseWith(fmt.Errorf("transport: %s said goodbye: %s", c.Peer.ID, mm.Reason), "")
				closing = true
			default:
				batch = append(batch, m)
			}
			if closing || len(batch) >= MaxBatch || !r.Ready() {
				break
			}
			m, err = r.Next() // buffered: does not block
		}
		if len(batch) > 0 {
			if c.traceR > -2 {
				now := time.Now().UnixNano()
				for _, m := range batch {
					lattrace.MarkMsg(lattrace.Slot(c.traceR, lattrace.Read), m, now)
				}
			}
			batch = deliver(batch)
		}
		if err != nil {
			// Also the normal end of a close we started: the peer saw our
			// FIN (and Goodbye) and closed its side.
			c.CloseWith(err, "")
			<-errc
			return c.Err()
		}
	}
}

func (c *Conn) writeLoop() error {
	hb := time.NewTicker(c.opts.Heartbeat)
	defer hb.Stop()
	var buf []byte
	var batch []msg.Msg
	var wrote time.Time // when the last batch was written
	for {
		select {
		case now := <-hb.C:
			// Only an idle side heartbeats: frames written within the
			// interval already tell the peer this side is alive (one
			// write and one wake-up less per connection and second, which
			// counts at an SHB with thousands of subscribers). The peer
			// then hears something at least every 2 × Heartbeat.
			if now.Sub(wrote) < c.opts.Heartbeat {
				continue
			}
			c.mu.Lock()
			if len(c.queue) == 0 && len(c.urgent) == 0 && !c.closed {
				c.queue = append(c.queue, msg.Heartbeat{})
			}
			c.mu.Unlock()
		case <-c.wake:
		}
		c.mu.Lock()
		closed, flush := c.closed, c.flush
		batch = append(append(batch[:0], c.urgent...), c.queue...)
		clear(c.urgent)
		clear(c.queue)
		c.urgent, c.queue, c.queued = c.urgent[:0], c.queue[:0], 0
		c.freeRoom()
		c.mu.Unlock()
		if !closed || flush {
			buf = c.writeBatch(buf, batch)
			if len(batch) > 0 {
				wrote = time.Now()
			}
		}
		clear(batch)
		if closed {
			c.finish()
			return nil
		}
	}
}

// writeBatch encodes and writes batch in chunks of about 1 MiB, each with
// its own deadline: a large backlog on a slow but healthy link is not
// mistaken for a dead peer, and the buffer stays small.
func (c *Conn) writeBatch(buf []byte, batch []msg.Msg) []byte {
	chunk := 1 << 20
	if bw := c.bw.Load(); bw > 0 {
		chunk = int(min(max(bw/20, 4<<10), 1<<20)) // about 50 ms of the cap
	}
	buf = buf[:0]
	marked := 0 // frames of batch before this one were marked written (lattrace)
	write := func(upto int) bool {
		if bw := c.bw.Load(); bw > 0 {
			// A paced batch takes seconds to write when the link is
			// congested: a DCQ or UCA queued meanwhile goes ahead of the
			// rest of it, between two whole frames, rather than after it
			// (Gryphon CC §3.1). The SHB learns from the DCQ how far behind
			// the pubend it is; behind the backlog it would not.
			buf = c.takeUrgent(buf)
			if c.dropping() {
				return false // closed meanwhile: the rest of a paced backlog is dropped like the queue
			}
			time.Sleep(c.pace.wait(time.Now(), len(buf), bw))
		}
		c.nc.SetWriteDeadline(time.Now().Add(c.opts.DeadAfter))
		if _, err := c.nc.Write(buf); err != nil {
			c.CloseWith(err, "")
			return false
		}
		if c.traceW > -2 {
			now := time.Now().UnixNano()
			for _, m := range batch[marked:upto] {
				lattrace.MarkMsg(lattrace.Slot(c.traceW, lattrace.Written), m, now)
			}
			marked = upto
		}
		buf = buf[:0]
		return true
	}
	runs := c.opts.PublishRuns && c.Peer.Version >= wire.VersionPublishRun
	for i := 0; i < len(batch); i++ {
		m := batch[i]
		if runs {
			if n := c.publishRun(batch[i:]); n > 1 {
				m = &c.run
				i += n - 1
			}
		}
		var err error
		buf, err = wire.AppendFrame(buf, m)
		clear(c.run.Publishes) // the publishes' bytes are the client's: not kept here
		c.run.Publishes = c.run.Publishes[:0]
		if err != nil {
			c.CloseWith(err, "internal encoding error")
			return buf[:0]
		}
		if len(buf) >= chunk && !write(i+1) {
			return buf[:0]
		}
	}
	if len(buf) > 0 {
		write(len(batch))
	}
	if cap(buf) > 4*chunk {
		buf = nil // do not keep a one-off peak for the connection's life
	}
	return buf
}

// publishRun gathers into c.run the publishes at the start of ms, up to
// the first other message or a run's bounds, and returns how many it took.
func (c *Conn) publishRun(ms []msg.Msg) int {
	size := 0
	for _, m := range ms {
		var p *msg.Publish
		switch v := m.(type) {
		case *msg.Publish: // the client's form
			p = v
		case msg.Publish: // a resend
			p = &v
		}
		if p == nil || len(c.run.Publishes) == PublishRunMax ||
			len(c.run.Publishes) > 0 && p.NoAck != c.run.Publishes[0].NoAck { // a run asks for acks for all or none
			break
		}
		if size += p.BodySize(); size > PublishRunBytesMax && len(c.run.Publishes) > 0 {
			break
		}
		c.run.Publishes = append(c.run.Publishes, *p)
	}
	return len(c.run.Publishes)
}

// takeUrgent returns buf (whole frames) with the urgent frames queued
// meanwhile encoded in front of it.
func (c *Conn) takeUrgent(buf []byte) []byte {
	c.mu.Lock()
	if len(c.urgent) == 0 {
		c.mu.Unlock()
		return buf
	}
	urgent := append([]msg.Msg(nil), c.urgent...)
	clear(c.urgent)
	c.urgent = c.urgent[:0]
	c.mu.Unlock()
	var front []byte
	for _, m := range urgent {
		var err error
		if front, err = wire.AppendFrame(front, m); err != nil {
			continue // a DCQ or UCA always encodes; a lost one costs one round (§3.1)
		}
	}
	return append(front, buf...)
}

// finish sends the Goodbye (after every byte already written, never
// interleaved with a frame), half-closes so the peer reads it before EOF,
// waits briefly for the peer to close (closing with unread data would make
// TCP reset the connection and discard the Goodbye), then closes.
func (c *Conn) finish() { c.fin.Do(c.finishOnce) }

func (c *Conn) finishOnce() {
	c.mu.Lock()
	reason := c.goodbye
	c.mu.Unlock()
	if reason != "" {
		if b, err := wire.AppendFrame(nil, msg.Goodbye{Reason: reason}); err == nil {
			c.nc.SetWriteDeadline(time.Now().Add(c.opts.DeadAfter))
			if _, err := c.nc.Write(b); err == nil {
				if tc, ok := c.nc.(interface{ CloseWrite() error }); ok {
					tc.CloseWrite()
					c.nc.SetReadDeadline(time.Now().Add(c.opts.DeadAfter))
					drainUntilEOF(c.nc)
				}
			}
		}
	}
	c.nc.Close()
	close(c.done)
}

func drainUntilEOF(nc net.Conn) {
	var b [4096]byte
	for {
		if _, err := nc.Read(b[:]); err != nil {
			return
		}
	}
}

// CloseWith starts closing the connection: queued frames are dropped, the
// peer gets a Goodbye with reason (when non-empty), and err is recorded as
// the cause. It does not wait; Done is closed when the socket is.
func (c *Conn) CloseWith(err error, reason string) {
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		return
	}
	c.closed, c.err, c.goodbye = true, err, reason
	c.queue, c.urgent, c.queued = nil, nil, 0
	c.freeRoom()
	running := c.running
	c.mu.Unlock()
	if !running {
		go c.finish() // no writer owns the socket (refused before Run)
		return
	}
	select {
	case c.wake <- struct{}{}:
	default:
	}
}

// CloseFlush closes the connection after writing everything already queued
// and then a Goodbye with reason: a graceful shutdown, where the last acks
// must still reach their clients.
func (c *Conn) CloseFlush(reason string) {
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		return
	}
	c.closed, c.err, c.goodbye, c.flush = true, errors.New("transport: closed: "+reason), reason, true
	c.freeRoom()
	running := c.running
	c.mu.Unlock()
	if !running {
		go c.finish()
		return
	}
	select {
	case c.wake <- struct{}{}:
	default:
	}
}

// Close closes the connection cleanly.
func (c *Conn) Close() { c.CloseWith(errors.New("transport: closed"), "") }

// dropping reports whether the connection is closed without a flush: what
// is not yet written is dropped.
func (c *Conn) dropping() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.closed && !c.flush
}

func (c *Conn) isClosed() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.closed
}

// Err returns why the connection closed (nil while open).
func (c *Conn) Err() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.err
}

// Done is closed when the connection is.
func (c *Conn) Done() <-chan struct{} { return c.done }

// RemoteAddr is the peer's address.
func (c *Conn) RemoteAddr() string { return c.nc.RemoteAddr().String() }

// pacer spaces writes so that they average at most a bandwidth: each write
// of n bytes waits until the previous ones have had their share of time.
type pacer struct{ next time.Time }

// pacerSlack is how late a write may come and still use its slot.
const pacerSlack = 25 * time.Millisecond

// wait returns how long to wait at now before writing n bytes at bw bytes
// per second, and books the write. Idle time is not saved up: a link that
// was quiet gets no burst above the cap. But a late wake-up is: the OS
// sleeps longer than asked (milliseconds on a loaded host), and a write up
// to pacerSlack after its slot is booked from the slot, else every
// oversleep would take its share off the link's rate.
func (p *pacer) wait(now time.Time, n int, bw int64) time.Duration {
	start := now
	if !p.next.IsZero() && now.Sub(p.next) <= pacerSlack {
		start = p.next
	}
	p.next = start.Add(time.Duration(float64(n) / float64(bw) * float64(time.Second)))
	return max(start.Sub(now), 0)
}
