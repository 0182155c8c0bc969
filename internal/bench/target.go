package bench

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"

	"github.com/aerie-mq/aerie/internal/lattrace"
)

// System names, as in the `--json` contract (docs/BENCHMARKS.md "Method").
const (
	// SysAerie runs Gryphon CC in every broker, as a network config
	// without congestion_control does.
	SysAerie           = "aerie"
	SysAerieBestEffort = "aerie-best-effort"
	// SysAerieNoCC is aerie with congestion_control = false: what Gryphon
	// CC costs where nothing is congested is SysAerie against it.
	SysAerieNoCC     = "aerie-no-cc"
	SysNATSCore      = "nats-core"
	SysJetStreamSync = "nats-jetstream-sync"
	SysJetStreamDef  = "nats-jetstream-default"
)

// errUnsupported: the system cannot run this workload (e.g. core NATS keeps
// nothing to catch up from); reported, not fatal.
var errUnsupported = errors.New("not supported by this system")

// Topology says what the harness needs from a target's network.
type Topology struct {
	// Hops3 routes events PHB → IB → SHB (publisher at the PHB, subscribers
	// at the SHB); otherwise publisher and subscribers share one broker.
	Hops3 bool
	// Cuttable puts a fault-injecting proxy on the subscribers' upstream
	// link so Outage can cut it (catch-up workload).
	Cuttable bool
	// SubBuffer is the client-side event buffer per subscription; fan-out
	// to thousands of connections needs it small (default 16384).
	SubBuffer int
	// Counted puts a byte-counting proxy on the SHB's upstream link
	// (linkCounter).
	Counted bool
	// NoAck has a best-effort system's publishers ask for no acks
	// (client.PublishNoAck) but every aerieWindow-th publish, which they
	// wait for, as the core NATS publisher flushes: like for like with
	// core NATS (throughput). Without it they ask for every ack, so that
	// GD and best effort carry the same frames (overhead).
	NoAck bool
}

// ballaster is a target that can hold many subscriptions that receive
// nothing, over a few connections (the selective workload's scale points).
type ballaster interface {
	// Ballast opens n subscriptions, each selecting a key never published,
	// and returns once they are all in force.
	Ballast(ctx context.Context, n int) error
}

// linkCounter is a target that may count the bytes its IB sent its SHB
// (false: not in this topology).
type linkCounter interface {
	LinkBytes() (int64, bool)
}

// Filter selects what a subscription receives: everything, or only the
// events whose key property equals Key (a selector `k = Key` in aerie, a
// subject `bench.k.Key` in NATS).
type Filter struct {
	Keyed bool
	Key   int
}

// Msg is one event to publish. The harness's own header rides at the start
// of the payload so every system carries it the same way.
type Msg struct {
	Seq      uint64 // 1, 2, … per publisher
	Key      int
	Intended int64 // intended send time, Unix ns (the fixed schedule's slot)
	Size     int   // payload bytes, at least headerLen
}

// Delivery is one event as a subscriber saw it.
type Delivery struct {
	Publisher uint32
	Seq       uint64
	Intended  int64
	Recv      int64
}

// Target is one system under test, started fresh for each run.
type Target interface {
	System() string
	// Durable: a publish is acknowledged only once it is on disk (fsynced).
	Durable() bool
	// Publisher opens publisher number idx (its own connection).
	Publisher(ctx context.Context, idx int) (Publisher, error)
	// Subscribe opens a subscriber (its own connection); fn is called for
	// each delivery, from one goroutine per subscription. It returns once
	// the subscription is in force.
	Subscribe(ctx context.Context, f Filter, fn func(Delivery)) (Sub, error)
	// Outage cuts (cut=true) or heals the subscribers' path to the
	// publishers' data; errUnsupported if the system cannot catch up.
	Outage(cut bool) error
	Close() error
}

// Publisher sends events; Publish blocks while its in-flight window is full
// (back-pressure), so a fixed-rate schedule sees the delay.
type Publisher interface {
	Publish(ctx context.Context, m Msg) error
	// Finish waits until every publish is acknowledged (durable, for a
	// durable system) and closes the publisher.
	Finish(ctx context.Context) error
}

// Sub is an open subscription. Err says why it ended on its own (nil while
// it runs), so a stalled run can say which subscriber was dropped.
type Sub interface {
	Close() error
	Err() error
}

const headerLen = 20 // intended ns (8) | seq (8) | publisher (4)

// encodePayload writes the header into a fresh payload of m.Size bytes: a
// fresh slice each time, because clients may keep it until it is acked.
func encodePayload(pub uint32, m Msg) []byte {
	n := max(m.Size, headerLen)
	b := make([]byte, n)
	binary.LittleEndian.PutUint64(b[0:], uint64(m.Intended))
	binary.LittleEndian.PutUint64(b[8:], m.Seq)
	binary.LittleEndian.PutUint32(b[16:], pub)
	if lattrace.On() {
		lattrace.MarkAt(lattrace.Slot(-1, lattrace.Sched), b, m.Intended)
		lattrace.Mark(lattrace.Slot(-1, lattrace.Call), b)
	}
	return b
}

func decodePayload(b []byte, recv int64) (Delivery, error) {
	if len(b) < headerLen {
		return Delivery{}, fmt.Errorf("bench: payload of %d bytes has no harness header", len(b))
	}
	lattrace.MarkAt(lattrace.Slot(lattrace.Hops(), lattrace.Recv), b, recv)
	return Delivery{
		Intended:  int64(binary.LittleEndian.Uint64(b[0:])),
		Seq:       binary.LittleEndian.Uint64(b[8:]),
		Publisher: binary.LittleEndian.Uint32(b[16:]),
		Recv:      recv,
	}, nil
}

// Factory starts a fresh target for one run; dir is a scratch directory
// that the harness removes afterwards.
type Factory struct {
	System  string
	Durable bool
	// MaxSubs, when set, is the most subscriptions a run may open; larger
	// points are reported as skipped (see NATSFactories).
	MaxSubs int
	// OneBroker: the system runs as one broker only; a three-hop point
	// leaves it out of its table.
	OneBroker bool
	Start     func(ctx context.Context, topo Topology, dir string) (Target, error)
}
