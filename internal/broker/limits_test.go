package broker_test

import (
	"bufio"
	"context"
	"errors"
	"log/slog"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/aerie-mq/aerie/client"
	"github.com/aerie-mq/aerie/internal/broker"
	"github.com/aerie-mq/aerie/internal/gd"
	"github.com/aerie-mq/aerie/internal/msg"
	"github.com/aerie-mq/aerie/internal/vfs"
	"github.com/aerie-mq/aerie/internal/wire"
)

// runNode starts a broker and returns it with a stop function that cancels
// it and returns Run's error.
func runNode(t testing.TB, opts broker.Options) (*broker.Node, func() error) {
	t.Helper()
	node, err := broker.New(opts)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- node.Run(ctx) }()
	select {
	case <-node.Listening():
	case err := <-done:
		t.Fatalf("broker %s: %v", opts.ID, err)
	}
	return node, func() error { cancel(); return <-done }
}

// phbOptions is a single PHB hosting P1 on an in-memory disk, with clients.
func phbOptions(t testing.TB) broker.Options {
	return broker.Options{ID: "p1", Routes: []gd.Route{{Pubend: "P1"}}, GD: gd.DefaultConfig(),
		Clients: freeAddr(t), DataDir: "/data", FS: vfs.NewMem(), Logger: quietLogger()}
}

// oneBroker runs a single PHB that also hosts subscribers, until the test ends.
func oneBroker(t *testing.T, subscriberQueue int) broker.Options {
	opts := phbOptions(t)
	opts.SubscriberQueue = subscriberQueue
	_, stop := runNode(t, opts)
	t.Cleanup(func() { stop() })
	return opts
}

// TestSlowSubscriberIsDisconnectedWithReason: a subscriber that stops
// reading gets a bounded buffer at the broker and is then disconnected with
// a reason it can see — never unbounded growth (seed 003 §1.1).
func TestSlowSubscriberIsDisconnectedWithReason(t *testing.T) {
	opts := oneBroker(t, 64)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	sc, err := client.Dial(ctx, opts.Clients, client.Options{SubscriptionBuffer: 1, Logger: quietLogger()})
	if err != nil {
		t.Fatal(err)
	}
	defer sc.Close()
	sub, err := sc.Subscribe(ctx, ">")
	if err != nil {
		t.Fatal(err)
	}
	pub, err := client.Dial(ctx, opts.Clients, client.Options{ID: "fast", Logger: quietLogger()})
	if err != nil {
		t.Fatal(err)
	}
	defer pub.Close()
	// The subscriber reads nothing while 400 events of 64 KiB (26 MB: more
	// than loopback socket buffers plus the broker's 64-frame queue) are
	// published. The PubAck of an event precedes its delivery by one engine
	// step, so once every publish is acked, at least 399 deliveries were
	// queued for this connection: the broker must have cut it off by then.
	const events = 400
	var acks []<-chan client.Result
	for i := 0; i < events; i++ {
		ch, err := pub.PublishAsync(client.Message{Topic: "t", Payload: make([]byte, 64<<10)})
		if err != nil {
			t.Fatal(err)
		}
		acks = append(acks, ch)
	}
	for _, ch := range acks {
		select {
		case r := <-ch:
			if r.Err != nil {
				t.Fatal(r.Err)
			}
		case <-ctx.Done():
			t.Fatal("publishes not acked")
		}
	}
	// Now read: what was buffered drains, then the subscription ends and
	// says why.
	n := 0
	for range sub.Events() {
		n++
	}
	if n >= events {
		t.Fatalf("all %d events arrived: the subscriber was never cut off", n)
	}
	err = sub.Err()
	if !errors.Is(err, client.ErrDisconnected) || !strings.Contains(err.Error(), "too slow") {
		t.Fatalf("subscription ended with %v, want a disconnection saying the subscriber was too slow", err)
	}
}

// TestUnknownVersionRefusedWithReason: a peer speaking only a protocol
// version older than this broker speaks gets a Goodbye saying so, and the
// broker keeps serving others. (A newer peer is answered in this broker's
// version: transport.TestAcceptAnswersNewerPeersInItsVersion.)
func TestUnknownVersionRefusedWithReason(t *testing.T) {
	opts := oneBroker(t, 0)
	nc, err := net.Dial("tcp", opts.Clients)
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	b, _ := wire.AppendFrame(nil, msg.Hello{Version: wire.MinClientVersion - 1, Role: msg.RoleClient, ID: "past"})
	nc.Write(b)
	nc.SetReadDeadline(time.Now().Add(10 * time.Second))
	r := wire.NewReader(bufio.NewReader(nc), wire.DefaultMaxFrame)
	var reason string
	for {
		m, err := r.Next()
		if err != nil {
			break
		}
		if g, ok := m.(msg.Goodbye); ok {
			reason = g.Reason
		}
	}
	if !strings.Contains(reason, "version") {
		t.Fatalf("goodbye reason %q does not mention the version", reason)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	c, err := client.Dial(ctx, opts.Clients, client.Options{Logger: quietLogger()})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if _, err := c.Publish(ctx, client.Message{Topic: "t"}); err != nil {
		t.Fatalf("broker stopped serving after a bad peer: %v", err)
	}
}

// TestCloseWithUnreadSubscription: closing a client whose subscription
// nobody reads returns (its reader was blocked on a full channel).
func TestCloseWithUnreadSubscription(t *testing.T) {
	opts := oneBroker(t, 0)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	c, err := client.Dial(ctx, opts.Clients, client.Options{SubscriptionBuffer: 1, Logger: quietLogger()})
	if err != nil {
		t.Fatal(err)
	}
	sub, err := c.Subscribe(ctx, ">")
	if err != nil {
		t.Fatal(err)
	}
	// Publish from another client: on c itself the unread subscription
	// would hold up the acks too (one connection, read in order).
	pub, err := client.Dial(ctx, opts.Clients, client.Options{Logger: quietLogger()})
	if err != nil {
		t.Fatal(err)
	}
	defer pub.Close()
	for i := 0; i < 20; i++ {
		if _, err := pub.Publish(ctx, client.Message{Topic: "t"}); err != nil {
			t.Fatal(err)
		}
	}
	closed := make(chan struct{})
	go func() { c.Close(); close(closed) }()
	select {
	case <-closed:
	case <-ctx.Done():
		t.Fatal("Close hung on a subscription nobody reads")
	}
	if !errors.Is(sub.Err(), client.ErrClosed) {
		t.Fatalf("subscription ended with %v, want ErrClosed", sub.Err())
	}
}

// TestOversizedPublishRefused: an event over the limit is refused with a
// reason — by the client before sending, and by the broker for a client
// that does not check — and the broker keeps serving.
func TestOversizedPublishRefused(t *testing.T) {
	opts := oneBroker(t, 0)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	c, err := client.Dial(ctx, opts.Clients, client.Options{Logger: quietLogger()})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	big := make([]byte, msg.MaxEventBytes+1)
	if _, err := c.Publish(ctx, client.Message{Topic: "t", Payload: big}); !errors.Is(err, client.ErrRejected) {
		t.Fatalf("client accepted an oversized event: %v", err)
	}
	// A raw client that skips the check gets a PubReject from the broker.
	nc, err := net.Dial("tcp", opts.Clients)
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	buf, _ := wire.AppendFrame(nil, msg.Hello{Version: wire.Version, Role: msg.RoleClient, ID: "raw"})
	buf, _ = wire.AppendFrame(buf, msg.Auth{}) // no credentials: the broker has no users
	buf, _ = wire.AppendFrame(buf, msg.Publish{Publisher: "raw", Seq: 1, Topic: "t", Payload: big})
	nc.Write(buf)
	nc.SetReadDeadline(time.Now().Add(10 * time.Second))
	r := wire.NewReader(bufio.NewReader(nc), wire.DefaultMaxFrame)
	for {
		m, err := r.Next()
		if err != nil {
			t.Fatalf("no answer to an oversized publish: %v", err)
		}
		if rej, ok := m.(msg.PubReject); ok {
			if !strings.Contains(rej.Reason, "exceeds") {
				t.Fatalf("reason %q does not say the event is too large", rej.Reason)
			}
			break
		}
	}
	if _, err := c.Publish(ctx, client.Message{Topic: "t", Payload: []byte("fine")}); err != nil {
		t.Fatalf("broker stopped serving after an oversized publish: %v", err)
	}
}

// TestShutdownSaysGoodbye: a broker that stops gracefully tells its clients
// why, after delivering what it had queued.
func TestShutdownSaysGoodbye(t *testing.T) {
	opts := phbOptions(t)
	_, stop := runNode(t, opts)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	c, err := client.Dial(ctx, opts.Clients, client.Options{Logger: quietLogger()})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	sub, err := c.Subscribe(ctx, ">")
	if err != nil {
		t.Fatal(err)
	}
	if err := stop(); err != nil {
		t.Fatal(err)
	}
	for range sub.Events() {
	}
	if err := sub.Err(); err == nil || !strings.Contains(err.Error(), "shutting down") {
		t.Fatalf("subscription ended with %v, want the broker's goodbye", err)
	}
}

// TestRetryDialWaitsForBroker: with RetryDial a client started before its
// broker connects once the broker is up.
func TestRetryDialWaitsForBroker(t *testing.T) {
	opts := phbOptions(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	dialed := make(chan error, 1)
	failed := make(chan struct{}, 1)
	logger := slog.New(&signalHandler{msg: "connect failed; retrying", ch: failed})
	var c *client.Client
	go func() {
		var err error
		c, err = client.Dial(ctx, opts.Clients, client.Options{RetryDial: true, Logger: logger})
		dialed <- err
	}()
	<-failed                    // the client has been refused at least once...
	_, stop := runNode(t, opts) // ...before the broker comes up
	defer stop()
	if err := <-dialed; err != nil {
		t.Fatalf("RetryDial did not wait for the broker: %v", err)
	}
	defer c.Close()
	if _, err := c.Publish(ctx, client.Message{Topic: "t"}); err != nil {
		t.Fatal(err)
	}
	// Without RetryDial, a refused first connection fails at once.
	if _, err := client.Dial(ctx, freeAddr(t), client.Options{Logger: quietLogger()}); err == nil {
		t.Fatal("Dial to nothing succeeded")
	}
}

// signalHandler is a slog handler that signals when a record with msg is logged.
type signalHandler struct {
	msg string
	ch  chan struct{}
}

func (h *signalHandler) Enabled(context.Context, slog.Level) bool { return true }
func (h *signalHandler) Handle(_ context.Context, r slog.Record) error {
	if r.Message == h.msg {
		select {
		case h.ch <- struct{}{}:
		default:
		}
	}
	return nil
}
func (h *signalHandler) WithAttrs([]slog.Attr) slog.Handler { return h }
func (h *signalHandler) WithGroup(string) slog.Handler      { return h }

// TestBestEffortMode: with BestEffort on every broker, events still flow
// PHB → IB → SHB to matching subscribers in order, publishes are acked, and
// nothing is written to the PHB's event log and no knowledge is kept: the
// baseline of seed 000 §4.1.
func TestBestEffortMode(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	n := startNetWith(t, vfs.OS(), func(opts map[msg.NodeID]broker.Options) {
		for id, o := range opts {
			o.BestEffort = true
			opts[id] = o
		}
	})
	sub, err := n.dial("s1", client.Options{}).SubscribeSelector(ctx, ">", "seq <= 150")
	if err != nil {
		t.Fatal(err)
	}
	c := collect(t, sub)
	pub := n.dial("p1", client.Options{ID: "pub-be", Pubend: "P1"})
	_, all := publishAll(t, pub, 1, 300)
	want := map[int64]bool{}
	for k := range all {
		if k <= 150 {
			want[k] = true
		}
	}
	c.waitFor(t, len(want), 20*time.Second)
	c.check(t, want)
	st, err := n.nodes["p1"].Status(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if st.LogNext != 0 {
		t.Fatalf("best-effort PHB wrote %d records to its event log", st.LogNext)
	}
	for _, s := range st.Streams {
		if s.Runs != 0 {
			t.Fatalf("best-effort PHB keeps knowledge for %s: %d runs", s.Pubend, s.Runs)
		}
	}
}

// TestCloseFailsPendingPublishes: a publish whose record's fsync is held is
// still pending when the client closes; its result channel must then yield
// ErrClosed (there is no goroutine per publish to do it: the client fails
// every pending publish when it stops).
func TestCloseFailsPendingPublishes(t *testing.T) {
	h := startHeldPublish(t)
	c, ch := h.c, h.ch
	c.Close()
	select {
	case r := <-ch:
		if !errors.Is(r.Err, client.ErrClosed) || r.Seq != 1 {
			t.Fatalf("pending publish ended with %+v, want ErrClosed for seq 1", r)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("a pending publish got no result after Close")
	}
	if _, err := c.PublishAsync(client.Message{Topic: "t"}); !errors.Is(err, client.ErrClosed) {
		t.Fatalf("publish after Close: %v, want ErrClosed", err)
	}
	h.g.release()
}
