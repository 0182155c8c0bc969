package shell_test

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/aerie-mq/aerie/internal/gd"
	"github.com/aerie-mq/aerie/internal/msg"
	"github.com/aerie-mq/aerie/internal/retention"
	"github.com/aerie-mq/aerie/internal/shell"
	"github.com/aerie-mq/aerie/internal/tick"
)

// fake is the shell's world in a test: a settable clock, and a record of
// everything the shell asked of the network and the disk.
type fake struct {
	now     tick.Time
	sent    []msg.Envelope
	clients map[shell.ClientID][]msg.Msg
	closed  map[shell.ClientID]string
	appends [][]msg.Record
	// appendsSeen keeps every batch ever appended: the log, for restarts.
	appendsSeen [][]msg.Record
	fetches     []gd.Fetch
	trims       []uint64
}

func (f *fake) Now() tick.Time                       { return f.now }
func (f *fake) Send(to msg.NodeID, m msg.Msg)        { f.sent = append(f.sent, msg.Envelope{To: to, Msg: m}) }
func (f *fake) ToClient(c shell.ClientID, m msg.Msg) { f.clients[c] = append(f.clients[c], m) }
func (f *fake) CloseClient(c shell.ClientID, err error, reason string) {
	f.closed[c] = reason
}
func (f *fake) Append(recs []msg.Record) {
	f.appends = append(f.appends, recs)
	f.appendsSeen = append(f.appendsSeen, recs)
}
func (f *fake) Fetch(fe gd.Fetch, from []uint64)   { f.fetches = append(f.fetches, fe) }
func (f *fake) Trim(cut uint64, snap []msg.Record) { f.trims = append(f.trims, cut) }

// phb is one broker hosting pubend P1 with no other broker: its local
// subscribers get what its local publishers publish.
func phb(t *testing.T) (*shell.Broker, *fake) {
	t.Helper()
	eng, err := gd.New("p1", gd.DefaultConfig(), []gd.Route{{Pubend: "P1"}})
	if err != nil {
		t.Fatal(err)
	}
	f := &fake{now: 1767225600 * 1e9, clients: map[shell.ClientID][]msg.Msg{}, closed: map[shell.ClientID]string{}}
	b := shell.New(shell.Config{ID: "p1", Engine: eng, Clock: f, Net: f, Durability: f, Hosted: []msg.PubendID{"P1"}, Strict: true})
	return b, f
}

func publish(seq uint64) msg.Publish {
	return msg.Publish{Publisher: "pub", Seq: seq, Topic: "a.b", Payload: []byte(fmt.Sprint(seq))}
}

// persistAll completes every outstanding append, in order, at consecutive
// log indexes from next.
func persistAll(t *testing.T, b *shell.Broker, f *fake, next *uint64) {
	t.Helper()
	for len(f.appends) > 0 {
		recs := f.appends[0]
		f.appends = f.appends[1:]
		if err := b.Persisted(*next, nil); err != nil {
			t.Fatal(err)
		}
		b.Drain()
		*next += uint64(len(recs))
	}
}

func ofType[T msg.Msg](ms []msg.Msg) []T {
	var out []T
	for _, m := range ms {
		if x, ok := m.(T); ok {
			out = append(out, x)
		}
	}
	return out
}

// deliveries are the Deliveries among ms, in the engine's pointer form
// (gd deliveryMsg) or as values.
func deliveries(ms []msg.Msg) []msg.Delivery {
	var out []msg.Delivery
	for _, m := range ms {
		if d, ok := msg.AsDelivery(m); ok {
			out = append(out, d)
		}
	}
	return out
}

// pubAcks are the PubAcks among ms, in either form.
func pubAcks(ms []msg.Msg) []msg.PubAck {
	var out []msg.PubAck
	for _, m := range ms {
		if a, ok := msg.AsPubAck(m); ok {
			out = append(out, a)
		}
	}
	return out
}

// A publish is acked only once the batch holding its record is durable
// (Gryphon GD §3: logged before acknowledged), and a failed fsync acks
// nothing and is reported to the caller, which must stop.
func TestAckOnlyAfterPersisted(t *testing.T) {
	b, f := phb(t)
	b.ClientUp(1)
	b.ClientRequest(1, publish(1))
	b.Drain()
	if len(f.appends) != 1 || f.appends[0][0].Event == nil {
		t.Fatalf("appends = %v, want one batch holding the event", f.appends)
	}
	if acks := pubAcks(f.clients[1]); len(acks) != 0 {
		t.Fatalf("acked before the fsync: %v", acks)
	}
	b.ClientRequest(1, publish(2)) // queued behind the batch in flight
	b.Drain()
	if len(f.appends) != 1 {
		t.Fatalf("a second batch started while one is in flight: %v", f.appends)
	}
	if err := b.Persisted(7, nil); err != nil {
		t.Fatal(err)
	}
	b.Drain()
	acks := pubAcks(f.clients[1])
	if len(acks) != 1 || acks[0].Seq != 1 || acks[0].Pubend != "P1" {
		t.Fatalf("acks after the first fsync = %v, want seq 1 on P1", acks)
	}
	if len(f.appends) != 2 {
		t.Fatalf("the queued publish was not appended after the first fsync: %d batches", len(f.appends))
	}
	if _, next := b.LogBounds(); next != 7+uint64(len(f.appends[0])) {
		t.Fatalf("log next = %d after a batch of %d at 7", next, len(f.appends[0]))
	}
	err := b.Persisted(0, errors.New("disk on fire"))
	if err == nil || !strings.Contains(err.Error(), "disk on fire") {
		t.Fatalf("failed fsync reported %v", err)
	}
	if acks := pubAcks(f.clients[1]); len(acks) != 1 {
		t.Fatalf("a failed fsync acked: %v", acks)
	}
	if err := b.Persisted(0, nil); err == nil {
		t.Fatal("a completion with no batch outstanding was accepted")
	}
}

// With a persist window of 3 (a replicated PHB's pipelining), three
// batches are appended before the first completes, a fourth waits for
// room; each completion acks exactly its batch's publishes, oldest first,
// and the log's end follows the completions, not the appends.
func TestPipelinedBatchesAckInOrder(t *testing.T) {
	cfg := gd.DefaultConfig()
	cfg.PersistWindow = 3
	eng, err := gd.New("p1", cfg, []gd.Route{{Pubend: "P1"}})
	if err != nil {
		t.Fatal(err)
	}
	f := &fake{now: 1767225600 * 1e9, clients: map[shell.ClientID][]msg.Msg{}, closed: map[shell.ClientID]string{}}
	b := shell.New(shell.Config{ID: "p1", Engine: eng, Clock: f, Net: f, Durability: f, Hosted: []msg.PubendID{"P1"}, Strict: true})
	b.ClientUp(1)
	for seq := uint64(1); seq <= 4; seq++ {
		b.ClientRequest(1, publish(seq))
		b.Drain()
	}
	if len(f.appends) != 3 {
		t.Fatalf("%d batches appended with a window of 3 and 4 publishes, want 3", len(f.appends))
	}
	if acks := pubAcks(f.clients[1]); len(acks) != 0 {
		t.Fatalf("acked before any batch was durable: %v", acks)
	}
	next := uint64(0)
	for want := uint64(1); want <= 4; want++ {
		recs := f.appends[0]
		f.appends = f.appends[1:]
		if err := b.Persisted(next, nil); err != nil {
			t.Fatal(err)
		}
		next += uint64(len(recs))
		b.Drain()
		acks := pubAcks(f.clients[1])
		if uint64(len(acks)) != want || acks[want-1].Seq != want {
			t.Fatalf("after %d completions: acks %v, want seqs 1…%d", want, acks, want)
		}
		if _, end := b.LogBounds(); end != next {
			t.Fatalf("log ends at %d after %d completions, want %d", end, want, next)
		}
		if want == 1 && len(f.appends) != 3 {
			t.Fatalf("the fourth batch did not start when the first completed: %d outstanding", len(f.appends))
		}
	}
	if !b.Idle() {
		t.Fatal("not idle with every batch completed")
	}
}

// Two connections may both name a subscription "s"; each gets its own
// deliveries under its own name, and a closed connection's subscriptions
// end with it.
func TestSubscriptionNamesArePerConnection(t *testing.T) {
	b, f := phb(t)
	var next uint64 = 1
	for c := shell.ClientID(1); c <= 3; c++ {
		b.ClientUp(c)
	}
	b.ClientRequest(1, msg.Subscribe{Sub: "s", Pattern: "a.>"})
	b.Drain()
	b.ClientRequest(2, msg.Subscribe{Sub: "s", Pattern: "a.b"})
	b.Drain()
	for _, c := range []shell.ClientID{1, 2} {
		st := ofType[msg.SubStarted](f.clients[c])
		if len(st) != 1 || st[0].Sub != "s" {
			t.Fatalf("client %d: started = %v, want one under its own name s", c, st)
		}
	}
	b.ClientRequest(3, publish(1))
	b.Drain()
	persistAll(t, b, f, &next)
	for _, c := range []shell.ClientID{1, 2} {
		ds := deliveries(f.clients[c])
		if len(ds) != 1 || ds[0].Sub != "s" || string(ds[0].Event.Payload) != "1" {
			t.Fatalf("client %d: deliveries = %v, want event 1 under s", c, ds)
		}
	}
	b.ClientDown(1)
	b.Drain()
	b.ClientRequest(2, msg.Unsubscribe{Sub: "s"})
	b.Drain()
	b.ClientRequest(3, publish(2))
	b.Drain()
	persistAll(t, b, f, &next)
	for _, c := range []shell.ClientID{1, 2} {
		if ds := deliveries(f.clients[c]); len(ds) != 1 {
			t.Fatalf("client %d got %d deliveries after its subscription ended", c, len(ds))
		}
	}
	if b.Clients() != 2 {
		t.Fatalf("clients = %d, want 2 after one closed", b.Clients())
	}
}

// Requests the broker refuses get a reason, and nothing reaches the log.
func TestBadClientRequests(t *testing.T) {
	b, f := phb(t)
	b.ClientUp(1)
	big := publish(1)
	big.Payload = make([]byte, msg.MaxEventBytes+1)
	b.ClientRequest(1, big)
	b.Drain()
	rej := ofType[msg.PubReject](f.clients[1])
	if len(rej) != 1 || !strings.Contains(rej[0].Reason, "exceeds") || len(f.appends) != 0 {
		t.Fatalf("oversized publish: rejects %v, appends %v", rej, f.appends)
	}
	b.ClientRequest(1, msg.Ack{Pubend: "P1", T: 5})
	b.Drain()
	if !strings.Contains(f.closed[1], "unexpected") {
		t.Fatalf("a broker-to-broker message from a client closed nothing: %v", f.closed)
	}
	b.ClientRequest(9, publish(2)) // a connection the broker does not know
	b.Drain()
	if len(f.appends) != 0 {
		t.Fatalf("a request from an unknown connection reached the engine")
	}
	if err := b.PeerMsg("x1", publish(3)); err == nil {
		t.Fatal("a client request from a peer link was accepted")
	}
}

// A PHB under continuous load always has a batch in flight. Trim takes its
// snapshot anyway and starts once the records that snapshot describes are
// durable, whatever was appended since; never two at once. (A trim that
// waited for a quiet log never ran under continuous load.)
func TestTrimUnderContinuousLoad(t *testing.T) {
	b, f := phb(t)
	var next uint64 = 1
	b.ClientUp(1)
	seq := uint64(0)
	publishNext := func() {
		seq++
		b.ClientRequest(1, publish(seq))
		b.Drain()
	}
	persistOldest := func() {
		t.Helper()
		recs := f.appends[0]
		f.appends = f.appends[1:]
		if err := b.Persisted(next, nil); err != nil {
			t.Fatal(err)
		}
		next += uint64(len(recs))
		b.Drain()
	}
	publishNext()
	for range 20 { // the pubend releases what no downstream needs; one batch always out
		publishNext()
		persistOldest()
		f.now = f.now.Add(100 * time.Millisecond)
		b.Tick()
		b.Drain()
	}
	if len(f.appends) == 0 {
		t.Fatal("no batch in flight: the load is not continuous")
	}
	_, end := b.LogBounds()
	b.Trim()
	if len(f.trims) != 0 {
		t.Fatalf("trim started while the records its snapshot describes were in flight")
	}
	publishNext() // queued behind the batch in flight
	persistOldest()
	if len(f.trims) != 1 || f.trims[0] <= 1 || f.trims[0] > end {
		t.Fatalf("trims = %v once the snapshot's records were durable, want one in (1, %d]", f.trims, end)
	}
	if len(f.appends) == 0 {
		t.Fatal("no batch in flight when the trim started")
	}
	b.Trim()
	publishNext()
	persistOldest()
	if len(f.trims) != 1 {
		t.Fatalf("a second trim started before the first completed: %v", f.trims)
	}
	b.Trimmed(f.trims[0], f.trims[0]-1, nil)
	if first, _ := b.LogBounds(); first != f.trims[0] {
		t.Fatalf("log first = %d after trimming to %d", first, f.trims[0])
	}
}

// floor returns the release floor the engine holds for P1 (ok false: none).
func floor(b *shell.Broker) (tick.Tick, bool) {
	for _, st := range b.Engine().ReleaseStates() {
		if st.Pubend == "P1" {
			return st.Floor, st.FloorSet
		}
	}
	return 0, false
}

// A durable subscription needs somewhere to keep its state.
func TestDurableNeedsData(t *testing.T) {
	eng, err := gd.New("s1", gd.DefaultConfig(), []gd.Route{{Pubend: "P1", Up: "b1"}})
	if err != nil {
		t.Fatal(err)
	}
	f := &fake{clients: map[shell.ClientID][]msg.Msg{}, closed: map[shell.ClientID]string{}}
	b := shell.New(shell.Config{ID: "s1", Engine: eng, Clock: f, Net: f, Strict: true})
	b.ClientUp(1)
	b.ClientRequest(1, msg.Subscribe{Sub: "audit", Pattern: ">", Durable: true})
	b.Drain()
	rej := ofType[msg.SubRejected](f.clients[1])
	if len(rej) != 1 || !strings.Contains(rej[0].Reason, "data directory") {
		t.Fatalf("durable subscription at a broker without data: %v", f.clients[1])
	}
}

// The release floor follows what durable subscribers acknowledged: raised
// only once the acknowledgement is durable, kept while the subscriber is
// away, lowered at once by a resume from an older token, handed over to a
// newer connection (the older one told why), rebuilt by a restart, and
// cleared when the subscription is deleted (Gryphon DS §3).
func TestDurableReleaseFloor(t *testing.T) {
	b, f := phb(t)
	var next uint64 = 1
	b.ClientUp(1)
	b.ClientRequest(1, publish(1))
	b.Drain()
	persistAll(t, b, f, &next)
	b.ClientRequest(1, msg.Subscribe{Sub: "audit", Pattern: "a.>", Durable: true})
	b.Drain()
	st := ofType[msg.SubStarted](f.clients[1])
	if len(st) != 1 || st[0].Sub != "audit" {
		t.Fatalf("durable subscription did not start: %v", f.clients[1])
	}
	start := st[0].Token["P1"]
	persistAll(t, b, f, &next)
	if fl, ok := floor(b); !ok || fl != start {
		t.Fatalf("floor = %d,%v after start at %d", fl, ok, start)
	}
	// An acknowledgement raises the floor only once it is durable.
	b.ClientRequest(1, msg.SubAck{Sub: "audit", Token: msg.Token{"P1": start + 5}})
	b.Drain()
	if fl, _ := floor(b); fl != start {
		t.Fatalf("floor raised to %d before the acknowledgement was durable", fl)
	}
	persistAll(t, b, f, &next)
	if fl, _ := floor(b); fl != start+5 {
		t.Fatalf("floor = %d after the acknowledgement of %d was durable", fl, start+5)
	}
	// Away: the floor stays.
	b.ClientDown(1)
	b.Drain()
	persistAll(t, b, f, &next)
	if fl, ok := floor(b); !ok || fl != start+5 {
		t.Fatalf("floor = %d,%v while the subscriber is away", fl, ok)
	}
	// Back from an older token: lowered at once.
	b.ClientUp(2)
	b.ClientRequest(2, msg.Subscribe{Sub: "audit", Pattern: "a.>", Durable: true, From: msg.Token{"P1": start + 2}})
	b.Drain()
	if fl, _ := floor(b); fl != start+2 {
		t.Fatalf("floor = %d after a resume from %d", fl, start+2)
	}
	persistAll(t, b, f, &next)
	// A newer connection takes it over; the older is told.
	b.ClientUp(3)
	b.ClientRequest(3, msg.Subscribe{Sub: "audit", Pattern: "a.>", Durable: true})
	b.Drain()
	if rej := ofType[msg.SubRejected](f.clients[2]); len(rej) != 1 || !strings.Contains(rej[0].Reason, "taken over") {
		t.Fatalf("the older connection was not told of the takeover: %v", f.clients[2])
	}
	persistAll(t, b, f, &next)
	// A restart rebuilds the subscription (away) and its floor from the log.
	var log []msg.Record
	for _, recs := range f.appendsSeen {
		log = append(log, recs...)
	}
	b2, f2 := phb(t)
	if err := b2.Restore(retention.Loaded{Records: log, First: 1, Next: next}); err != nil {
		t.Fatal(err)
	}
	if fl, ok := floor(b2); !ok || fl != start+2 {
		t.Fatalf("floor after restart = %d,%v, want %d", fl, ok, start+2)
	}
	// Deleting it clears the floor, once durable.
	b2.ClientUp(1)
	b2.ClientRequest(1, msg.Subscribe{Sub: "audit", Pattern: "a.>", Durable: true})
	b2.Drain()
	b2.ClientRequest(1, msg.Unsubscribe{Sub: "audit"})
	b2.Drain()
	if _, ok := floor(b2); !ok {
		t.Fatal("floor cleared before the deletion was durable")
	}
	next2 := next
	persistAll(t, b2, f2, &next2)
	if _, ok := floor(b2); ok {
		t.Fatal("floor kept after the durable subscription was deleted")
	}
}

// A new durable subscription at an SHB holds the release from the moment it
// is requested, at what the SHB had delivered, until the pubend's reply says
// where it starts: otherwise the SHB would report released, and the pubend
// discard, ticks above the start that the subscriber has not acknowledged
// (Gryphon DS §3).
func TestDurableHoldsBeforeItStarts(t *testing.T) {
	eng, err := gd.New("s1", gd.DefaultConfig(), []gd.Route{{Pubend: "P1", Up: "b1"}})
	if err != nil {
		t.Fatal(err)
	}
	f := &fake{now: 1767225600 * 1e9, clients: map[shell.ClientID][]msg.Msg{}, closed: map[shell.ClientID]string{}}
	b := shell.New(shell.Config{ID: "s1", Engine: eng, Clock: f, Net: f, Durability: f, Strict: true})
	b.ClientUp(1)
	b.ClientRequest(1, msg.Subscribe{Sub: "audit", Pattern: "a.>", Durable: true})
	b.Drain()
	if st := ofType[msg.SubStarted](f.clients[1]); len(st) != 0 {
		t.Fatalf("started without the pubend's reply: %v", st)
	}
	if fl, ok := floor(b); !ok || fl != 0 {
		t.Fatalf("floor = %d,%v before the subscription started; want held at what was delivered (0)", fl, ok)
	}
	// Gone before it started: it never learned a start, so nothing holds.
	b.ClientDown(1)
	b.Drain()
	if fl, ok := floor(b); ok {
		t.Fatalf("floor = %d still held for a subscription that never started", fl)
	}
}

// An MQTT persistent session is the durable subscriptions under one name
// prefix: listed with their state, and deleted together, attached or
// away, without touching a name that only shares a shorter prefix.
func TestDurablesUnderPrefix(t *testing.T) {
	b, f := phb(t)
	var next uint64 = 1
	b.ClientUp(1)
	for _, name := range []msg.SubID{"mqtt:c1:1:0:a", "mqtt:c1:1:0:b", "mqtt:c10:1:0:a"} {
		b.ClientRequest(1, msg.Subscribe{Sub: name, Pattern: "a.>", Selector: "x = 'y'", Durable: true})
	}
	b.Drain()
	persistAll(t, b, f, &next)
	b.ClientRequest(1, msg.SubAck{Sub: "mqtt:c1:1:0:a", Token: msg.Token{"P1": 7}})
	b.Drain()
	b.ClientUp(2)
	b.ClientRequest(2, msg.Subscribe{Sub: "mqtt:c1:1:0:b", Pattern: "a.>", Durable: true}) // attached to 2
	b.Drain()
	got := b.DurablesUnder("mqtt:c1:")
	if len(got) != 2 || got[0].Name != "mqtt:c1:1:0:a" || got[1].Name != "mqtt:c1:1:0:b" {
		t.Fatalf("DurablesUnder = %+v", got)
	}
	if got[0].Selector != "x = 'y'" || got[0].Pattern != "a.>" || got[0].Released["P1"] != 7 {
		t.Fatalf("state not as asked: %+v", got[0])
	}
	b.DeleteDurables("mqtt:c1:")
	b.Drain()
	persistAll(t, b, f, &next)
	if left := b.Durables(); len(left) != 1 || !left["mqtt:c10:1:0:a"] {
		t.Fatalf("after deleting session c1: %v", left)
	}
	if got := b.DurablesUnder("mqtt:c1:"); len(got) != 0 {
		t.Fatalf("deleted session still listed: %+v", got)
	}
}

// A durable subscription resumed under another filter is refused, naming
// both filters, and keeps its own: resuming would silently drop what the
// subscriber missed that no longer matches.
func TestDurableResumeUnderAnotherFilterRefused(t *testing.T) {
	b, f := phb(t)
	b.ClientUp(1)
	b.ClientRequest(1, msg.Subscribe{Sub: "audit", Pattern: "a.>", Selector: "x = 1", Durable: true})
	b.Drain()
	if st := ofType[msg.SubStarted](f.clients[1]); len(st) != 1 {
		t.Fatalf("durable subscription did not start: %v", f.clients[1])
	}
	b.ClientDown(1)
	b.Drain()
	b.ClientUp(2)
	for _, m := range []msg.Subscribe{
		{Sub: "audit", Pattern: "a.b", Selector: "x = 1", Durable: true},
		{Sub: "audit", Pattern: "a.>", Durable: true, From: msg.Token{"P1": 1}},
	} {
		f.clients[2] = nil
		b.ClientRequest(2, m)
		b.Drain()
		rej := ofType[msg.SubRejected](f.clients[2])
		if len(rej) != 1 || !strings.Contains(rej[0].Reason, `topic "a.>" selector "x = 1"`) ||
			!strings.Contains(rej[0].Reason, fmt.Sprintf("topic %q selector %q", m.Pattern, m.Selector)) {
			t.Fatalf("resume as %q %q: %v, want a refusal naming both filters", m.Pattern, m.Selector, f.clients[2])
		}
	}
	// The same filter resumes.
	f.clients[2] = nil
	b.ClientRequest(2, msg.Subscribe{Sub: "audit", Pattern: "a.>", Selector: "x = 1", Durable: true})
	b.Drain()
	if st := ofType[msg.SubStarted](f.clients[2]); len(st) != 1 {
		t.Fatalf("the same filter did not resume: %v", f.clients[2])
	}
	// Deleted, the name is free for another filter at once (before the
	// deletion is durable too).
	b.ClientRequest(2, msg.Unsubscribe{Sub: "audit"})
	b.Drain()
	f.clients[2] = nil
	b.ClientRequest(2, msg.Subscribe{Sub: "audit", Pattern: "b.>", Durable: true})
	b.Drain()
	if st := ofType[msg.SubStarted](f.clients[2]); len(st) != 1 {
		t.Fatalf("a deleted subscription's name was not free for another filter: %v", f.clients[2])
	}
}

// A raw client's bad topics, patterns and selectors are refused by the
// broker with the reason, and reach neither the engine nor the log.
func TestBadTopicsAndFiltersRefused(t *testing.T) {
	b, f := phb(t)
	b.ClientUp(1)
	for i, topic := range []string{"", "a..b", "orders.>", "a.*"} {
		p := publish(uint64(i + 1))
		p.Topic = topic
		b.ClientRequest(1, p)
	}
	b.ClientRequest(1, &msg.PublishRun{Publishes: []msg.Publish{{Publisher: "pub", Seq: 5, Topic: "x."}}})
	b.ClientRequest(1, msg.Subscribe{Sub: "p", Pattern: "a..b"})
	b.ClientRequest(1, msg.Subscribe{Sub: "s", Pattern: ">", Selector: "qty >"})
	b.ClientRequest(1, msg.Subscribe{Sub: "d", Pattern: "a.>.b", Durable: true})
	b.Drain()
	if rej := ofType[msg.PubReject](f.clients[1]); len(rej) != 5 || !strings.Contains(rej[1].Reason, `bad topic "a..b"`) {
		t.Fatalf("bad topics: %v", f.clients[1])
	}
	if rej := ofType[msg.SubRejected](f.clients[1]); len(rej) != 3 || !strings.Contains(rej[2].Reason, `"a.>.b"`) {
		t.Fatalf("bad filters: %v", f.clients[1])
	}
	if len(f.appends) != 0 {
		t.Fatalf("a refused request reached the log: %v", f.appends)
	}
}
