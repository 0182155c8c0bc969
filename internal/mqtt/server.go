package mqtt

import (
	"errors"
	"fmt"
	"hash/fnv"
	"io"
	"log/slog"
	"net"
	"slices"
	"strings"
	"sync"
	"time"

	mochi "github.com/mochi-mqtt/server/v2"
	"github.com/mochi-mqtt/server/v2/listeners"
	"github.com/mochi-mqtt/server/v2/packets"

	"github.com/aerie-mq/aerie/internal/auth"
	"github.com/aerie-mq/aerie/internal/msg"
	"github.com/aerie-mq/aerie/internal/shell"
)

// Host is the broker an MQTT listener serves. Every MQTT connection is a
// client connection of the broker's shell like any other: Up gives it a
// ClientID, its requests (msg.Publish, msg.Subscribe, msg.Unsubscribe) go
// to Request in the order they were read, and Down ends it (and its
// subscriptions). The broker answers through the Conn's Send, from its
// loop. The three calls may block (the broker's inbox is full: TCP flow
// control for the MQTT client), never for long.
type Host interface {
	Up(c *Conn) shell.ClientID
	Request(id shell.ClientID, m msg.Msg)
	Down(id shell.ClientID)
}

// Options configure a Server.
type Options struct {
	// Listener accepts the MQTT connections (TLS, once the broker has it,
	// is a tls.NewListener around the TCP one: see docs/MQTT.md).
	Listener net.Listener
	// Broker and Incarnation name this broker in publisher names.
	Broker      msg.NodeID
	Incarnation uint64
	// Pubends are the pubends this broker hosts; MQTT publishes are refused
	// at a broker that hosts none. An MQTT client id always publishes to
	// the same one, so its messages stay in order across reconnections.
	Pubends []msg.PubendID
	Host    Host
	// Queue bounds the messages queued to one connection: a subscriber
	// that falls further behind is disconnected with a reason (0 is 100000).
	Queue int
	// SubscribeWait bounds how long a SUBACK waits for the network to put
	// the subscription in force (0 is 30s); after that it is granted and
	// the subscription completes in the background.
	SubscribeWait time.Duration
	Logger        *slog.Logger
	// Authenticate checks an MQTT client's user name and password and
	// returns its user's permissions (nil: the network has no users, and
	// every client gets in). A refused client gets CONNACK "bad user name
	// or password" and never reaches the broker's loop.
	Authenticate func(user, password string) (*auth.Perms, error)
}

// maxOutstanding bounds the QoS 1 messages sent to one client and not yet
// acknowledged, below its own Receive Maximum.
const maxOutstanding = 4096

// receiveMaximum is the number of QoS 1 publishes a client may have
// waiting for their PUBACK (announced in CONNACK to MQTT 5 clients).
const receiveMaximum = 1024

// SelectorProperty is the MQTT 5 user property of a SUBSCRIBE that carries
// a JMS selector for its filters: an aerie extension.
const SelectorProperty = "aerie-selector"

// Server is an MQTT listener bound to one broker.
type Server struct {
	opts  Options
	srv   *mochi.Server
	log   *slog.Logger
	conns sync.Map // *mochi.Client → *Conn
	perms sync.Map // *mochi.Client → *auth.Perms, from authentication to the session
}

// Start serves MQTT on opts.Listener until Close.
func Start(opts Options) (*Server, error) {
	if opts.Queue <= 0 {
		opts.Queue = 100000
	}
	if opts.SubscribeWait <= 0 {
		opts.SubscribeWait = 30 * time.Second
	}
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	opts.Pubends = slices.Clone(opts.Pubends)
	slices.Sort(opts.Pubends)
	caps := mochi.NewDefaultServerCapabilities()
	caps.MaximumQos = 1                   // QoS 2 is refused (docs/MQTT.md)
	caps.RetainAvailable = 0              // no retained store outside aerie
	caps.SharedSubAvailable = 0           // no $share
	caps.MaximumSessionExpiryInterval = 0 // no session outlives its connection (yet)
	caps.ReceiveMaximum = receiveMaximum
	caps.MaximumPacketSize = msg.MaxEventBytes + 64<<10
	caps.TopicAliasMaximum = 0
	caps.Compatibilities.NoInheritedPropertiesOnAck = true
	s := &Server{opts: opts, log: opts.Logger}
	s.srv = mochi.New(&mochi.Options{
		Capabilities:           caps,
		Logger:                 slog.New(slog.NewTextHandler(io.Discard, nil)),
		SysTopicResendInterval: 1 << 30, // $SYS is not served
	})
	if err := s.srv.AddHook(&hook{s: s}, nil); err != nil {
		return nil, err
	}
	if err := s.srv.AddListener(&listener{ln: opts.Listener}); err != nil {
		return nil, err
	}
	if err := s.srv.Serve(); err != nil {
		return nil, err
	}
	return s, nil
}

// Addr is the address MQTT clients connect to.
func (s *Server) Addr() string { return s.opts.Listener.Addr().String() }

// Close stops accepting, gives every connection up to a second to write
// what it has queued (the acks the broker released at shutdown), and
// closes them.
func (s *Server) Close() {
	deadline := time.After(time.Second)
	s.conns.Range(func(_, v any) bool {
		c := v.(*Conn)
		select {
		case <-c.flushed:
		case <-c.done:
		case <-deadline:
		}
		return true
	})
	s.srv.Close()
}

func (s *Server) pubend(clientID string) msg.PubendID {
	if len(s.opts.Pubends) == 0 {
		return ""
	}
	h := fnv.New32a()
	h.Write([]byte(clientID))
	return s.opts.Pubends[int(h.Sum32()%uint32(len(s.opts.Pubends)))]
}

func (s *Server) conn(cl *mochi.Client) *Conn {
	if v, ok := s.conns.Load(cl); ok {
		return v.(*Conn)
	}
	return nil
}

// listener adapts a net.Listener to mochi's Listener.
type listener struct {
	ln net.Listener
}

func (l *listener) Init(*slog.Logger) error { return nil }
func (l *listener) ID() string              { return "aerie" }
func (l *listener) Address() string         { return l.ln.Addr().String() }
func (l *listener) Protocol() string        { return "tcp" }
func (l *listener) Close(closeClients listeners.CloseFn) {
	l.ln.Close()
	closeClients(l.ID())
}
func (l *listener) Serve(establish listeners.EstablishFn) {
	for {
		nc, err := l.ln.Accept()
		if err != nil {
			if errors.Is(err, net.ErrClosed) {
				return
			}
			time.Sleep(10 * time.Millisecond) // EMFILE and the like; not synchronisation
			continue
		}
		go establish(l.ID(), nc) //nolint:errcheck // a failed connection ends itself
	}
}

// refusal is how a connection is refused or ended: a reason code for MQTT
// 5, and the 3.1.1 CONNACK return code (0: 3.1.1 has none, the connection
// is closed).
type refusal struct {
	code packets.Code
	v3   byte
}

func (r refusal) Error() string { return r.code.Reason }

func refuse(code packets.Code, reason string, v3 byte) refusal {
	code.Reason = reason
	return refusal{code: code, v3: v3}
}

// hook connects mochi to aerie: it decides every CONNECT, takes every
// PUBLISH, SUBSCRIBE and UNSUBSCRIBE away from the library (which then
// routes, retains and stores nothing) and writes the acks aerie decides.
type hook struct {
	mochi.HookBase
	s *Server
}

func (h *hook) ID() string { return "aerie" }

func (h *hook) Provides(b byte) bool {
	switch b {
	case mochi.OnConnect, mochi.OnConnectAuthenticate, mochi.OnACLCheck, mochi.OnSessionEstablished,
		mochi.OnDisconnect, mochi.OnPacketRead, mochi.OnPacketEncode, mochi.OnPublish,
		mochi.OnSubscribe, mochi.OnUnsubscribe:
		return true
	}
	return false
}

// OnConnect refuses what aerie cannot honour yet, with a CONNACK that says
// why: a will message (it would be published by the library, outside
// aerie's guarantees) and a 3.1.1 persistent session (clean session 0:
// persistent sessions need durable subscriptions). An MQTT 5 session
// expiry above 0 is accepted and answered with expiry 0 in the CONNACK, as
// MQTT 5 lets a server do.
func (h *hook) OnConnect(cl *mochi.Client, pk packets.Packet) error {
	var r *refusal
	switch {
	case cl.Properties.Will.Flag != 0:
		x := refuse(packets.ErrImplementationSpecificError, "will messages are not supported by aerie", 0x03)
		r = &x
	case cl.Properties.ProtocolVersion < 5 && !cl.Properties.Clean:
		x := refuse(packets.ErrImplementationSpecificError, "persistent sessions (clean session 0) are not supported by aerie yet", 0x03)
		r = &x
	}
	if r == nil {
		return nil
	}
	h.s.log.Info("refused MQTT connection", "client", cl.ID, "addr", cl.Net.Remote, "reason", r.code.Reason)
	code := r.code
	if cl.Properties.ProtocolVersion < 5 {
		code = packets.Code{Code: r.v3}
	}
	_ = h.s.srv.SendConnack(cl, code, false, nil)
	return *r
}

// OnConnectAuthenticate admits every client: the [[user]] table plugs in
// here (docs/MQTT.md, Security).
// OnConnectAuthenticate checks the CONNECT's user name and password
// against the network's users (Options.Authenticate), on the connection's
// goroutine: bcrypt never holds the broker's loop.
func (h *hook) OnConnectAuthenticate(cl *mochi.Client, pk packets.Packet) bool {
	if h.s.opts.Authenticate == nil {
		return true
	}
	perms, err := h.s.opts.Authenticate(string(pk.Connect.Username), string(pk.Connect.Password))
	if err != nil {
		h.s.opts.Logger.Warn("MQTT client refused", "client", cl.ID, "addr", cl.Net.Remote, "err", err)
		return false
	}
	h.s.perms.Store(cl, perms)
	return true
}

// OnACLCheck allows everything the mapping allows: per-user publish and
// subscribe permissions plug in here.
func (h *hook) OnACLCheck(*mochi.Client, string, bool) bool { return true }

func (h *hook) OnSessionEstablished(cl *mochi.Client, _ packets.Packet) {
	c := newConn(h.s, cl)
	if p, ok := h.s.perms.LoadAndDelete(cl); ok {
		c.perms = p.(*auth.Perms)
	}
	h.s.conns.Store(cl, c)
	c.id = h.s.opts.Host.Up(c)
	c.publisher = fmt.Sprintf("mqtt:%s@%s.%x.%d", cl.ID, h.s.opts.Broker, h.s.opts.Incarnation, c.id)
	go c.writeLoop()
}

func (h *hook) OnDisconnect(cl *mochi.Client, err error, _ bool) {
	h.s.perms.Delete(cl) // authenticated, but no session was established
	c := h.s.conn(cl)
	if c == nil {
		return
	}
	h.s.conns.Delete(cl)
	c.stop()
	h.s.opts.Host.Down(c.id)
	if err != nil && !errors.Is(err, io.EOF) && !errors.Is(err, packets.CodeDisconnect) {
		h.s.log.Info("MQTT connection closed", "client", cl.ID, "addr", cl.Net.Remote, "err", err)
	}
}

// OnPacketRead sees every packet before the library does: PUBACKs of the
// messages aerie delivered, and the publishes refused before any mapping
// (QoS 2, retained, $SYS).
func (h *hook) OnPacketRead(cl *mochi.Client, pk packets.Packet) (packets.Packet, error) {
	c := h.s.conn(cl)
	if c == nil {
		return pk, nil
	}
	switch pk.FixedHeader.Type {
	case packets.Puback:
		c.delivered(pk.PacketID)
	case packets.Pubrec, packets.Pubrel, packets.Pubcomp:
		return pk, c.end(refuse(packets.ErrProtocolViolation, "QoS 2 is not supported by aerie", 0))
	case packets.Publish:
		switch {
		case pk.FixedHeader.Qos > 1:
			return pk, c.end(refuse(packets.ErrQosNotSupported, "QoS 2 is not supported by aerie (the CONNACK says maximum QoS 1)", 0))
		case pk.FixedHeader.Retain:
			return pk, c.end(refuse(packets.ErrRetainNotSupported, "retained messages are not supported by aerie", 0))
		case len(pk.TopicName) >= 4 && strings.EqualFold(pk.TopicName[:4], "$SYS"):
			// The library drops these silently: answer here.
			if err := c.refusePublish(pk, refuse(packets.ErrTopicNameInvalid, "$SYS topics are reserved", 0)); err != nil {
				return pk, err
			}
		}
	}
	return pk, nil
}

// OnPublish hands the publish to aerie and tells the library to do
// nothing more with it (ErrRejectPacket: no PUBACK, no routing, no
// retaining). The PUBACK is written when aerie's PubAck comes back, after
// the event's fsync at its pubend.
func (h *hook) OnPublish(cl *mochi.Client, pk packets.Packet) (packets.Packet, error) {
	c := h.s.conn(cl)
	if c == nil {
		return pk, packets.ErrRejectPacket
	}
	if err := c.publish(pk); err != nil {
		c.end(err.(refusal))
	}
	return pk, packets.ErrRejectPacket
}

// OnSubscribe puts each filter in force in aerie and waits for the answer;
// then it makes every filter invalid for the library, so that its own
// index holds no subscription (it routes nothing), and OnPacketEncode
// writes aerie's answers into the SUBACK.
func (h *hook) OnSubscribe(cl *mochi.Client, pk packets.Packet) packets.Packet {
	c := h.s.conn(cl)
	if c == nil {
		return pk
	}
	c.subscribe(pk)
	filters := slices.Clone(pk.Filters)
	for i := range filters {
		filters[i].Filter = "#/" // invalid: the library subscribes nothing
	}
	pk.Filters = filters
	return pk
}

func (h *hook) OnUnsubscribe(cl *mochi.Client, pk packets.Packet) packets.Packet {
	if c := h.s.conn(cl); c != nil {
		c.unsubscribe(pk)
	}
	return pk
}

// OnPacketEncode replaces the library's SUBACK and UNSUBACK reason codes
// by aerie's.
func (h *hook) OnPacketEncode(cl *mochi.Client, pk packets.Packet) packets.Packet {
	if pk.FixedHeader.Type != packets.Suback && pk.FixedHeader.Type != packets.Unsuback {
		return pk
	}
	c := h.s.conn(cl)
	if c == nil {
		return pk
	}
	if a, ok := c.takeAnswer(pk.FixedHeader.Type, pk.PacketID); ok {
		pk.ReasonCodes = a.codes
		pk.Properties = packets.Properties{ReasonString: a.reason}
	}
	return pk
}
