// Package lattrace records when the bench's events pass each stage of
// their way publish → deliver (the client's write, each broker's read,
// loop, fsync, queue and write, the subscriber's read), for the latency
// breakdown of `aerie bench --stages`. It is off unless the harness turns
// it on: then every mark is one wall-clock read and one store into a table
// outside the Go heap (a shared file mapping, so that brokers in child
// processes, --procs, write into the harness's table), keyed by the
// harness's sequence number in the payload header. Off, a mark costs one
// atomic load.
//
// It records, it does not decide: nothing reads the table but the harness.
package lattrace

import (
	"encoding/binary"
	"fmt"
	"os"
	"strings"
	"sync/atomic"
	"syscall"
	"time"
	"unsafe"

	"github.com/aerie-mq/aerie/internal/msg"
)

// Env names the environment variable that turns tracing on in a child
// process: the table's file and the brokers' ids in path order,
// "FILE;p1,b1,s1".
const Env = "AERIE_LATTRACE"

// Kind is what happened to an event at a hop.
type Kind int

const (
	Read       Kind = iota // its frame was decoded by the connection's reader
	Loop                   // the broker's loop handed it to the engine
	FsyncStart             // the persister appended it and is about to fsync
	FsyncEnd               // the fsync returned
	Persisted              // the loop took the completion (acks, knowledge made)
	Queued                 // queued on the outbound connection
	Written                // written to the socket
	Recv                   // handed to the application (the subscriber's callback)
	Sched                  // the publisher's intended send time (the fixed schedule)
	Call                   // the publisher called Publish
	Handed                 // the loop handed the batch holding it to the persister
	kinds
)

var kindNames = [kinds]string{"read", "loop", "fsync-start", "fsync-end", "persisted", "queued", "written", "recv", "scheduled", "publish call", "handed"}

// Hops: -1 is the publishing client, 0 … len(nodes)-1 the brokers in path
// order, len(nodes) the subscribing client.
const maxHops = 6

// Slots per event and events per table.
const (
	Slots   = (maxHops + 1) * int(kinds)
	MaxSeqs = 1 << 16
)

// Slot is the table column of (hop, kind).
func Slot(hop int, k Kind) int { return (hop+1)*int(kinds) + int(k) }

// SlotName names a column, with the nodes' ids.
func SlotName(slot int, nodes []string) string {
	hop, k := slot/int(kinds)-1, Kind(slot%int(kinds))
	switch {
	case hop < 0:
		return "publisher " + kindNames[k]
	case hop < len(nodes):
		return nodes[hop] + " " + kindNames[k]
	default:
		return "subscriber " + kindNames[k]
	}
}

type tracer struct {
	tab   []int64
	nodes []string
}

var cur atomic.Pointer[tracer]

// On reports whether tracing is on.
func On() bool { return cur.Load() != nil }

// Open maps the table file (created at its full size) and turns tracing on
// in this process, for nodes in path order.
func Open(path string, nodes []string) error {
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return err
	}
	defer f.Close()
	size := Slots * MaxSeqs * 8
	if err := f.Truncate(int64(size)); err != nil {
		return err
	}
	b, err := syscall.Mmap(int(f.Fd()), 0, size, syscall.PROT_READ|syscall.PROT_WRITE, syscall.MAP_SHARED)
	if err != nil {
		return fmt.Errorf("lattrace: map %s: %w", path, err)
	}
	tab := unsafe.Slice((*int64)(unsafe.Pointer(&b[0])), Slots*MaxSeqs)
	cur.Store(&tracer{tab: tab, nodes: nodes})
	return nil
}

// OpenFromEnv turns tracing on if Env is set (a child process of the
// harness).
func OpenFromEnv() error {
	v := os.Getenv(Env)
	if v == "" {
		return nil
	}
	path, nodes, _ := strings.Cut(v, ";")
	return Open(path, strings.Split(nodes, ","))
}

// EnvValue is Env's value for a child process.
func EnvValue(path string, nodes []string) string { return path + ";" + strings.Join(nodes, ",") }

// Table is the mapped table (nil when off): Slots int64 per sequence
// number, wall-clock ns, 0 where no mark was made.
func Table() []int64 {
	if t := cur.Load(); t != nil {
		return t.tab
	}
	return nil
}

// Reset clears the table between runs.
func Reset() {
	if t := cur.Load(); t != nil {
		clear(t.tab)
	}
}

// Hop is node's position on the path, -1 if it is not on it.
func Hop(node msg.NodeID) int {
	t := cur.Load()
	if t == nil {
		return -1
	}
	for i, n := range t.nodes {
		if n == string(node) {
			return i
		}
	}
	return -1
}

// Hops is the number of brokers on the path.
func Hops() int {
	if t := cur.Load(); t != nil {
		return len(t.nodes)
	}
	return 0
}

// Mark records now as the time the event with payload passed slot: the
// first mark of a slot stands (a retransmission does not move it).
func Mark(slot int, payload []byte) { MarkAt(slot, payload, time.Now().UnixNano()) }

// MarkAt is Mark at a given time.
func MarkAt(slot int, payload []byte, now int64) {
	t := cur.Load()
	if t == nil || len(payload) < 16 || slot < 0 || slot >= Slots {
		return
	}
	seq := binary.LittleEndian.Uint64(payload[8:])
	if seq >= MaxSeqs {
		return
	}
	atomic.CompareAndSwapInt64(&t.tab[int(seq)*Slots+slot], 0, now)
}

// Payload returns the event payload m carries, if any: a publish, a
// knowledge message with its event, or a delivery.
// MarkMsg marks at slot the event m carries, or each event of a run of
// Knowledge (msg.KnowledgeRun), of deliveries (msg.DeliveryRun) or of
// publishes (msg.PublishRun).
func MarkMsg(slot int, m msg.Msg, now int64) {
	switch v := m.(type) {
	case *msg.KnowledgeRun:
		for _, ev := range v.Events {
			MarkAt(slot, ev.Payload, now)
		}
	case msg.KnowledgeRun:
		MarkMsg(slot, &v, now)
	case *msg.DeliveryRun:
		for _, ev := range v.Events {
			MarkAt(slot, ev.Payload, now)
		}
	case msg.DeliveryRun:
		MarkMsg(slot, &v, now)
	case *msg.PublishRun:
		for i := range v.Publishes {
			MarkAt(slot, v.Publishes[i].Payload, now)
		}
	default:
		MarkAt(slot, Payload(m), now)
	}
}

func Payload(m msg.Msg) []byte {
	switch v := m.(type) {
	case msg.Publish:
		return v.Payload
	case *msg.Publish:
		return v.Payload
	case msg.Knowledge:
		if v.Event != nil {
			return v.Event.Payload
		}
	case *msg.Knowledge:
		if v.Event != nil {
			return v.Event.Payload
		}
	case msg.Delivery:
		if v.Event != nil {
			return v.Event.Payload
		}
	case *msg.Delivery:
		if v.Event != nil {
			return v.Event.Payload
		}
	}
	return nil
}

// ConnHop is where a connection's reads and writes are marked: for a
// connection to broker peer, a frame written to it leaves the hop before
// peer's (the publisher, for the first broker) and a frame read from it
// arrives at the hop after peer's (the subscriber, for the last). A
// connection from a client is on the broker's side: written, the last
// broker; read, the first. It returns the hops of writes and reads (-2:
// not on the path).
func ConnHop(peer msg.NodeID, client bool, self msg.NodeID) (write, read int) {
	if cur.Load() == nil {
		return -2, -2
	}
	if client {
		h := Hop(self)
		if h < 0 {
			return -2, -2
		}
		return h, h
	}
	h := Hop(peer)
	if h < 0 {
		return -2, -2
	}
	return h - 1, h + 1
}
