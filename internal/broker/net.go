package broker

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"time"

	"github.com/aerie-mq/aerie/internal/lattrace"
	"github.com/aerie-mq/aerie/internal/msg"
	"github.com/aerie-mq/aerie/internal/shell"
	"github.com/aerie-mq/aerie/internal/transport"
	"github.com/aerie-mq/aerie/internal/wire"
)

func (n *Node) hello() msg.Hello {
	v := wire.Version
	if n.opts.protocolVersion != 0 {
		v = n.opts.protocolVersion
	}
	return msg.Hello{Version: v, Role: msg.RoleBroker, ID: string(n.opts.ID), Incarnation: n.inc}
}

func (n *Node) listen(ctx context.Context) error {
	var err error
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.opts.Listen != "" {
		if n.brokerLn, err = net.Listen("tcp", n.opts.Listen); err != nil {
			return fmt.Errorf("broker %s: listen for brokers: %w", n.opts.ID, err)
		}
		n.wg.Add(1)
		go n.acceptLoop(ctx, n.brokerLn, n.servePeer)
	}
	if n.opts.Clients != "" {
		if n.clientLn, err = net.Listen("tcp", n.opts.Clients); err != nil {
			if n.brokerLn != nil {
				n.brokerLn.Close()
			}
			return fmt.Errorf("broker %s: listen for clients: %w", n.opts.ID, err)
		}
		n.wg.Add(1)
		go n.acceptLoop(ctx, n.clientLn, n.serveClient)
	}
	return nil
}

func (n *Node) acceptLoop(ctx context.Context, ln net.Listener, serve func(context.Context, net.Conn)) {
	defer n.wg.Done()
	go func() {
		<-ctx.Done()
		ln.Close()
	}()
	for {
		nc, err := ln.Accept()
		if err != nil {
			if ctx.Err() == nil && !errors.Is(err, net.ErrClosed) {
				n.log.Warn("accept failed", "err", err)
				time.Sleep(10 * time.Millisecond) // avoid a hot loop on EMFILE; not synchronisation
				continue
			}
			return
		}
		n.wg.Add(1)
		go func() {
			defer n.wg.Done()
			serve(ctx, nc)
		}()
	}
}

// servePeer handles a downstream broker that dialed us.
func (n *Node) servePeer(ctx context.Context, nc net.Conn) {
	hctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	addr := nc.RemoteAddr().String()
	var tcfg *tls.Config
	if n.opts.TLS != nil {
		tcfg = n.opts.TLS.Listener()
	}
	nc, err := tlsServer(hctx, nc, tcfg)
	if err != nil {
		n.handshakeFailed(addr, "broker handshake failed", err)
		return
	}
	topts := n.opts.Transport
	topts.AsOlder = n.opts.protocolVersion // a test's stand-in for an older broker
	c, r, err := transport.Accept(hctx, nc, n.hello(), topts)
	if err != nil {
		n.handshakeFailed(addr, "broker handshake failed", err)
		nc.Close()
		return
	}
	if err := checkPeerName(nc, c.Peer.ID); err != nil {
		c.CloseWith(err, "refused: "+err.Error())
		n.handshakeFailed(addr, "refused broker connection", fmt.Errorf("peer claims broker %s: %w", c.Peer.ID, err))
		return
	}
	cancel()
	peer := msg.NodeID(c.Peer.ID)
	if c.Peer.Role != msg.RoleBroker || !n.downs[peer] {
		c.CloseWith(errors.New("unknown peer"), fmt.Sprintf("%s is not a downstream neighbour of broker %s", c.Peer.ID, n.opts.ID))
		n.log.Warn("refused connection from unknown broker", "peer", c.Peer.ID, "addr", c.RemoteAddr())
		return
	}
	n.bw.attach(peer, c) // the link's cap, downstream only (docs/CONFIG.md)
	defer n.bw.detach(c)
	n.runPeer(ctx, peer, c, r)
}

// dialLoop keeps a connection to one upstream neighbour, reconnecting with
// exponential backoff (50 ms doubling to 500 ms, with jitter). The cap is
// low on purpose: a downstream cut off from its upstream relinks within
// half a second of the heal (catch-up starts then), and one dial every
// half second to a dead neighbour costs nothing.
func (n *Node) dialLoop(ctx context.Context, up msg.NodeID, addr string) {
	defer n.wg.Done()
	backoff := 50 * time.Millisecond
	for ctx.Err() == nil {
		c, r, shook, err := n.dialUpstream(ctx, up, addr, n.hello())
		if older := transport.OlderPeer(err, wire.MinBrokerVersion, n.hello().Version); older != 0 {
			// A broker of an older version refused ours (PROTOCOL.md §1,
			// "Versions on a link"): speak its version, as it would ours.
			n.log.Info("upstream speaks an older protocol version: linking in it", "peer", string(up), "version", older)
			h := n.hello()
			h.Version = older
			c, r, shook, err = n.dialUpstream(ctx, up, addr, h)
		}
		switch {
		case err != nil && shook:
			// Retried every half second: logged once per interval.
			n.fails.fail(addr, "handshake with upstream "+string(up)+" failed", err)
		case err != nil: // unreachable: retried quietly
		case c.Peer.ID != string(up):
			c.CloseWith(errors.New("wrong peer"), fmt.Sprintf("expected broker %s", up))
			n.log.Warn("upstream address answered with another broker", "want", string(up), "got", c.Peer.ID, "addr", addr)
		default:
			backoff = 50 * time.Millisecond
			n.runPeer(ctx, up, c, r)
		}
		wait := backoff + time.Duration(float64(backoff)*0.2*rand.Float64())
		backoff = min(2*backoff, 500*time.Millisecond)
		select {
		case <-ctx.Done():
		case <-time.After(wait):
		}
	}
}

// dialUpstream dials up at addr and shakes hands with hello; shook says
// whether the TCP connection was made (a failure after it is the
// handshake's). On error the connection is closed.
func (n *Node) dialUpstream(ctx context.Context, up msg.NodeID, addr string, hello msg.Hello) (*transport.Conn, *wire.Reader, bool, error) {
	d := net.Dialer{Timeout: 2 * time.Second}
	nc, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		return nil, nil, false, err
	}
	hctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	var c *transport.Conn
	var r *wire.Reader
	if nc, err = n.tlsClient(hctx, nc, string(up)); err == nil {
		c, r, err = transport.Handshake(hctx, nc, hello, n.opts.Transport)
	}
	if err != nil {
		if nc != nil {
			nc.Close()
		}
		return nil, nil, true, err
	}
	return c, r, true, nil
}

func (n *Node) runPeer(ctx context.Context, peer msg.NodeID, c *transport.Conn, r *wire.Reader) {
	src := newSource(peer, 0, c)
	c.SetTraceHops(lattrace.ConnHop(peer, false, n.opts.ID))
	n.post(ctx, event{src: src, ctl: peerUp{inc: c.Peer.Incarnation}})
	err := c.RunBatch(ctx, r, func(ms []msg.Msg) []msg.Msg { return n.postBurst(ctx, src, ms) })
	if err != nil && ctx.Err() == nil {
		n.log.Info("connection to broker closed", "peer", string(peer), "err", err)
	}
	n.post(ctx, event{src: src, ctl: peerDown{}})
}

func (n *Node) serveClient(ctx context.Context, nc net.Conn) {
	hctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	opts := n.opts.Transport
	opts.QueueFrames = n.opts.SubscriberQueue
	addr := nc.RemoteAddr().String()
	var tcfg *tls.Config
	if n.opts.TLS != nil {
		tcfg = n.opts.TLS.Clients()
	}
	nc, err := tlsServer(hctx, nc, tcfg)
	if err != nil {
		n.handshakeFailed(addr, "client handshake failed", err)
		return
	}
	opts.AsOlder = n.opts.protocolVersion
	c, r, err := transport.Accept(hctx, nc, n.hello(), opts)
	if err != nil {
		n.handshakeFailed(addr, "client handshake failed", err)
		nc.Close()
		return
	}
	// A client that fails authentication is refused here, before the
	// loop (and the engine) ever hears of it.
	perms, refusal, err := n.authenticate(hctx, c, r)
	if refusal != "" || err != nil {
		if refusal == "" {
			refusal = "handshake failed"
		}
		c.CloseWith(err, refusal)
		n.handshakeFailed(addr, "client refused: "+refusal, err)
		return
	}
	cancel()
	cid := n.newClientID()
	src := newSource("", cid, c)
	c.SetTraceHops(lattrace.ConnHop("", true, n.opts.ID))
	n.post(ctx, event{src: src, ctl: clientUp{perms: perms}})
	err = c.RunBatch(ctx, r, func(ms []msg.Msg) []msg.Msg { return n.postBurst(ctx, src, ms) })
	if err != nil && ctx.Err() == nil {
		n.log.Info("client connection closed", "client", c.Peer.ID, "err", err)
	}
	n.post(ctx, event{src: src, ctl: clientDown{}})
}

// handshakeFailed counts and logs (at most once per source per interval)
// a connection refused before it was up.
func (n *Node) handshakeFailed(addr, what string, err error) {
	n.handshakeFailures.Add(1)
	n.fails.fail(addr, what, err)
}

func (n *Node) newClientID() shell.ClientID {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.nextCID++
	return n.nextCID
}

// post hands an event to the loop (blocking: a full inbox pushes back on
// the connection readers, which is TCP flow control for our peers).
func (n *Node) post(ctx context.Context, ev event) {
	select { // the common case, without a two-way select (a few % of CPU per message)
	case n.inbox <- ev:
		return
	default:
	}
	select {
	case n.inbox <- ev:
	case <-ctx.Done():
	}
}
