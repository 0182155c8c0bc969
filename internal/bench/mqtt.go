package bench

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net"
	"strings"
	"sync"
	"time"

	paho "github.com/eclipse/paho.mqtt.golang"
	mochi "github.com/mochi-mqtt/server/v2"
	"github.com/mochi-mqtt/server/v2/packets"

	"github.com/aerie-mq/aerie/internal/broker"
	"github.com/aerie-mq/aerie/internal/mqtt"
)

// The mqtt workload's systems: unmodified MQTT clients (paho) on both
// ends, publishing and subscribing at the same QoS, so the client costs
// are the same and only the brokers differ.
const (
	// SysAerieMQTT: QoS 1; through three hops the publisher is at the PHB
	// and the subscriber at the SHB two hops away; PUBACK after the
	// event's fsync at its PHB.
	SysAerieMQTT = "aerie-mqtt"
	// SysAerieMQTTQoS2: the same at QoS 2 (PUBREC after the fsync).
	SysAerieMQTTQoS2 = "aerie-mqtt-qos2"
	// SysAerieMQTTSession: QoS 1, the subscriber with a persistent
	// session (a durable subscription at the SHB, checkpointed at every
	// PUBACK).
	SysAerieMQTTSession = "aerie-mqtt-session"
	// SysMochi: an embedded mochi-mqtt broker, one broker only, QoS 1, in
	// memory.
	SysMochi = "mochi"
)

// mqttSystemQoS is the QoS a system's clients use.
func mqttSystemQoS(sys string) byte {
	if strings.HasSuffix(sys, "-qos2") {
		return 2
	}
	return 1
}

// mqttWindow bounds a publisher's unacknowledged QoS 1 publishes: one
// below aerie's and mochi's Receive Maximum (1024), which a 3.1.1 client
// is not told and must not exceed.
const mqttWindow = aerieWindow - 1

// MQTTFactories are the mqtt workload's systems.
func MQTTFactories() []Factory {
	return []Factory{
		{System: SysAerieMQTT, Durable: true, Start: func(ctx context.Context, topo Topology, dir string) (Target, error) {
			return startAerieMQTT(ctx, topo, dir, SysAerieMQTT, false)
		}},
		{System: SysAerieMQTTQoS2, Durable: true, Start: func(ctx context.Context, topo Topology, dir string) (Target, error) {
			return startAerieMQTT(ctx, topo, dir, SysAerieMQTTQoS2, false)
		}},
		{System: SysAerieMQTTSession, Durable: true, Start: func(ctx context.Context, topo Topology, dir string) (Target, error) {
			return startAerieMQTT(ctx, topo, dir, SysAerieMQTTSession, true)
		}},
		{System: SysMochi, OneBroker: true, Start: func(ctx context.Context, topo Topology, _ string) (Target, error) {
			if topo.Hops3 {
				return nil, fmt.Errorf("bench: mochi runs as one broker only: %w", errUnsupported)
			}
			return startMochi()
		}},
	}
}

// mqttTarget drives an MQTT broker (or network) through paho clients.
type mqttTarget struct {
	sys        string
	qos        byte // of every publish and subscription
	durable    bool
	persistent bool // subscribers keep a persistent session (clean session 0)
	pubAddr    string
	subAddr    string
	stop       func() error

	mu      sync.Mutex
	clients []paho.Client
	nextSub int
}

func startAerieMQTT(ctx context.Context, topo Topology, dir, sys string, persistent bool) (Target, error) {
	t, err := startAerie(ctx, topo, dir, false, func(o *broker.Options) {
		if o.Clients != "" {
			o.MQTT = "127.0.0.1:0"
		}
		if o.ID == "s1" && persistent {
			o.DataDir = dir + "/s1" // where the SHB keeps persistent sessions
		}
	})
	if err != nil {
		return nil, err
	}
	a := t.(*aerieNet)
	sub := a.nodes[0] // one broker: the PHB serves the subscriber too
	if a.shb != nil {
		sub = a.shb
	}
	m := &mqttTarget{sys: sys, qos: mqttSystemQoS(sys), durable: true, persistent: persistent,
		pubAddr: a.nodes[0].MQTTAddr(), subAddr: sub.MQTTAddr(), stop: a.Close}
	return m, nil
}

func startMochi() (Target, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("bench: mochi listener: %w", err)
	}
	// Room for as many pending writes per client as aerie's SHB queues
	// for a subscriber here (broker.Options.SubscriberQueue): at the
	// default 8 192 mochi drops what a slow QoS 1 subscriber cannot take.
	caps := mochi.NewDefaultServerCapabilities()
	caps.MaximumClientWritesPending = 1 << 20
	srv := mochi.New(&mochi.Options{Logger: slog.New(slog.NewTextHandler(io.Discard, nil)), Capabilities: caps})
	if err := srv.AddHook(new(allowAll), nil); err != nil {
		ln.Close()
		return nil, fmt.Errorf("bench: mochi: %w", err)
	}
	if err := srv.AddListener(mqtt.Listener(ln, "bench")); err != nil {
		ln.Close()
		return nil, fmt.Errorf("bench: mochi: %w", err)
	}
	if err := srv.Serve(); err != nil {
		return nil, fmt.Errorf("bench: mochi: %w", err)
	}
	addr := ln.Addr().String()
	return &mqttTarget{sys: SysMochi, qos: 1, pubAddr: addr, subAddr: addr, stop: srv.Close}, nil
}

func (m *mqttTarget) System() string    { return m.sys }
func (m *mqttTarget) Durable() bool     { return m.durable }
func (m *mqttTarget) Outage(bool) error { return fmt.Errorf("bench: MQTT outage: %w", errUnsupported) }

// connect opens a paho client; lost, if set, hears why the connection ended.
func (m *mqttTarget) connect(ctx context.Context, addr, id string, clean bool, lost func(error)) (paho.Client, error) {
	opts := paho.NewClientOptions().AddBroker("tcp://" + addr).SetClientID(id).SetCleanSession(clean).
		SetAutoReconnect(false).SetConnectTimeout(10 * time.Second).SetKeepAlive(60 * time.Second).
		SetMessageChannelDepth(aerieWindow)
	if lost != nil {
		opts.SetConnectionLostHandler(func(_ paho.Client, err error) { lost(err) })
	}
	c := paho.NewClient(opts)
	if err := waitToken(ctx, c.Connect()); err != nil {
		return nil, fmt.Errorf("bench: MQTT connect to %s: %w", addr, err)
	}
	m.mu.Lock()
	m.clients = append(m.clients, c)
	m.mu.Unlock()
	return c, nil
}

func waitToken(ctx context.Context, tok paho.Token) error {
	select {
	case <-tok.Done():
		return tok.Error()
	case <-ctx.Done():
		return ctx.Err()
	}
}

func (m *mqttTarget) Publisher(ctx context.Context, idx int) (Publisher, error) {
	c, err := m.connect(ctx, m.pubAddr, fmt.Sprintf("bench-pub-%d", idx), true, nil)
	if err != nil {
		return nil, err
	}
	p := &mqttPub{c: c, qos: m.qos, idx: uint32(idx), toks: make(chan paho.Token, mqttWindow-1), done: make(chan struct{})}
	go p.collectAcks()
	return p, nil
}

func (m *mqttTarget) Subscribe(ctx context.Context, f Filter, fn func(Delivery)) (Sub, error) {
	if f.Keyed {
		return nil, fmt.Errorf("bench: MQTT selective subscriptions: %w", errUnsupported)
	}
	m.mu.Lock()
	m.nextSub++
	id := fmt.Sprintf("bench-sub-%d", m.nextSub)
	m.mu.Unlock()
	s := &mqttSub{}
	c, err := m.connect(ctx, m.subAddr, id, !m.persistent, s.lost)
	if err != nil {
		return nil, err
	}
	s.c = c
	// paho acknowledges each message (PUBACK, or PUBREC then PUBCOMP at
	// QoS 2) after the handler returns, one at a time in arrival order.
	tok := c.Subscribe("bench/#", m.qos, func(_ paho.Client, msg paho.Message) {
		if d, err := decodePayload(msg.Payload(), time.Now().UnixNano()); err == nil {
			fn(d)
		}
	})
	if err := waitToken(ctx, tok); err != nil {
		return nil, fmt.Errorf("bench: MQTT subscribe: %w", err)
	}
	if code := tok.(*paho.SubscribeToken).Result()["bench/#"]; code >= 0x80 {
		return nil, fmt.Errorf("bench: MQTT subscribe refused (%#x)", code)
	}
	return s, nil
}

// Close disconnects the clients, then stops the broker(s).
func (m *mqttTarget) Close() error {
	m.mu.Lock()
	cs := m.clients
	m.clients = nil
	m.mu.Unlock()
	for _, c := range cs {
		c.Disconnect(50)
	}
	return m.stop()
}

// mqttPub publishes at QoS 1 or 2; a collector takes the PUBACKs (at QoS
// 2 the PUBCOMPs) in order, so Finish knows when the last one is in.
type mqttPub struct {
	c    paho.Client
	qos  byte
	idx  uint32
	toks chan paho.Token
	done chan struct{}
	err  error // set by collectAcks before done closes
}

func (p *mqttPub) collectAcks() {
	defer close(p.done)
	for tok := range p.toks {
		tok.Wait()
		if err := tok.Error(); err != nil && p.err == nil {
			p.err = err
		}
	}
}

func (p *mqttPub) Publish(ctx context.Context, m Msg) error {
	tok := p.c.Publish("bench/t", p.qos, false, encodePayload(p.idx, m))
	select {
	case p.toks <- tok:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

func (p *mqttPub) Finish(ctx context.Context) error {
	close(p.toks)
	select {
	case <-p.done:
	case <-ctx.Done():
		return fmt.Errorf("bench: waiting for the publishes' acknowledgements: %w", ctx.Err())
	}
	if p.err != nil {
		return fmt.Errorf("bench: MQTT publish failed: %w", p.err)
	}
	p.c.Disconnect(50)
	return nil
}

type mqttSub struct {
	c   paho.Client
	mu  sync.Mutex
	err error
}

func (s *mqttSub) lost(err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.err == nil {
		s.err = fmt.Errorf("MQTT subscriber connection lost: %w", err)
	}
}

func (s *mqttSub) Err() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.err
}

func (s *mqttSub) Close() error {
	if s.c != nil {
		s.c.Disconnect(50)
	}
	return nil
}

// allowAll lets every client connect, publish and subscribe (mochi's own
// allow hook would pull in its YAML ledger).
type allowAll struct{ mochi.HookBase }

func (allowAll) ID() string { return "allow-all" }
func (allowAll) Provides(b byte) bool {
	return b == mochi.OnConnectAuthenticate || b == mochi.OnACLCheck
}
func (allowAll) OnConnectAuthenticate(*mochi.Client, packets.Packet) bool { return true }
func (allowAll) OnACLCheck(*mochi.Client, string, bool) bool              { return true }
