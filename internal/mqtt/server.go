package mqtt

import (
	"errors"
	"fmt"
	"hash/fnv"
	"io"
	"log/slog"
	"math"
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
	// Session returns the durable subscriptions held at this broker under
	// prefix, sorted by name: a persistent session's (session.go). It
	// waits for the broker's loop.
	Session(prefix string) ([]msg.DurableSub, error)
	// Checkpoints returns the checkpoints of the durable subscriptions
	// under prefix as the broker's log has them (durable), by name. It
	// waits for the broker's loop.
	Checkpoints(prefix string) (map[msg.SubID]msg.Token, error)
	// EndSession deletes the durable subscriptions under prefix, attached
	// or away (a session cleaned, or expired). Posted in order with the
	// calls above.
	EndSession(prefix string)
}

// Options configure a Server.
type Options struct {
	// Listener accepts the MQTT connections (TLS, once the broker has it,
	// is a tls.NewListener around the TCP one: see docs/MQTT.md).
	Listener net.Listener
	// Broker and Incarnation name this broker in publisher names.
	Broker      msg.NodeID
	Incarnation uint64
	// Pubends are the pubends MQTT publishes go to: those this broker
	// hosts, or, at a broker that hosts none, those it relays to (up
	// their trees); publishes are refused at a broker that has none. An
	// MQTT client id always publishes to the same one, so its messages
	// stay in order across reconnections.
	Pubends []msg.PubendID
	Host    Host
	// Sessions: the broker can keep persistent sessions (it has a data
	// directory for their durable subscriptions). Without, a 3.1.1 clean
	// session 0 is refused and an MQTT 5 session expiry is answered with 0.
	Sessions bool
	// Queue bounds the messages queued to one connection: a subscriber
	// that falls further behind is disconnected with a reason (0 is 100000).
	Queue int
	// SubscribeWait bounds how long a SUBACK waits for the network to put
	// the subscription in force (0 is 30s); after that it is granted and
	// the subscription completes in the background.
	SubscribeWait time.Duration
	Logger        *slog.Logger
	// WillDir keeps the wills of the connections up, so that a broker
	// that crashed publishes them when it starts again (willstore.go);
	// "": wills are in memory only.
	WillDir string
	// RetainedNetwork: the broker's retained store also learns the
	// retained messages published at other brokers, through a
	// subscription of its own (retain.go).
	RetainedNetwork bool
	// RetainedFile keeps the retained store across restarts, and makes
	// the subscription that feeds it durable (retain.go, retainfile.go);
	// "": the store is in memory only.
	RetainedFile string
	// SessionDir keeps the publishing state of persistent sessions across
	// restarts (sessionfile.go); "": it is in memory only.
	SessionDir string
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

// topicAliasMaximum is how many topic aliases an MQTT 5 client may set
// on a connection (CONNACK Topic Alias Maximum): each holds a topic of
// up to 64 KiB, so they cost a connection at most 2 MiB.
const topicAliasMaximum = 32

// SelectorProperty is the MQTT 5 user property of a SUBSCRIBE that carries
// a JMS selector for its filters: an aerie extension.
const SelectorProperty = "aerie-selector"

// Server is an MQTT listener bound to one broker.
type Server struct {
	opts  Options
	srv   *mochi.Server
	log   *slog.Logger
	conns sync.Map // *mochi.Client → *Conn
	// resumed holds, from CONNECT to the session's start, the durable
	// subscriptions a persistent session resumes (*mochi.Client →
	// []msg.DurableSub).
	resumed sync.Map
	perms   sync.Map // *mochi.Client → *auth.Perms, from authentication to the session
	// willProps holds, from CONNECT to the session's start, the will's
	// MQTT 5 properties (*mochi.Client → packets.Properties): the
	// library's Will keeps only its user properties.
	willProps sync.Map
	states    clientStates
	wills     pendingWills
	retained  retainStore
	watchID   shell.ClientID // the retained watch's client, once watching
	watching  bool
	closing   chan struct{} // closed by Close: wills stop waiting, the store is written a last time
	closeMu   sync.Once
	bg        sync.WaitGroup // keepRetained, and the retained watch's start
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
	caps.SharedSubAvailable = 1                        // $share: consumer groups (docs/MQTT.md)
	caps.MaximumSessionExpiryInterval = math.MaxUint32 // 3.1.1 persistent sessions never expire
	caps.ReceiveMaximum = receiveMaximum
	caps.MaximumPacketSize = msg.MaxEventBytes + 64<<10
	caps.TopicAliasMaximum = topicAliasMaximum
	caps.Compatibilities.NoInheritedPropertiesOnAck = true
	s := &Server{opts: opts, log: opts.Logger, states: clientStates{states: map[string]*clientState{}},
		wills: pendingWills{m: map[string]*pendingWill{}}, retained: newRetainStore(),
		closing: make(chan struct{})}
	s.loadSessions() // before the first connection, and the wills of the previous run
	if opts.RetainedFile != "" {
		s.retained.changed = make(chan struct{}, 1)
		s.loadRetained() // before the first subscriber
	}
	s.srv = mochi.New(&mochi.Options{
		Capabilities:           caps,
		Logger:                 slog.New(slog.NewTextHandler(io.Discard, nil)),
		SysTopicResendInterval: 1 << 30, // $SYS is not served
	})
	if err := s.srv.AddHook(&hook{s: s}, nil); err != nil {
		return nil, err
	}
	if err := s.srv.AddListener(Listener(opts.Listener, "aerie")); err != nil {
		return nil, err
	}
	if err := s.srv.Serve(); err != nil {
		return nil, err
	}
	if opts.RetainedNetwork {
		s.watchRetained()
	}
	if opts.RetainedFile != "" {
		s.bg.Add(1)
		go s.keepRetained()
	}
	s.publishStoredWills()
	return s, nil
}

// Addr is the address MQTT clients connect to.
func (s *Server) Addr() string { return s.opts.Listener.Addr().String() }

// Close stops accepting, gives every connection up to a second to write
// what it has queued (the acks the broker released at shutdown), closes
// them, and writes the retained store a last time. A second Close does
// nothing.
func (s *Server) Close() { s.closeMu.Do(s.shutdown) }

func (s *Server) shutdown() {
	close(s.closing)
	s.wills.mu.Lock()
	for id, p := range s.wills.m { // in memory only (docs/MQTT.md, Wills)
		p.t.Stop()
		delete(s.wills.m, id)
	}
	s.wills.mu.Unlock()
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
	s.bg.Wait()
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

// Listener adapts a net.Listener, already bound (port 0 included), to
// mochi's Listener under the name id.
func Listener(ln net.Listener, id string) listeners.Listener { return &listener{ln: ln, id: id} }

type listener struct {
	ln net.Listener
	id string
}

func (l *listener) Init(*slog.Logger) error { return nil }
func (l *listener) ID() string              { return l.id }
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
	case mochi.OnConnect, mochi.OnConnectAuthenticate, mochi.OnACLCheck, mochi.OnSessionEstablish,
		mochi.OnSessionEstablished, mochi.OnDisconnect, mochi.OnClientExpired, mochi.OnPacketRead,
		mochi.OnPacketEncode, mochi.OnPacketSent, mochi.OnPublish, mochi.OnSubscribe, mochi.OnUnsubscribe:
		return true
	}
	return false
}

// OnConnect authenticates the client and refuses what aerie cannot
// honour, with a CONNACK that says why: bad credentials, a persistent
// session at a broker without data, a will aerie cannot publish (its
// topic has no aerie form, or the user may not publish to it). It runs
// on the connection's goroutine: bcrypt never holds the broker's loop.
func (h *hook) OnConnect(cl *mochi.Client, pk packets.Packet) error {
	var perms *auth.Perms
	var r *refusal
	if h.s.opts.Authenticate != nil {
		p, err := h.s.opts.Authenticate(string(pk.Connect.Username), string(pk.Connect.Password))
		if err != nil {
			h.s.opts.Logger.Warn("MQTT client refused", "client", cl.ID, "addr", cl.Net.Remote, "err", err)
			x := refuse(packets.ErrBadUsernameOrPassword, "bad user name or password", 0x04)
			r = &x
		}
		perms = p
	}
	switch {
	case r != nil:
	case !h.s.opts.Sessions && cl.Properties.ProtocolVersion < 5 && !cl.Properties.Clean:
		x := refuse(packets.ErrImplementationSpecificError, fmt.Sprintf(
			"broker %s keeps no data, so it cannot keep persistent sessions (clean session 0): connect to a broker with a data directory", h.s.opts.Broker), 0x03)
		r = &x
	default:
		r = checkWill(cl, perms, &pk.Connect.WillProperties)
	}
	if r == nil && pk.Connect.WillFlag {
		h.s.willProps.Store(cl, pk.Connect.WillProperties) // takeWill's
	}
	if r == nil {
		if !h.s.opts.Sessions {
			// MQTT 5 lets the server answer a shorter expiry (OnPacketEncode).
			cl.Properties.Props.SessionExpiryInterval = 0
		}
		h.s.perms.Store(cl, perms)
		return nil
	}
	h.s.log.Info("refused MQTT connection", "client", cl.ID, "addr", cl.Net.Remote, "reason", r.code.Reason)
	if cl.Properties.ProtocolVersion >= 5 {
		_ = h.s.srv.SendConnack(cl, r.code, false, nil)
	} else if r.v3 != 0 {
		_ = h.s.srv.SendConnack(cl, packets.Code{Code: r.v3}, false, nil)
	} // else 3.1.1 has no code for it: the connection is closed
	return *r
}

// OnConnectAuthenticate admits the client OnConnect admitted.
func (h *hook) OnConnectAuthenticate(*mochi.Client, packets.Packet) bool { return true }

// OnACLCheck allows everything the mapping allows: per-user publish and
// subscribe permissions plug in here.
func (h *hook) OnACLCheck(*mochi.Client, string, bool) bool { return true }

// persistent reports whether cl's session outlives its connection: 3.1.1
// clean session 0, MQTT 5 session expiry above 0.
func persistent(cl *mochi.Client) bool {
	if cl.Properties.ProtocolVersion >= 5 {
		return cl.Properties.Props.SessionExpiryInterval > 0
	}
	return !cl.Properties.Clean
}

// OnSessionEstablish, before the CONNACK: a clean start, or a session
// that does not persist, deletes what the client id had (MQTT 3.1.2.4);
// a persistent session looks up what it resumes, so that the CONNACK says
// whether a session was present.
func (h *hook) OnSessionEstablish(cl *mochi.Client, pk packets.Packet) {
	prefix := sessionPrefix(cl.ID)
	newSession := pk.Connect.Clean || !persistent(cl)
	h.s.willReturn(cl.ID, newSession)
	if newSession {
		h.s.state(cl.ID, true) // a new session: no packet ids, a new publisher
		h.s.opts.Host.EndSession(prefix)
		return
	}
	ds, err := h.s.opts.Host.Session(prefix)
	if err != nil {
		h.s.log.Warn("could not look up an MQTT persistent session", "client", cl.ID, "err", err)
		return
	}
	h.s.resumed.Store(cl, ds)
}

func (h *hook) OnSessionEstablished(cl *mochi.Client, _ packets.Packet) {
	c := newConn(h.s, cl)
	if p, ok := h.s.perms.LoadAndDelete(cl); ok {
		c.perms = p.(*auth.Perms)
	}
	w, err := h.s.takeWill(cl, c.perms)
	if err != nil { // checked at CONNECT: not reached
		h.s.log.Warn("MQTT will dropped", "client", cl.ID, "err", err)
	}
	c.will = w
	c.persistent, c.prefix = persistent(cl), sessionPrefix(cl.ID)
	st := h.s.state(cl.ID, false)
	st.mu.Lock()
	prev := st.owner
	st.owner, c.st, c.publisher = c, st, st.publisher
	if c.persistent && h.s.opts.SessionDir != "" {
		st.persist = true // written at its first publish (sessionfile.go)
	}
	st.mu.Unlock()
	h.s.conns.Store(cl, c)
	c.id = h.s.opts.Host.Up(c)
	if ds, ok := h.s.resumed.LoadAndDelete(cl); ok && c.persistent {
		c.waitPrevious(prev)
		st.mu.Lock()
		sd := st.deliveries
		st.deliveries = sessionDeliveries{}
		if st.restored { // the previous run's, from the session's file
			sd = fileDeliveries(st.out, ds.([]msg.DurableSub))
			st.restored = false
		}
		st.mu.Unlock()
		c.restoreDeliveries(sd)
		c.resume(ds.([]msg.DurableSub))
	}
	// The session goes on here: a will its previous connection left
	// waiting for its delay is not published (st.owner is c now).
	h.s.willReturn(cl.ID, false)
	if c.v5 {
		c.aliases.max = cl.Properties.Props.TopicAliasMaximum
	}
	go c.writeLoop()
}

func (h *hook) OnDisconnect(cl *mochi.Client, err error, expire bool) {
	h.s.perms.Delete(cl) // authenticated, but no session was established
	h.s.resumed.Delete(cl)
	h.s.willProps.Delete(cl)
	c := h.s.conn(cl)
	if c == nil {
		return
	}
	h.s.conns.Delete(cl)
	c.stop()
	c.closeCheckpoints()
	c.leave(expire && !cl.IsTakenOver())
	h.s.willGone(c, expire)
	if c.persistent && expire && !cl.IsTakenOver() {
		// An MQTT 5 DISCONNECT that set the session expiry to 0.
		h.s.opts.Host.EndSession(c.prefix)
	}
	h.s.opts.Host.Down(c.id)
	close(c.ended)
	if err != nil && !errors.Is(err, io.EOF) && !errors.Is(err, packets.CodeDisconnect) {
		h.s.log.Info("MQTT connection closed", "client", cl.ID, "addr", cl.Net.Remote, "err", err)
	}
}

// OnClientExpired: a persistent session's expiry interval has passed
// since its client left; its durable subscriptions go, releasing what
// they held.
func (h *hook) OnClientExpired(cl *mochi.Client) {
	h.s.log.Info("MQTT session expired", "client", cl.ID)
	h.s.states.mu.Lock()
	st := h.s.states.states[cl.ID]
	h.s.states.mu.Unlock()
	if st != nil {
		h.s.dropState(cl.ID, st)
	}
	h.s.opts.Host.EndSession(sessionPrefix(cl.ID))
}

// OnPacketRead sees every packet before the library does: PUBACKs of the
// messages aerie delivered and the QoS 2 exchanges in both directions
// (qos2.go), and the publishes refused before any mapping (retained,
// $SYS).
func (h *hook) OnPacketRead(cl *mochi.Client, pk packets.Packet) (packets.Packet, error) {
	c := h.s.conn(cl)
	if c == nil {
		return pk, nil
	}
	switch pk.FixedHeader.Type {
	case packets.Puback, packets.Pubrec, packets.Pubrel, packets.Pubcomp:
		switch pk.FixedHeader.Type {
		case packets.Puback:
			c.pubacked(pk.PacketID)
		case packets.Pubrec:
			if err := c.received(pk.PacketID, pk.ReasonCode); err != nil {
				return pk, c.end(err.(refusal))
			}
		case packets.Pubrel:
			if err := c.release(pk.PacketID); err != nil {
				return pk, c.end(err.(refusal))
			}
		case packets.Pubcomp:
			c.completed(pk.PacketID)
		}
		// aerie keeps every packet id in flight, the library none: as a
		// PUBACK for an id it does not hold, the library ignores it.
		pk.FixedHeader.Type = packets.Puback
		return pk, nil
	case packets.Publish:
		switch {
		case len(pk.TopicName) >= 4 && strings.EqualFold(pk.TopicName[:4], "$SYS"):
			// The library drops these silently: answer here.
			if err := c.refusePublish(pk, refuse(packets.ErrTopicNameInvalid, "$SYS topics are reserved", 0)); err != nil {
				return pk, c.end(err.(refusal))
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
	if pk.TopicName == "" {
		// The library put the alias's topic in its place, and there was
		// none: a Protocol Error [MQTT-3.3.2-7] (MQTT 5 §3.3.2.3.4).
		c.end(refuse(packets.ErrProtocolViolation, fmt.Sprintf("topic alias %d has no topic on this connection", pk.Properties.TopicAlias), 0))
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
// by aerie's, and says in the CONNACK whether aerie holds the session the
// client resumes (the library knows only the sessions of its own run) and
// how many topic aliases the client may set.
func (h *hook) OnPacketEncode(cl *mochi.Client, pk packets.Packet) packets.Packet {
	if pk.FixedHeader.Type == packets.Connack && pk.ReasonCode == 0 {
		if ds, ok := h.s.resumed.Load(cl); ok {
			pk.SessionPresent = len(ds.([]msg.DurableSub)) > 0
		}
		if !h.s.opts.Sessions && cl.Properties.ProtocolVersion >= 5 {
			pk.Properties.SessionExpiryInterval, pk.Properties.SessionExpiryIntervalFlag = 0, true
		}
		if cl.Properties.ProtocolVersion >= 5 {
			pk.Properties.TopicAliasMaximum = topicAliasMaximum // the library does not say it
			// Shared subscriptions are consumer groups (docs/MQTT.md).
			pk.Properties.SharedSubAvailable, pk.Properties.SharedSubAvailableFlag = 1, true
		}
		return pk
	}
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
