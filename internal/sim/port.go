package sim

import (
	"fmt"
	"io"
	"log/slog"
	"time"

	"github.com/aerie-mq/aerie/internal/gd"
	"github.com/aerie-mq/aerie/internal/match"
	"github.com/aerie-mq/aerie/internal/msg"
	"github.com/aerie-mq/aerie/internal/shell"
	"github.com/aerie-mq/aerie/internal/storage"
	"github.com/aerie-mq/aerie/internal/tick"
	"github.com/aerie-mq/aerie/internal/wire"
)

// port is one incarnation of a simulated broker's connection to the world:
// the runtime shell's Clock, Net and Durability, over simulated time,
// simulated links and the crashable disk. Every message it carries goes
// through the wire codec, as between real brokers, so an asymmetry in the
// codec fails the simulation. Completions of durable work arrive one disk
// latency later and are dropped if the broker crashed meanwhile (inc).
type port struct {
	w   *world
	n   *node
	inc int
	gen int // the shell's generation (a Raft member changes shells without restarting)
}

// quiet discards the shell's log: the simulator reports through its
// oracle and watch log, and a run's millions of lines would cost time.
var quiet = slog.New(slog.NewTextHandler(io.Discard, &slog.HandlerOptions{Level: slog.LevelError + 1}))

// newShell builds the runtime shell of n's current incarnation around a
// fresh engine. A member of a replicated PHB cell runs the pubends only
// while it is the serving leader, with the Raft member as its Durability
// (raft.go); otherwise its shell has no routes.
func (w *world) newShell(n *node) {
	n.gen++
	hosted := n.broker.Pubends
	standby := n.raft != nil && !n.raft.serving
	if standby {
		hosted = nil
	}
	w.newEngine(n, standby)
	p := &port{w: w, n: n, inc: n.inc, gen: n.gen}
	cfg := shell.Config{ID: n.id, Engine: n.eng, Clock: p, Net: p, Hosted: hosted, Logger: quiet, Strict: true,
		TrimOnlyWhenIdle: w.opts.TrimOnlyWhenIdle}
	switch {
	case n.disk != nil:
		cfg.Durability = p
	case n.raft != nil && !standby:
		cfg.Durability = &raftDur{w: w, n: n, gen: n.gen}
	}
	n.sh = shell.New(cfg)
}

func (p *port) live() bool { return p.n.up && p.n.inc == p.inc && p.n.gen == p.gen }

// Now is the broker's clock: true time with its offset and drift.
func (p *port) Now() tick.Time { return p.w.localNow(p.n) }

// Send carries m over the simulated link, encoded and decoded on the way.
func (p *port) Send(to msg.NodeID, m msg.Msg) {
	w, n := p.w, p.n
	eachKnowledge(m, func(k msg.Knowledge) {
		w.orc.Sent(n.id, n.broker.Role == PHB, k, func(t tick.Tick) match.Filter { return n.eng.FilterAt(k.Pubend, to, t) })
	})
	m = p.wire(m)
	w.transmit(msg.Envelope{From: n.id, To: to, Msg: m}, len(w.frame))
}

// ToClient hands m to a simulated client, through the codec. The wire
// decodes a Delivery as a pointer (allocated with its event); the
// simulated clients read values, and a DeliveryRun as the Deliveries it
// stands for, in order, as the Go client delivers them.
func (p *port) ToClient(c shell.ClientID, m msg.Msg) {
	if p.w.forwardedAnswer(p.n, c, m) || p.w.relayedAnswer(p.n, c, m) {
		return
	}
	m = p.wire(m)
	if r, ok := m.(*msg.DeliveryRun); ok {
		r.Split(func(d msg.Delivery) { p.w.toClient(p.n, d) })
		return
	}
	if d, ok := msg.AsDelivery(m); ok {
		m = d
	}
	p.w.toClient(p.n, m)
}

// CloseClient: simulated clients send only valid requests, so the broker
// closing one is a bug.
func (p *port) CloseClient(c shell.ClientID, err error, reason string) {
	panic(fmt.Sprintf("sim: %s closed client %d: %v (%s)", p.n.id, c, err, reason))
}

func (p *port) wire(m msg.Msg) msg.Msg { return p.w.viaWire(m) }

// viaWire encodes m and decodes the frame again, as a real connection
// does: what arrives is what the codec makes of it.
func (w *world) viaWire(m msg.Msg) msg.Msg {
	var err error
	w.frame, err = wire.AppendFrame(w.frame[:0], m)
	if err != nil {
		panic(fmt.Sprintf("sim: encode %v: %v", m, err))
	}
	out, err := wire.Decode(w.frame[4:])
	if err != nil {
		panic(fmt.Sprintf("sim: decode %v: %v", m, err))
	}
	return out
}

// Append writes recs to the disk now (volatile) and completes the fsync one
// disk latency later, unless the broker crashed meanwhile.
func (p *port) Append(recs []msg.Record) {
	first := p.n.disk.append(recs)
	if p.w.scale != nil {
		p.w.scale.countRecords(recs)
	}
	p.w.after(p.w.plan.diskLatency, func() { p.synced(first, recs) })
}

func (p *port) synced(first uint64, recs []msg.Record) {
	w, n := p.w, p.n
	if !p.live() {
		return
	}
	err := n.disk.sync()
	if noRoom(err) && w.opts.AckFullSync && n.disk.store.Reopen() == nil {
		// The mutation: the runtime reopens the log, the batch cut off,
		// and reports the batch durable, as if its fsync had succeeded.
		err = nil
	}
	if noRoom(err) {
		// A full disk (FaultDiskFull) stops nothing: the shell keeps the
		// batch unacked, refuses publishes, and reopens the log later
		// (ReopenLog) to append it again.
		w.watchf("disk full at %s: %v", n.id, err)
		w.input(n, func(b *shell.Broker) {
			if err := b.Persisted(first, err); err != nil {
				panic(fmt.Sprintf("sim: %s: %v", n.id, err))
			}
		})
		return
	}
	if err != nil {
		// A failed fsync cannot be retried safely: the broker stops without
		// acking the batch (crash-only) and is restarted, like a supervisor
		// would, after a moment.
		w.watchf("fsync failed at %s: %v", n.id, err)
		w.fsyncFailures++
		w.crash(n)
		w.after(time.Duration(100+w.rng.IntN(900))*time.Millisecond, func() { w.restart(n) })
		return
	}
	for _, r := range recs {
		if r.Event != nil {
			w.orc.Logged(r.Event)
		}
	}
	w.input(n, func(b *shell.Broker) {
		if err := b.Persisted(first, nil); err != nil {
			panic(fmt.Sprintf("sim: %s: %v", n.id, err))
		}
	})
}

// ReopenLog reopens the log one disk latency after the shell asked (its
// disk was full), keeping what was durable before the failure.
// NoRoom classifies a failed append (shell.Reopener).
func (p *port) NoRoom(err error) (string, bool) { return storage.NoRoom(err) }

// noRoom reports whether err is for want of room (storage.NoRoom).
func noRoom(err error) bool {
	_, ok := storage.NoRoom(err)
	return ok
}

func (p *port) ReopenLog() {
	p.w.after(p.w.plan.diskLatency, func() {
		if !p.live() {
			return
		}
		w, n := p.w, p.n
		err := n.disk.store.Reopen()
		w.watchf("reopen log at %s: %v", n.id, err)
		if err != nil && !noRoom(err) {
			// An I/O error (FaultIOError) stops the broker, as a failed
			// fsync does (synced).
			w.fsyncFailures++
			w.crash(n)
			w.after(time.Duration(100+w.rng.IntN(900))*time.Millisecond, func() { w.restart(n) })
			return
		}
		if err == nil {
			w.diskReopens++
		}
		w.input(n, func(b *shell.Broker) {
			if err := b.LogReopened(err); err != nil {
				panic(fmt.Sprintf("sim: %s: %v", n.id, err))
			}
		})
	})
}

// Fetch reads events back one disk latency after the engine asked.
func (p *port) Fetch(f gd.Fetch, from []uint64) {
	p.w.after(p.w.plan.diskLatency, func() {
		if !p.live() {
			return
		}
		evs, err := p.n.disk.store.Fetch(f.Pubend, f.Ranges, from)
		p.w.fetches++
		p.w.input(p.n, func(b *shell.Broker) { b.Fetched(gd.Fetched{Pubend: f.Pubend, Events: evs, Err: err}) })
	})
}

// Trim runs retention on the disk now; the shell learns one disk latency
// later (the snapshot's fsyncs).
func (p *port) Trim(cut uint64, snap []msg.Record) {
	first, dropped, err := p.n.disk.trim(cut, snap)
	if err != nil {
		// A failed trim (an I/O error writing the snapshot) truncates
		// nothing; the broker logs it and tries again later.
		p.w.watchf("trim failed at %s: %v", p.n.id, err)
	}
	p.w.after(p.w.plan.diskLatency, func() {
		if p.live() {
			p.w.input(p.n, func(b *shell.Broker) { b.Trimmed(first, dropped, err) })
		}
	})
}
