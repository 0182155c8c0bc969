package forward

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/aerie-mq/aerie/internal/msg"
	"github.com/aerie-mq/aerie/internal/shell"
	"github.com/aerie-mq/aerie/internal/tick"
)

// A range from the leader that holds publishes the member had already
// relayed answers for (a resend's duplicate answer) reaches the client as
// a PubAck for each one still unanswered, each exactly once; so does every
// range for a client that does not read ranges.
func TestRangePartlyAnswered(t *testing.T) {
	w := newWorld(0)
	f := NewForwarder(w, time.Second)
	f.ClientUp(7, false)
	f.Follow(time.Time{}, "a", 1, 1, false)
	for seq := uint64(1); seq <= 6; seq++ {
		f.Publish(7, msg.Publish{Publisher: "c", Seq: seq})
	}
	stream := f.clients[7].stream
	f.FromLeader(time.Time{}, "a", msg.Forward{Client: stream, Msg: msg.PubAck{Pubend: "P1", Publisher: "c", Seq: 2, Tick: 11}})
	r := msg.PubAckRange{Pubend: "P1", Publisher: "c", Seq: 1, Ticks: []tick.Tick{10, 11, 12, 13}}
	f.FromLeader(time.Time{}, "a", msg.Forward{Client: stream, Msg: r})
	f.FromLeader(time.Time{}, "a", msg.Forward{Client: stream, Msg: r}) // again: nothing
	seen := map[uint64]int{}
	for _, m := range w.toClient {
		a, ok := m.(msg.PubAck)
		if !ok {
			t.Fatalf("relayed %v, want PubAcks only", m)
		}
		if want := tick.Tick(9 + a.Seq); a.Tick != want {
			t.Fatalf("#%d relayed at tick %d, want %d", a.Seq, a.Tick, want)
		}
		seen[a.Seq]++
	}
	for seq := uint64(1); seq <= 4; seq++ {
		if seen[seq] != 1 {
			t.Fatalf("#%d relayed %d times, want once (%v)", seq, seen[seq], w.toClient)
		}
	}
	if n := len(f.clients[7].pending); n != 2 {
		t.Fatalf("%d publishes still unanswered, want #5 and #6", n)
	}
}

// TestForwardedClientInOrder drives a Forwarder and two leaders that
// take forwarded streams with Refusals through random schedules: links
// that deliver in order but interleave with each other, links replaced
// (a replaced link's leftovers are dropped, as the broker drops them, and
// the leader forgets the sessions and refusals of its streams),
// leadership moving between the two, a leader elected that starts to
// serve a while later, leaders that lose the shell holding uncommitted
// publishes. Whatever happens, the committed log holds the client's
// publishes in the order it sent them, each once; and once the cell
// settles, every publish is acknowledged.
func TestForwardedClientInOrder(t *testing.T) {
	for seed := range uint64(3000) {
		w := newWorld(seed)
		if err := w.run(); err != nil {
			t.Fatalf("seed %d: %v\n%s", seed, err, w.steps())
		}
	}
}

// world is the cell of the model test: forwarding member f, members a
// and b that may lead, one client of f.
type world struct {
	rng      *rand.Rand
	f        *Forwarder
	leaders  map[msg.NodeID]*leader
	lead     msg.NodeID // the member that leads ("" between leaders)
	term     uint64
	known    bool // f knows the leader
	epoch    map[msg.NodeID]int
	queues   map[[2]msg.NodeID][]packet
	log      []uint64 // the committed log: seqs as the pubend logged them
	sent     uint64   // the client's last publish
	acked    map[uint64]bool
	toClient []msg.Msg
	trace    []string
	args     [][]any
}

type packet struct {
	epoch int
	m     msg.Forward
}

// leader is a member that may serve, running a Leader (whose refusals
// outlive its shells); its shell holds the streams' sessions (cids, in
// the order they opened) and the publishes it took and has not committed.
type leader struct {
	id      msg.NodeID
	serving bool
	lead    *Leader
	cids    []shell.ClientID
	next    shell.ClientID
	pending []uint64
	by      map[uint64]shell.ClientID // the session a pending publish came in
}

func newWorld(seed uint64) *world {
	w := &world{rng: rand.New(rand.NewPCG(seed, 0)), leaders: map[msg.NodeID]*leader{},
		epoch: map[msg.NodeID]int{"a": 1, "b": 1}, queues: map[[2]msg.NodeID][]packet{}, acked: map[uint64]bool{}}
	for _, id := range []msg.NodeID{"a", "b"} {
		w.leaders[id] = &leader{id: id, lead: NewLeader(0), by: map[uint64]shell.ClientID{}}
	}
	w.f = NewForwarder(w, time.Hour)
	w.f.ClientUp(1, true)
	return w
}

// logf records a step, printed when a schedule fails (formatted then).
func (w *world) logf(format string, args ...any) {
	w.trace = append(w.trace, format)
	w.args = append(w.args, args)
}

func (w *world) steps() string {
	var b strings.Builder
	for i, f := range w.trace {
		fmt.Fprintf(&b, f+"\n", w.args[i]...)
	}
	return b.String()
}

// Send is the Forwarder's link to a leader: queued in order, on the
// link's current epoch (or not at all if the stream's link was replaced).
func (w *world) Send(to msg.NodeID, link any, m msg.Forward) {
	if link != nil && link != any(w.epoch[to]) {
		return
	}
	k := [2]msg.NodeID{"f", to}
	w.queues[k] = append(w.queues[k], packet{epoch: w.epoch[to], m: m})
}

func (w *world) ToClient(_ shell.ClientID, m msg.Msg) {
	w.toClient = append(w.toClient, m)
	switch a := m.(type) {
	case msg.PubAck:
		w.acked[a.Seq] = true
	case msg.PubAckRange:
		for i := range a.Len() {
			w.acked[a.Seq+uint64(i)] = true
		}
	}
}

// back sends a leader's message to f on stream k.
func (w *world) back(from msg.NodeID, k Key, m msg.Msg) {
	q := [2]msg.NodeID{from, "f"}
	w.queues[q] = append(w.queues[q], packet{epoch: w.epoch[from], m: msg.Forward{Client: k.Stream, Msg: m}})
}

func (w *world) follow(retry bool) {
	to, link := msg.NodeID(""), any(nil)
	if w.known && w.lead != "" {
		to, link = w.lead, w.epoch[w.lead]
	}
	w.f.Follow(time.Time{}, to, w.term, link, retry)
}

// run plays a random schedule, then lets the cell settle.
func (w *world) run() error {
	const publishes = 40
	for step := 0; step < 400; step++ {
		switch r := w.rng.IntN(100); {
		case r < 25 && w.sent < publishes:
			w.sent++
			w.logf("client publishes %d", w.sent)
			w.f.Publish(1, msg.Publish{Publisher: "c", Seq: w.sent})
		case r < 60:
			w.deliverOne()
		case r < 70:
			w.commit()
		case r < 78:
			w.logf("retry tick")
			w.follow(true)
		case r < 84:
			w.elect()
		case r < 90:
			w.serve()
		case r < 94:
			w.loseShell()
		case r < 97:
			id := msg.NodeID([]string{"a", "b"}[w.rng.IntN(2)])
			w.epoch[id]++
			// The leader's side of the link is gone: its sessions and
			// refusals of f's streams go (Leader.PeerDown).
			w.leaders[id].lead.PeerDown("f")
			w.logf("link f-%s replaced (epoch %d)", id, w.epoch[id])
		default:
			w.known = !w.known
			w.logf("f knows the leader: %v", w.known)
		}
		if w.rng.IntN(2) == 0 {
			// The broker follows the leader after a batch of its loop's
			// events, not after each one.
			w.follow(false)
		}
		if err := w.check(); err != nil {
			return err
		}
	}
	// Settle: a leader that serves, known over a stable link.
	for w.sent < publishes {
		w.sent++
		w.f.Publish(1, msg.Publish{Publisher: "c", Seq: w.sent})
	}
	if w.lead == "" {
		w.elect()
	}
	w.known = true
	w.leaders[w.lead].serving = true
	w.logf("settle: %s serves", w.lead)
	for round := 0; round < 50; round++ {
		w.follow(true)
		for w.deliverOne() {
		}
		w.commit()
		for w.deliverOne() {
		}
		if err := w.check(); err != nil {
			return err
		}
	}
	for seq := uint64(1); seq <= publishes; seq++ {
		if !w.acked[seq] {
			return fmt.Errorf("publish %d never acknowledged once the cell settled (log %v)", seq, w.log)
		}
	}
	return nil
}

// check: the committed log is the client's publishes in order, each once.
func (w *world) check() error {
	for i, seq := range w.log {
		if seq != uint64(i+1) {
			return fmt.Errorf("committed log %v: want the client's publishes in order, each once", w.log)
		}
	}
	return nil
}

// deliverOne hands over the next message of a random non-empty link
// direction; false when every queue is empty.
func (w *world) deliverOne() bool {
	var ks [][2]msg.NodeID
	for k, q := range w.queues {
		if len(q) > 0 {
			ks = append(ks, k)
		}
	}
	if len(ks) == 0 {
		return false
	}
	slices.SortFunc(ks, func(a, b [2]msg.NodeID) int {
		return int(a[0][0]) - int(b[0][0]) + 256*(int(a[1][0])-int(b[1][0]))
	})
	k := ks[w.rng.IntN(len(ks))]
	p := w.queues[k][0]
	w.queues[k] = w.queues[k][1:]
	peer := k[1]
	if k[1] == "f" {
		peer = k[0]
	}
	if p.epoch != w.epoch[peer] {
		w.logf("%s→%s: %v dropped (a replaced link's leftover)", k[0], k[1], p.m)
		return true
	}
	w.logf("%s→%s: %v", k[0], k[1], p.m)
	if k[1] == "f" {
		w.f.FromLeader(time.Time{}, k[0], p.m)
		return true
	}
	w.leaders[k[1]].receive(w, p.m)
	return true
}

// receive is a leader's forwardMsg.
func (l *leader) receive(w *world, f msg.Forward) {
	k := Key{Peer: "f", Stream: f.Client}
	switch m := f.Msg.(type) {
	case msg.Publish:
		cid, open, ok := l.lead.Publish(k, m.Publisher, m.Seq, l.serving, false, func() shell.ClientID { l.next++; return l.next })
		if !ok {
			w.back(l.id, k, msg.Goodbye{Reason: "does not serve"})
			return
		}
		if open {
			l.cids = append(l.cids, cid)
		}
		if slices.Contains(w.log, m.Seq) {
			w.back(l.id, k, msg.PubAck{Publisher: "c", Seq: m.Seq, Duplicate: true})
			return
		}
		if slices.Contains(l.pending, m.Seq) {
			return // the pending original acks when committed
		}
		l.pending = append(l.pending, m.Seq)
		l.by[m.Seq] = cid
	case msg.Goodbye:
		if Ends(m.Reason) {
			l.lead.End(k)
		}
	}
}

// commit commits the serving leader's pending publishes and acks each on
// a stream of f it still has a session for (the broker routes an ack to
// the publisher's newest session).
func (w *world) commit() {
	for _, l := range w.leaders {
		if !l.serving || len(l.pending) == 0 {
			continue
		}
		w.logf("%s commits %v", l.id, l.pending)
		w.log = append(w.log, l.pending...)
		for _, seq := range l.pending {
			k, ok := l.lead.Stream(l.by[seq])
			for i := len(l.cids) - 1; !ok && i >= 0; i-- {
				k, ok = l.lead.Stream(l.cids[i])
			}
			if ok {
				w.back(l.id, k, msg.PubAck{Publisher: "c", Seq: seq})
			}
		}
		l.pending = nil
	}
}

// elect moves the leadership to a random member, which does not serve yet.
func (w *world) elect() {
	next := msg.NodeID([]string{"a", "b"}[w.rng.IntN(2)])
	if w.lead != "" {
		w.lose(w.leaders[w.lead])
	}
	w.term++
	w.lead = next
	w.logf("%s leads term %d (not serving yet)", next, w.term)
}

// serve: the leader starts to serve (its term's first entry applied).
func (w *world) serve() {
	if w.lead != "" && !w.leaders[w.lead].serving {
		w.leaders[w.lead].serving = true
		w.leaders[w.lead].lead.Serve()
		w.logf("%s serves", w.lead)
	}
}

// loseShell: the serving leader loses its shell (and the leadership).
func (w *world) loseShell() {
	if w.lead == "" || !w.leaders[w.lead].serving {
		return
	}
	w.lose(w.leaders[w.lead])
	w.lead = ""
}

// lose ends l's shell: its uncommitted publishes are gone; its streams
// are refused from now on and told (fwdConn.CloseWith).
func (w *world) lose(l *leader) {
	if !l.serving {
		return
	}
	w.logf("%s loses its shell (uncommitted %v)", l.id, l.pending)
	for _, k := range l.lead.Lost() {
		w.back(l.id, k, msg.Goodbye{Reason: "no longer leads"})
	}
	l.serving, l.cids, l.pending, l.by = false, nil, nil, map[uint64]shell.ClientID{}
}

// A client whose resends are refused on every retry (a leader elected
// that does not serve yet, for as long as it takes) gets a new stream each
// time; the Forwarder reads answers on its last keepStreams only, however
// many retries, and the client is still answered on its latest stream.
func TestForwarderStreamsBounded(t *testing.T) {
	w := newWorld(0)
	f := NewForwarder(w, time.Hour)
	f.ClientUp(7, true)
	f.ClientUp(8, true)
	f.Follow(time.Time{}, "a", 1, 1, false)
	f.Publish(7, msg.Publish{Publisher: "c", Seq: 1})
	for retry := range 10_000 {
		for _, c := range []shell.ClientID{7, 8} {
			f.FromLeader(time.Time{}, "a", msg.Forward{Client: f.clients[c].stream, Msg: msg.Goodbye{Reason: "not serving yet"}})
		}
		f.Follow(time.Time{}, "a", 1, 1, true)
		if got := f.Streams(); got > 2*keepStreams {
			t.Fatalf("retry %d: answers read on %d streams, want at most %d", retry, got, 2*keepStreams)
		}
	}
	if got := len(f.clients[7].streams); got != keepStreams {
		t.Fatalf("client 7 keeps %d streams, want %d", got, keepStreams)
	}
	old := f.clients[7].streams[0] - 1 // superseded keepStreams ago: forgotten
	f.FromLeader(time.Time{}, "a", msg.Forward{Client: old, Msg: msg.PubAck{Publisher: "c", Seq: 1}})
	if len(w.toClient) != 0 {
		t.Fatalf("an answer on a forgotten stream reached the client: %v", w.toClient)
	}
	f.FromLeader(time.Time{}, "a", msg.Forward{Client: f.clients[7].stream, Msg: msg.PubAck{Publisher: "c", Seq: 1}})
	if len(w.toClient) != 1 || len(f.clients[7].pending) != 0 {
		t.Fatalf("the answer on the latest stream: relayed %v, %d unanswered", w.toClient, len(f.clients[7].pending))
	}
	f.ClientDown(7)
	f.ClientDown(8)
	if got := f.Streams(); got != 0 {
		t.Fatalf("no client left: answers read on %d streams", got)
	}
}
