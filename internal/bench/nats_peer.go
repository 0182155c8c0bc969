//go:build natspeer

package bench

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// NATSFactories are the peers: core NATS (best effort), JetStream R1 file
// storage with SyncAlways (fsync before ack, the fair comparison) and
// JetStream with default settings (acks before fsync: not durable).
func NATSFactories() ([]Factory, error) {
	mk := func(sys string, js, sync bool) Factory {
		maxSubs := 0
		if js {
			// One ordered consumer per subscriber: at ~10 000 their creation
			// alone took minutes and 6 GiB here, so fan-out beyond this is
			// left to core NATS.
			maxSubs = 4000
		}
		return Factory{System: sys, Durable: sync, MaxSubs: maxSubs, Start: func(ctx context.Context, topo Topology, dir string) (Target, error) {
			return startNATS(ctx, sys, js, sync, dir)
		}}
	}
	return []Factory{
		mk(SysJetStreamSync, true, true),
		mk(SysJetStreamDef, true, false),
		mk(SysNATSCore, false, false),
	}, nil
}

const (
	streamName   = "BENCH"
	flushTimeout = 30 * time.Second
)

// natsTarget is one embedded server and the connections opened to it.
type natsTarget struct {
	sys   string
	js    bool
	durab bool
	srv   *server.Server

	mu    sync.Mutex
	conns []*nats.Conn
	subs  []*natsSub
	cut   bool
}

func startNATS(ctx context.Context, sys string, js, syncAlways bool, dir string) (Target, error) {
	opts := &server.Options{Host: "127.0.0.1", Port: server.RANDOM_PORT, NoLog: true, NoSigs: true,
		JetStream: js, StoreDir: dir, SyncAlways: syncAlways, DisableJetStreamBanner: true,
		MaxPayload: 1 << 20, MaxPending: 1 << 30}
	srv, err := server.NewServer(opts)
	if err != nil {
		return nil, fmt.Errorf("bench: nats server: %w", err)
	}
	go srv.Start()
	if !srv.ReadyForConnections(10 * time.Second) {
		srv.Shutdown()
		return nil, errors.New("bench: nats server did not start within 10s")
	}
	t := &natsTarget{sys: sys, js: js, durab: syncAlways, srv: srv}
	if js {
		nc, err := t.connect()
		if err != nil {
			return nil, t.closeWith(err)
		}
		j, err := jetstream.New(nc)
		if err == nil {
			_, err = j.CreateStream(ctx, jetstream.StreamConfig{Name: streamName, Subjects: []string{"bench.>"},
				Storage: jetstream.FileStorage, Replicas: 1,
				// Explicit, so the server's default cap (1000) does not
				// stop the fan-out workload's thousands of consumers.
				MaxConsumers: 1 << 20})
		}
		if err != nil {
			return nil, t.closeWith(fmt.Errorf("bench: create stream: %w", err))
		}
	}
	return t, nil
}

func (t *natsTarget) connect() (*nats.Conn, error) {
	nc, err := nats.Connect(t.srv.ClientURL(), nats.MaxReconnects(-1), nats.ReconnectBufSize(64<<20))
	if err != nil {
		return nil, fmt.Errorf("bench: nats connect: %w", err)
	}
	t.mu.Lock()
	t.conns = append(t.conns, nc)
	t.mu.Unlock()
	return nc, nil
}

func (t *natsTarget) System() string { return t.sys }
func (t *natsTarget) Durable() bool  { return t.durab }

func subject(key int) string { return "bench.k." + strconv.Itoa(key) }

func (t *natsTarget) Publisher(ctx context.Context, idx int) (Publisher, error) {
	nc, err := t.connect()
	if err != nil {
		return nil, err
	}
	p := &natsPub{nc: nc, idx: uint32(idx)}
	if t.js {
		// Our own window bounds the acks outstanding (as for aerie); the
		// library's bound is set above it so it never stalls first.
		p.js, err = jetstream.New(nc, jetstream.WithPublishAsyncMaxPending(4*aerieWindow))
		if err != nil {
			return nil, fmt.Errorf("bench: jetstream: %w", err)
		}
		p.acks = make(chan jetstream.PubAckFuture, aerieWindow)
		p.done = make(chan struct{})
		go p.collectAcks()
	}
	return p, nil
}

func (t *natsTarget) Subscribe(ctx context.Context, f Filter, fn func(Delivery)) (Sub, error) {
	nc, err := t.connect()
	if err != nil {
		return nil, err
	}
	subj := "bench.>"
	if f.Keyed {
		subj = subject(f.Key)
	}
	s := &natsSub{fn: fn}
	if !t.js {
		if s.core, err = nc.Subscribe(subj, s.onMsg); err == nil {
			err = s.core.SetPendingLimits(-1, -1) // never drop as a slow consumer: we count what arrives
		}
		if err == nil {
			err = nc.FlushTimeout(flushTimeout) // the server has the interest before we return
		}
		if err != nil {
			return nil, fmt.Errorf("bench: nats subscribe: %w", err)
		}
		return s, nil
	}
	j, err := jetstream.New(nc)
	if err != nil {
		return nil, fmt.Errorf("bench: jetstream: %w", err)
	}
	cfg := jetstream.OrderedConsumerConfig{DeliverPolicy: jetstream.DeliverNewPolicy}
	if f.Keyed {
		cfg.FilterSubjects = []string{subj}
	}
	s.js, s.cfg = j, cfg
	if err := s.resume(); err != nil {
		return nil, err
	}
	t.mu.Lock()
	t.subs = append(t.subs, s)
	t.mu.Unlock()
	return s, nil
}

// Outage stops the JetStream consumers (they keep their position) and
// resumes them on heal: the subscriber is cut off while the stream keeps
// logging. Core NATS retains nothing to catch up from.
func (t *natsTarget) Outage(cut bool) error {
	if !t.js {
		return fmt.Errorf("core NATS keeps no backlog: %w", errUnsupported)
	}
	t.mu.Lock()
	subs := t.subs
	t.cut = cut
	t.mu.Unlock()
	for _, s := range subs {
		if cut {
			s.pause()
		} else if err := s.resume(); err != nil {
			return err
		}
	}
	return nil
}

func (t *natsTarget) closeWith(err error) error {
	t.Close()
	return err
}

func (t *natsTarget) Close() error {
	t.mu.Lock()
	conns, subs := t.conns, t.subs
	t.conns, t.subs = nil, nil
	t.mu.Unlock()
	for _, s := range subs {
		s.pause()
	}
	for _, nc := range conns {
		nc.Close()
	}
	t.srv.Shutdown()
	t.srv.WaitForShutdown()
	return nil
}

type natsSub struct {
	fn   func(Delivery)
	core *nats.Subscription
	js   jetstream.JetStream
	cfg  jetstream.OrderedConsumerConfig

	mu      sync.Mutex
	cc      jetstream.ConsumeContext
	lastSeq uint64 // last stream sequence delivered, to resume after a pause
}

func (s *natsSub) onMsg(m *nats.Msg) {
	if d, err := decodePayload(m.Data, time.Now().UnixNano()); err == nil {
		s.fn(d)
	}
}

func (s *natsSub) resume() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.cc != nil {
		return nil
	}
	// An ordered consumer cannot be restarted once stopped, so a resume
	// opens a new one just after the last stream sequence delivered.
	cfg := s.cfg
	if s.lastSeq > 0 {
		cfg.DeliverPolicy, cfg.OptStartSeq = jetstream.DeliverByStartSequencePolicy, s.lastSeq+1
	}
	cons, err := s.js.OrderedConsumer(context.Background(), streamName, cfg)
	if err != nil {
		return fmt.Errorf("bench: ordered consumer: %w", err)
	}
	cc, err := cons.Consume(func(m jetstream.Msg) {
		recv := time.Now().UnixNano()
		if md, err := m.Metadata(); err == nil {
			s.mu.Lock()
			s.lastSeq = md.Sequence.Stream
			s.mu.Unlock()
		}
		if d, err := decodePayload(m.Data(), recv); err == nil {
			s.fn(d)
		}
	})
	if err != nil {
		return fmt.Errorf("bench: consume: %w", err)
	}
	s.cc = cc
	return nil
}

func (s *natsSub) pause() {
	s.mu.Lock()
	cc := s.cc
	s.cc = nil
	s.mu.Unlock()
	if cc != nil {
		cc.Stop()
		<-cc.Closed()
	}
}

func (s *natsSub) Err() error {
	if s.core != nil && !s.core.IsValid() {
		return errors.New("nats subscription no longer valid")
	}
	return nil
}

func (s *natsSub) Close() error {
	if s.core != nil {
		return s.core.Unsubscribe()
	}
	s.pause()
	return nil
}

// natsPub: core publishes are flushed (a round trip) every window messages,
// so the publisher cannot run unboundedly ahead of the server; JetStream
// publishes are asynchronous with at most window acks outstanding.
type natsPub struct {
	nc  *nats.Conn
	js  jetstream.JetStream
	idx uint32
	n   int

	acks chan jetstream.PubAckFuture
	done chan struct{}
	err  error // set by collectAcks before done closes
}

// collectAcks takes the JetStream acks in order, freeing window slots.
func (p *natsPub) collectAcks() {
	defer close(p.done)
	for f := range p.acks {
		select {
		case <-f.Ok():
		case err := <-f.Err():
			if p.err == nil {
				p.err = err
			}
		}
	}
}

func (p *natsPub) Publish(ctx context.Context, m Msg) error {
	data := encodePayload(p.idx, m)
	subj := subject(m.Key)
	if p.js != nil {
		f, err := p.js.PublishAsync(subj, data)
		if err != nil {
			return fmt.Errorf("bench: js publish %d: %w", m.Seq, err)
		}
		select {
		case p.acks <- f:
			return nil
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	if err := p.nc.Publish(subj, data); err != nil {
		return fmt.Errorf("bench: nats publish %d: %w", m.Seq, err)
	}
	if p.n++; p.n%aerieWindow == 0 {
		if err := p.nc.FlushTimeout(flushTimeout); err != nil {
			return fmt.Errorf("bench: nats flush: %w", err)
		}
	}
	return nil
}

func (p *natsPub) Finish(ctx context.Context) error {
	if p.js == nil {
		if err := p.nc.FlushTimeout(flushTimeout); err != nil {
			return fmt.Errorf("bench: nats flush: %w", err)
		}
		return nil
	}
	close(p.acks)
	select {
	case <-p.done:
	case <-ctx.Done():
		return fmt.Errorf("bench: waiting for JetStream acks: %w", ctx.Err())
	}
	if p.err != nil {
		return fmt.Errorf("bench: publish failed: %w", p.err)
	}
	return nil
}
