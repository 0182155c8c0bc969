// Package client is the Go client of an aerie network: publish events to a
// pubend with exactly-once semantics across reconnects and broker restarts,
// and subscribe by topic pattern with in-order, gapless delivery per pubend
// from the subscription's start token on.
//
//	c, err := client.Dial(ctx, "127.0.0.1:7201,127.0.0.1:7202", client.Options{ID: "orders-svc"})
//	ack, err := c.Publish(ctx, client.Message{Topic: "orders.eu", Props: map[string]any{"qty": int64(3)}})
//	sub, err := c.Subscribe(ctx, "orders.>")
//	for ev := range sub.Events() { qty, _ := ev.Props.Int("qty"); ... }
//
// A client connects to a broker's client port: the `clients` address of
// its [[broker]] table in the network config (docs/CONFIG.md), which
// `aerie dev` prints. Publish at the client port of a broker that hosts
// pubends (a PHB, or any member of a replicated PHB cell); subscribe at
// the client port of a subscriber-hosting broker (an SHB), where durable
// subscriptions need the broker's data directory. The `listen` port is
// for brokers only, and the `mqtt` port speaks MQTT, not this protocol.
//
// One Client is one connection, read in order: a subscription whose Events
// are not consumed holds up everything behind it on that connection,
// including acks of this client's publishes, until the broker disconnects
// the slow subscriber. Give independent consumers their own Client.
package client

import (
	"context"
	"crypto/rand"
	"crypto/tls"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"strings"
	"sync"
	"time"

	"github.com/aerie-mq/aerie/internal/lattrace"
	"github.com/aerie-mq/aerie/internal/msg"
	"github.com/aerie-mq/aerie/internal/tick"
	"github.com/aerie-mq/aerie/internal/transport"
	"github.com/aerie-mq/aerie/internal/wire"
)

// MaxEventBytes bounds an event's encoded size (topic, properties,
// payload); larger events are refused before they are sent. The broker
// enforces the same limit.
const MaxEventBytes = msg.MaxEventBytes

// Errors a caller can test with errors.Is.
var (
	ErrClosed = errors.New("aerie: client closed")
	// ErrRejected: the broker refused a publish or a subscription, or
	// the client did before sending it, for a reason the broker gives
	// too (a bad topic, pattern or selector, an event above the limit),
	// or a publish its pubend could not log (its disk full: the error
	// names the pubend and says so; the publish may be sent again later).
	ErrRejected     = errors.New("aerie: rejected by broker")
	ErrDisconnected = errors.New("aerie: subscription ended by disconnection")
	// ErrRefused: the broker refused the connection for a reason retrying
	// does not cure (bad or missing credentials, TLS needed, a
	// certificate it does not trust). Dial returns it at once, even with
	// RetryDial; the error names the broker's reason.
	ErrRefused = errors.New("aerie: refused")
)

// Options configure a client.
type Options struct {
	// ID identifies the client; publishes are deduplicated per (ID, seq), so
	// a publisher that restarts and must not duplicate keeps its ID.
	// Default: random.
	ID string
	// Pubend pins publishes to one pubend; default: the broker picks one by
	// a hash of ID, so all of this client's publishes stay in order.
	Pubend string
	// SubscriptionBuffer is the number of events buffered per subscription
	// before the connection stops reading (and the broker, once its own
	// bounded queue is full, disconnects the subscriber). Default 4096.
	SubscriptionBuffer int
	// RetryDial makes Dial keep trying (with backoff) until its context
	// ends, instead of failing once every address refused — for clients
	// that may start before their broker.
	RetryDial bool
	// Resubscribe keeps subscriptions across a lost connection: the client
	// subscribes again on the next connection (the next address of the
	// list first), drops events it already delivered, and delivers a Gap
	// notice for each pubend whose new start lies beyond what it had:
	// events there may have been missed. Without it a lost connection ends
	// every subscription with ErrDisconnected. Durable subscriptions do
	// not miss events; plain ones can only say what they may have missed.
	Resubscribe bool
	// MaxInflight bounds unacknowledged publishes; PublishAsync blocks at
	// the bound until an ack frees a slot (back-pressure, and a bound on
	// what a reconnect resends). Default 10000.
	MaxInflight int
	Logger      *slog.Logger
	// TLS, when set, connects with TLS: RootCAs must hold the CA of the
	// brokers' certificates, Certificates the client certificate if the
	// client has one. ServerName defaults to the host of each address.
	TLS *tls.Config
	// User and Password authenticate the client at a broker that has
	// users (docs/SECURITY.md); a broker without users ignores them.
	User, Password string
}

// Message is what a publisher sends. Publish, PublishAsync and
// PublishFunc encode Props before they return, so the caller may reuse the
// map for the next message; Payload is sent as it is, and resent after a
// reconnect until acknowledged: do not modify it before then.
type Message struct {
	Topic   string
	Props   map[string]any // int64 (or int), float64, bool, string
	Payload []byte
}

// Ack confirms a publish is durable at its pubend. Duplicate: the publish
// had been logged before (a retry, or a rerun with the same client ID and
// sequence numbers) and was not logged again.
type Ack struct {
	Pubend    string
	Tick      uint64
	Duplicate bool
}

// Event is a delivered message, or, when Gap is not nil, a notice in its
// place (see Gap); the notice's other fields are empty.
type Event struct {
	Pubend  string
	Tick    uint64
	Topic   string
	Props   Props // read in place: ev.Props.Int("qty"), ev.Props.Get("region")
	Payload []byte
	// PubTime is the pubend's time for the tick (docs/CONCEPTS.md "Ticks"), to the
	// millisecond: a tick is the pubend's millisecond and a sequence
	// number within it, which orders the events of one millisecond but
	// carries no finer time. An application that needs finer timestamps
	// puts them in a property of its own.
	PubTime time.Time
	// Publisher and Seq identify the publish (client id and its sequence
	// number), e.g. for an idempotent consumer.
	Publisher string
	Seq       uint64
	// Gap, when not nil, says that events of Gap.Pubend in ticks
	// (Gap.From, Gap.To] may be missing from this subscription.
	Gap *Gap
	// Progress, on a durable subscription, marks a notice in place of an
	// event: nothing more matched, and Checkpoint moved.
	Progress bool
	// Checkpoint, on a durable subscription, is the checkpoint token once
	// this event (or notice) is consumed: save it, acknowledge it
	// (Subscription.Ack), and resume from it (Durable.From). On a group's
	// subscription (SubscribeGroup) it names this event alone:
	// Subscription.Ack(ev.Checkpoint) acknowledges it to the group.
	Checkpoint string
}

// Gap is the notice that events of one pubend in ticks (From, To] may be
// missing: a plain subscription moved to another connection (Options.
// Resubscribe) and its new start lies beyond what it had delivered, or a
// durable subscription asked for ticks its pubend had already discarded
// (an administrator's max_retain, or ticks it acknowledged before).
type Gap struct {
	Pubend   string
	From, To uint64
}

// Client is a connection to one broker of a list, re-established
// automatically, through the next address when one fails.
type Client struct {
	addrs []string
	at    int // the address in use, or to try first
	opts  Options
	log   *slog.Logger

	mu      sync.Mutex
	conn    *transport.Conn
	connUp  chan struct{} // closed when a connection is up; replaced on loss
	seq     uint64
	pubend  msg.PubendID // the pubend of this client's publishes, once known
	pending pendingSet
	subs    map[string]*Subscription
	nextSub int
	closed  bool
	cancel  context.CancelFunc
	done    chan struct{}
	window  window // bounds the unacknowledged publishes
	// slab is where the next publishes are carved from, publishChunk at a
	// time: one allocation for many (a chunk lives while one of its
	// publishes is unacknowledged).
	slab []publish
	// acked is dispatch's scratch for the publishes one PubAckRange
	// answers (used on the connection's reader goroutine only).
	acked []*publish
}

type publish struct {
	seq  uint64
	req  msg.Publish
	done func(Result) // called once with the outcome (PublishFunc)
}

// Dial connects to a broker's client address; addrs may list several,
// separated by commas, and the client uses the first that answers. It
// returns once the first connection is up (or ctx ends); later losses are
// repaired in the background, through the next address first, with backoff.
func Dial(ctx context.Context, addrs string, opts Options) (*Client, error) {
	var list []string
	for _, a := range strings.Split(addrs, ",") {
		if a = strings.TrimSpace(a); a != "" {
			list = append(list, a)
		}
	}
	if len(list) == 0 {
		return nil, fmt.Errorf("aerie: no broker address in %q", addrs)
	}
	if opts.ID == "" {
		b := make([]byte, 8)
		rand.Read(b)
		opts.ID = "c-" + hex.EncodeToString(b)
	}
	if opts.SubscriptionBuffer <= 0 {
		opts.SubscriptionBuffer = 4096
	}
	if opts.MaxInflight <= 0 {
		opts.MaxInflight = 10000
	}
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	runCtx, cancel := context.WithCancel(context.Background())
	c := &Client{addrs: list, opts: opts, log: opts.Logger.With("client", opts.ID), connUp: make(chan struct{}),
		subs: map[string]*Subscription{}, cancel: cancel, done: make(chan struct{}),
	}
	c.window = newWindow(&c.mu, opts.MaxInflight)
	first := make(chan error, 1)
	go c.run(runCtx, first)
	select {
	case err := <-first:
		if err != nil {
			c.Close()
			return nil, err
		}
		return c, nil
	case <-ctx.Done():
		c.Close()
		return nil, fmt.Errorf("aerie: connect to %s: %w", addrs, ctx.Err())
	}
}

// ID returns the client's id.
func (c *Client) ID() string { return c.opts.ID }

func (c *Client) run(ctx context.Context, first chan<- error) {
	defer func() {
		c.failPending()
		close(c.done)
	}()
	backoff := 50 * time.Millisecond
	for ctx.Err() == nil {
		conn, r, err := c.connect(ctx)
		if err != nil {
			if first != nil && (!c.opts.RetryDial || errors.Is(err, ErrRefused)) {
				first <- fmt.Errorf("aerie: connect: %w", err)
				return
			}
			c.log.Debug("connect failed; retrying", "err", err)
			select {
			case <-ctx.Done():
				return
			case <-time.After(backoff):
			}
			backoff = min(2*backoff, 2*time.Second)
			continue
		}
		backoff = 50 * time.Millisecond
		c.mu.Lock()
		c.conn = conn
		close(c.connUp)
		// Resend every unacknowledged publish: the pubend deduplicates by
		// (client id, seq), so a publish acked-but-ack-lost is not doubled.
		for _, s := range c.pending.inOrder() {
			conn.Send(c.pinned(s.req))
		}
		for _, s := range c.subs {
			if s.isMoving() {
				conn.Send(s.request())
			}
		}
		c.mu.Unlock()
		if first != nil {
			first <- nil
			first = nil
		}
		err = conn.Run(ctx, r, c.dispatch)
		c.mu.Lock()
		c.conn = nil
		c.connUp = make(chan struct{})
		for name, s := range c.subs {
			// A durable subscription always resumes, from its checkpoint.
			if (c.opts.Resubscribe || s.durable) && ctx.Err() == nil {
				s.moved()
				continue
			}
			s.end(fmt.Errorf("%w: %v", ErrDisconnected, err))
			delete(c.subs, name)
		}
		lost := c.addrs[c.at]
		c.at = (c.at + 1) % len(c.addrs) // a broker that failed is tried last
		c.mu.Unlock()
		if ctx.Err() == nil {
			c.log.Warn("connection lost; reconnecting", "addr", lost, "err", err)
		}
	}
}

// connect tries each address once, from the one in use, and keeps the
// first that answers.
func (c *Client) connect(ctx context.Context) (*transport.Conn, *wire.Reader, error) {
	c.mu.Lock()
	start := c.at
	c.mu.Unlock()
	var errs []error
	for i := range c.addrs {
		at := (start + i) % len(c.addrs)
		conn, r, err := c.dial(ctx, c.addrs[at])
		if err == nil {
			c.mu.Lock()
			c.at = at
			c.mu.Unlock()
			return conn, r, nil
		}
		errs = append(errs, fmt.Errorf("%s: %w", c.addrs[at], err))
	}
	return nil, nil, errors.Join(errs...)
}

// dial connects to the broker at addr. A broker of an older version that
// refuses ours is dialed again in its own (PROTOCOL.md §1, "Versions on a
// link"), which this client speaks down to wire.MinBrokerVersion.
func (c *Client) dial(ctx context.Context, addr string) (*transport.Conn, *wire.Reader, error) {
	conn, r, err := c.dialAs(ctx, addr, wire.Version)
	if older := transport.OlderPeer(err, wire.MinBrokerVersion, wire.Version); older != 0 {
		c.log.Info("broker speaks an older protocol version: connecting in it", "addr", addr, "version", older)
		conn, r, err = c.dialAs(ctx, addr, older)
	}
	if err != nil {
		var ref *transport.RefusedError
		if errors.As(err, &ref) {
			return nil, nil, fmt.Errorf("%w: %s", ErrRefused, ref.Reason)
		}
		return nil, nil, err
	}
	return conn, r, nil
}

// dialAs is dial announcing version v.
func (c *Client) dialAs(ctx context.Context, addr string, v uint16) (*transport.Conn, *wire.Reader, error) {
	d := net.Dialer{Timeout: 5 * time.Second}
	nc, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		return nil, nil, err
	}
	hctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	if c.opts.TLS != nil {
		cfg := c.opts.TLS.Clone()
		if cfg.ServerName == "" {
			cfg.ServerName, _, _ = net.SplitHostPort(addr)
		}
		tc := tls.Client(nc, cfg)
		if err := tc.HandshakeContext(hctx); err != nil {
			nc.Close()
			var verr *tls.CertificateVerificationError
			if errors.As(err, &verr) {
				return nil, nil, fmt.Errorf("%w: TLS: %v", ErrRefused, err)
			}
			return nil, nil, fmt.Errorf("TLS handshake (does the broker speak TLS on this port?): %w", err)
		}
		nc = tc
	}
	// The queue must hold every resent publish plus new traffic. A
	// delivered event views its own frame (no copy out of the read buffer;
	// it pins nothing but that frame). Publishes queued while the writer
	// is busy leave together in PublishRun frames to a broker that answers
	// in version 13 or later (transport.Options.PublishRuns).
	conn, r, err := transport.Handshake(hctx, nc, msg.Hello{Version: v, Role: msg.RoleClient, ID: c.opts.ID},
		transport.Options{QueueFrames: 2*c.opts.MaxInflight + 1024, ViewFrames: true, PublishRuns: true})
	if err == nil {
		_, err = transport.Login(hctx, conn, r, c.opts.User, c.opts.Password)
	}
	if err != nil {
		nc.Close()
		var ref *transport.RefusedError
		if errors.As(err, &ref) {
			return nil, nil, ref // dial names it ErrRefused, after a retry in an older version
		}
		if c.opts.TLS != nil {
			var alert tls.AlertError
			if errors.As(err, &alert) { // TLS 1.3: a refused client certificate shows on the first read
				return nil, nil, fmt.Errorf("%w: TLS: %v", ErrRefused, err)
			}
		}
		// Something answered, but not as a broker's client port does
		// (a broker-to-broker, MQTT or HTTP port, or another server).
		return nil, nil, fmt.Errorf("no aerie handshake (not a broker's client port?): %w", err)
	}
	conn.SetTraceHops(lattrace.ConnHop(msg.NodeID(conn.Peer.ID), false, ""))
	return conn, r, nil
}

// pinned gives a publish without a pubend the pubend of this client's
// acknowledged publishes: resent through another broker it then goes to the
// same pubend (or is refused there), never to another one, where the
// pubend's deduplication could not see it.
func (c *Client) pinned(req msg.Publish) msg.Publish {
	if req.Pubend == "" {
		req.Pubend = c.pubend
	}
	return req
}

// dispatch runs on the connection's reader goroutine, in order.
func (c *Client) dispatch(m msg.Msg) {
	switch m := m.(type) {
	case msg.PubAck:
		c.mu.Lock()
		if c.pubend == "" {
			c.pubend = m.Pubend
		}
		c.mu.Unlock()
		c.finish(m.Seq, Ack{Pubend: string(m.Pubend), Tick: uint64(m.Tick), Duplicate: m.Duplicate}, nil)
	case msg.PubAckRange: // from a broker of version 11 on: the acks of consecutive publishes
		c.finishRange(&m)
	case msg.PubReject:
		c.finish(m.Seq, Ack{}, fmt.Errorf("%w: %s", ErrRejected, m.Reason))
	case msg.SubStarted:
		if s := c.sub(string(m.Sub)); s != nil {
			s.start(m.Token)
		}
	case msg.SubRejected:
		if s := c.sub(string(m.Sub)); s != nil {
			if s.group != "" {
				s.end(groupRefusal(m.Reason))
			} else {
				s.end(fmt.Errorf("%w: %s", ErrRejected, m.Reason))
			}
			c.mu.Lock()
			delete(c.subs, string(m.Sub))
			c.mu.Unlock()
		}
	case *msg.Delivery: // as the wire decodes it, with its event
		if s := c.sub(string(m.Sub)); s != nil {
			s.deliver(m.Event) // blocks when the application does not keep up
		}
	case *msg.DeliveryRun: // from a broker of version 13 on: consecutive deliveries
		if s := c.sub(string(m.Sub)); s != nil {
			s.deliverRun(m.Events)
		}
	case msg.Gap:
		if s := c.sub(string(m.Sub)); s != nil {
			s.gap(m)
		}
	case msg.Progress:
		if s := c.sub(string(m.Sub)); s != nil {
			s.progress(m.Token)
		}
	}
}

func (c *Client) sub(name string) *Subscription {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.subs[name]
}

func (c *Client) finish(seq uint64, ack Ack, err error) {
	c.mu.Lock()
	p := c.pending.take(seq)
	if p != nil {
		c.window.release(1)
	}
	c.mu.Unlock()
	switch {
	case p != nil:
		p.done(Result{Ack: ack, Seq: p.seq, Err: err})
	case err != nil: // a publish that asked for no ack, which nobody waits for
		c.log.Warn("publish refused", "seq", seq, "err", err)
	}
}

// finishRange completes the publishes a PubAckRange acknowledges, each
// with its own tick, as the PubAcks it stands for would: one pass under
// the lock for the range, then their outcomes. A seq that is no longer
// pending (answered before, as after a resend) is skipped, as finish does.
func (c *Client) finishRange(r *msg.PubAckRange) {
	ps := c.acked[:0]
	c.mu.Lock()
	if c.pubend == "" {
		c.pubend = r.Pubend
	}
	for i := range r.Ticks {
		seq := r.Seq + uint64(i)
		if p := c.pending.take(seq); p != nil {
			ps = append(ps, p)
		}
	}
	c.window.release(len(ps))
	c.mu.Unlock()
	for i, p := range ps {
		p.done(Result{Ack: Ack{Pubend: string(r.Pubend), Tick: uint64(r.Ticks[p.seq-r.Seq])}, Seq: p.seq})
		ps[i] = nil
	}
	c.acked = ps[:0]
}

// failPending ends every unacknowledged publish with ErrClosed once the
// client has stopped (Close, or a Dial that never connected).
func (c *Client) failPending() {
	c.mu.Lock()
	pending := c.pending.takeAll()
	c.window.release(len(pending))
	c.window.stop()
	c.mu.Unlock()
	for _, p := range pending {
		p.done(Result{Seq: p.seq, Err: ErrClosed})
	}
}

// PublishAsync queues a publish and returns a channel that yields its
// outcome once the event is durable (or refused). The publish is retried
// across reconnects until acknowledged or the client is closed.
func (c *Client) PublishAsync(m Message) (<-chan Result, error) {
	out := make(chan Result, 1) // the one outcome, sent without blocking
	if err := c.PublishFunc(m, func(r Result) { out <- r }); err != nil {
		return nil, err
	}
	return out, nil
}

// PublishFunc queues a publish like PublishAsync and calls done once with
// its outcome, from the client's connection goroutine: done must return
// quickly and must not call the client's blocking methods (Publish,
// Subscribe, Close). It costs no channel and no goroutine hand-off per
// publish, for publishers that count outcomes rather than wait on each.
// It blocks while MaxInflight publishes are unacknowledged.
func (c *Client) PublishFunc(m Message, done func(Result)) error {
	if done == nil {
		return fmt.Errorf("%w: PublishFunc needs a done function", ErrRejected)
	}
	props, err := checkMessage(m)
	if err != nil {
		return err
	}
	c.mu.Lock()
	if c.closed || !c.window.acquire() { // back-pressure: at most MaxInflight unacknowledged
		c.mu.Unlock()
		return ErrClosed
	}
	c.seq++
	p := c.newPublish()
	*p = publish{done: done, seq: c.seq, req: msg.Publish{
		Pubend: msg.PubendID(c.opts.Pubend), Publisher: c.opts.ID, Seq: c.seq,
		Topic: m.Topic, Props: props, Payload: m.Payload,
	}}
	p.req = c.pinned(p.req)
	c.pending.put(p)
	if c.conn != nil {
		c.conn.Send(&p.req) // by pointer: p.req never changes once made
	}
	c.mu.Unlock()
	return nil
}

// PublishNoAck sends one event and asks for no acknowledgment: at most
// once, as MQTT's QoS 0 or core NATS. It returns once the event is queued
// on the connection. The client does not keep it, so a connection lost
// before its pubend takes it loses it, and nothing says so; once taken, it
// is logged, ordered and delivered exactly once, as any other. A refusal
// (an unknown pubend, a topic the user may not publish to) is logged by
// the client. It blocks while the connection is down or MaxInflight frames
// wait to be written (back-pressure from the socket), until ctx ends.
//
// A broker takes one client's publishes in the order they were sent, so a
// Publish after PublishNoAcks is acknowledged only once they were taken
// (or lost): a publisher that must know how far it got, as NATS's Flush
// tells, sends one Publish and waits for its ack. It saves the broker an
// ack, and the client a pending publish, per event; use it where losing an
// event on a failure is acceptable (metrics, telemetry, best-effort
// networks) — use Publish where it is not.
func (c *Client) PublishNoAck(ctx context.Context, m Message) error {
	props, err := checkMessage(m)
	if err != nil {
		return err
	}
	for {
		c.mu.Lock()
		conn, up := c.conn, c.connUp
		switch {
		case c.closed:
			c.mu.Unlock()
			return ErrClosed
		case conn == nil:
			c.mu.Unlock()
			select {
			case <-up:
			case <-c.done:
			case <-ctx.Done():
				return ctx.Err()
			}
			continue
		case conn.Queued() >= c.opts.MaxInflight:
			c.mu.Unlock()
			if err := conn.WaitRoom(ctx, c.opts.MaxInflight); err != nil {
				return err
			}
			continue
		}
		c.seq++
		p := c.newPublish()
		*p = publish{seq: c.seq, req: msg.Publish{
			Pubend: msg.PubendID(c.opts.Pubend), Publisher: c.opts.ID, Seq: c.seq,
			Topic: m.Topic, Props: props, Payload: m.Payload,
			// A broker before version 15 acks it; the ack finds nothing
			// pending and is dropped.
			NoAck: conn.Peer.Version >= wire.VersionPublishNoAck,
		}}
		p.req = c.pinned(p.req)
		conn.Send(&p.req) // by pointer, as PublishFunc's; not kept after it is written
		c.mu.Unlock()
		return nil
	}
}

// publishChunk is how many publishes one allocation makes (Client.slab).
const publishChunk = 64

// newPublish carves a publish from the slab (under c.mu).
func (c *Client) newPublish() *publish {
	if len(c.slab) == 0 {
		c.slab = make([]publish, publishChunk)
	}
	p := &c.slab[0]
	c.slab = c.slab[1:]
	return p
}

// Result is the outcome of an asynchronous publish.
type Result struct {
	Ack Ack
	Seq uint64 // the publish's sequence number for this client
	Err error
}

// Publish sends one event and returns once it is durable at its pubend.
func (c *Client) Publish(ctx context.Context, m Message) (Ack, error) {
	ch, err := c.PublishAsync(m)
	if err != nil {
		return Ack{}, err
	}
	select {
	case r := <-ch:
		return r.Ack, r.Err
	case <-ctx.Done():
		return Ack{}, ctx.Err()
	}
}

// normalizeProps encodes a message's properties as events carry them
// (msg.Props), other integer and float types converted to int64 and
// float64.
func normalizeProps(p map[string]any) (msg.Props, error) {
	props, err := msg.PropsOf(p)
	if err == nil {
		return props, nil // before errors.As, whose target would escape: an allocation per publish
	}
	var bad *msg.PropTypeError
	if errors.As(err, &bad) {
		return msg.Props{}, fmt.Errorf("aerie: property %q: unsupported type %T (use integer, float, bool or string)", bad.Name, bad.Value)
	}
	return msg.Props{}, err
}

// Close ends the client: subscriptions end, unacknowledged publishes fail
// with ErrClosed (they may still have been logged: retry with the same
// client ID and they are not duplicated).
func (c *Client) Close() error {
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		return nil
	}
	c.closed = true
	c.window.stop() // a publisher waiting for room gets ErrClosed now
	conn := c.conn
	subs := make([]*Subscription, 0, len(c.subs))
	for _, s := range c.subs {
		subs = append(subs, s)
	}
	c.mu.Unlock()
	// End subscriptions first: a reader blocked on a full Events channel is
	// released, so the connection can wind down.
	for _, s := range subs {
		s.end(ErrClosed)
	}
	c.cancel() // first, so the run loop sees a requested close, not a loss
	if conn != nil {
		conn.Close()
	}
	<-c.done
	return nil
}

func eventOf(e *msg.Event) Event {
	return Event{Pubend: string(e.Pubend), Tick: uint64(e.Tick), Topic: e.Topic, Props: Props{e.Props}, Payload: e.Payload,
		PubTime: time.UnixMilli(tick.Tick(e.Tick).Millis()), Publisher: e.Publisher, Seq: e.Seq}
}
