package broker

import (
	"context"
	"crypto/tls"
	"fmt"
	"net"
	"path/filepath"
	"time"

	"github.com/aerie-mq/aerie/internal/auth"
	"github.com/aerie-mq/aerie/internal/mqtt"
	"github.com/aerie-mq/aerie/internal/msg"
	"github.com/aerie-mq/aerie/internal/shell"
	"github.com/aerie-mq/aerie/internal/transport"
)

// clientConn is a client connection as the loop sees it: an aerie
// connection (transport.Conn) or an MQTT one (mqtt.Conn). Every call
// returns at once; a message a full or broken connection cannot take is
// dropped and the connection closed with a reason.
type clientConn interface {
	Send(m msg.Msg) bool
	CloseWith(err error, reason string)
	CloseFlush(reason string)
}

var (
	_ clientConn = (*transport.Conn)(nil)
	_ clientConn = (*mqtt.Conn)(nil)
)

// MQTTAddr returns the address of the MQTT listener ("" when none).
func (n *Node) MQTTAddr() string {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.mqttSrv == nil {
		return ""
	}
	return n.mqttSrv.Addr()
}

// listenMQTT starts the MQTT listener, if the broker has one: each MQTT
// connection becomes a client of the shell like any other, its requests
// posted to the loop's inbox in the order they were read (mqttHost), its
// answers sent back through Node.ToClient. It stops when ctx ends, after
// the loop has flushed every connection.
func (n *Node) listenMQTT(ctx context.Context) error {
	if n.opts.MQTT == "" {
		return nil
	}
	ln, err := net.Listen("tcp", n.opts.MQTT)
	if err != nil {
		return fmt.Errorf("broker %s: listen for MQTT: %w", n.opts.ID, err)
	}
	if n.opts.TLS != nil {
		// The same TLS as the client port: never a plain MQTT port on a
		// network configured for TLS.
		ln = tls.NewListener(ln, n.opts.TLS.Clients())
	}
	opts := mqtt.Options{
		Listener: ln, Broker: n.opts.ID, Incarnation: n.inc, Pubends: n.mqttPubends(),
		Host: mqttHost{n: n, ctx: ctx}, Queue: n.opts.SubscriberQueue, Logger: n.log,
		Sessions:        n.opts.DataDir != "", // the durable subscriptions of sessions are kept there
		RetainedNetwork: true,
	}
	if n.opts.DataDir != "" {
		opts.WillDir = filepath.Join(n.opts.DataDir, "mqtt-wills") // a will survives the broker's crash
		// The retained store survives it too, fed by a durable watch.
		opts.RetainedFile = filepath.Join(n.opts.DataDir, "mqtt-retained")
		// A persistent session's QoS 2 packet ids and publisher too.
		opts.SessionDir = filepath.Join(n.opts.DataDir, "mqtt-sessions")
	}
	if users := n.opts.Users; users != nil {
		opts.Authenticate = func(user, password string) (*auth.Perms, error) {
			if anon := users.Anonymous(); anon != nil && user == "" && password == "" {
				return anon, nil // [anonymous]
			}
			perms, err := users.Authenticate(user, password)
			if err != nil {
				n.authFailures.Add(1)
				time.Sleep(AuthFailDelay) // slow down a guesser, on the connection's goroutine; not synchronisation
			}
			return perms, err
		}
	}
	srv, err := mqtt.Start(opts)
	if err != nil {
		ln.Close()
		return fmt.Errorf("broker %s: MQTT listener: %w", n.opts.ID, err)
	}
	n.mu.Lock()
	n.mqttSrv = srv
	n.mu.Unlock()
	n.log.Info("MQTT listener", "addr", srv.Addr())
	n.wg.Add(1)
	go func() {
		defer n.wg.Done()
		<-ctx.Done()
		srv.Close()
	}()
	return nil
}

// mqttHost is the broker side of the MQTT listener (mqtt.Host).
type mqttHost struct {
	n   *Node
	ctx context.Context
}

func (h mqttHost) Up(c *mqtt.Conn) shell.ClientID {
	cid := h.n.newClientID()
	h.n.post(h.ctx, event{src: source{cid: cid}, ctl: clientUp{conn: c, perms: c.Perms()}})
	return cid
}

func (h mqttHost) Request(cid shell.ClientID, m msg.Msg) {
	h.n.post(h.ctx, event{src: source{cid: cid}, m: m})
}

func (h mqttHost) Down(cid shell.ClientID) {
	h.n.post(h.ctx, event{src: source{cid: cid}, ctl: clientDown{}})
}

// sessionTimeout bounds how long a CONNECT waits for the loop to look up
// its persistent session.
const sessionTimeout = 10 * time.Second

func (h mqttHost) Session(prefix string) ([]msg.DurableSub, error) {
	ctx, cancel := context.WithTimeout(h.ctx, sessionTimeout)
	defer cancel()
	reply := make(chan []msg.DurableSub, 1)
	h.n.post(ctx, event{ctl: sessionQuery{prefix: prefix, reply: reply}})
	select {
	case ds := <-reply:
		return ds, nil
	case <-ctx.Done():
		return nil, fmt.Errorf("broker %s: looking up MQTT session %s: %w", h.n.opts.ID, prefix, ctx.Err())
	}
}

func (h mqttHost) Checkpoints(prefix string) (map[msg.SubID]msg.Token, error) {
	ctx, cancel := context.WithTimeout(h.ctx, sessionTimeout)
	defer cancel()
	reply := make(chan map[msg.SubID]msg.Token, 1)
	h.n.post(ctx, event{ctl: checkpointsQuery{prefix: prefix, reply: reply}})
	select {
	case cs := <-reply:
		return cs, nil
	case <-ctx.Done():
		return nil, fmt.Errorf("broker %s: looking up the checkpoints of MQTT session %s: %w", h.n.opts.ID, prefix, ctx.Err())
	}
}

// checkpointsQuery asks the loop for the durable checkpoints of an MQTT
// persistent session's subscriptions.
type checkpointsQuery struct {
	prefix string
	reply  chan<- map[msg.SubID]msg.Token
}

func (q checkpointsQuery) apply(n *Node, _ source) { q.reply <- n.sh.DurablyReleased(q.prefix) }

func (h mqttHost) EndSession(prefix string) {
	h.n.post(h.ctx, event{ctl: sessionEnd{prefix: prefix}})
}

// sessionQuery asks the loop for the durable subscriptions of an MQTT
// persistent session.
type sessionQuery struct {
	prefix string
	reply  chan<- []msg.DurableSub
}

func (q sessionQuery) apply(n *Node, _ source) { q.reply <- n.sh.DurablesUnder(q.prefix) }

// sessionEnd deletes an MQTT session's durable subscriptions.
type sessionEnd struct{ prefix string }

func (e sessionEnd) apply(n *Node, _ source) { n.sh.DeleteDurables(e.prefix) }
