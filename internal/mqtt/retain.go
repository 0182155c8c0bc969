package mqtt

import (
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"os"
	"slices"
	"strings"
	"sync"
	"time"

	mochi "github.com/mochi-mqtt/server/v2"
	"github.com/mochi-mqtt/server/v2/packets"

	"github.com/aerie-mq/aerie/internal/msg"
)

// Retained messages (docs/MQTT.md, Retained messages).
//
// A retained PUBLISH is an aerie publish like any other (live subscribers
// get it, without the retain flag unless they asked for retain as
// published), carrying retainProperty, and, once aerie has acknowledged
// it (durable at its pubend), the topic's retained message at this
// broker: an empty payload clears it [MQTT-3.3.1-10]. Every broker with
// an MQTT listener learns it, the publishing one too, through a
// subscription of its own, the retained watch, whose selector
// (retainProperty = TRUE) lets only retained messages travel
// (Options.RetainedNetwork). A new subscription gets the retained
// messages its filter matches right after its SUBACK, with the retain
// flag set [MQTT-3.3.1-9], ahead of the live messages still queued for
// it.
//
// With a file (Options.RetainedFile, under the broker's data directory)
// the watch is a durable subscription (Gryphon DS §3). The store is
// written to the file (retainfile.go), with the token of the watch's
// deliveries it holds, before the checkpoint that covers it is told to
// the broker (keepRetained): so the checkpoint the broker keeps, and the
// pubends' release with it, never passes the file. After a restart the
// watch subscribes from the file's token (watchRetained), and what was
// retained while the broker was down is caught up from the pubends'
// logs; a delivery the file already holds (at or below its token) is
// skipped — the restarted store neither loses a retained message nor
// takes back an older value. Without a file the store and the watch are
// in memory only.

// retainedMsg is a topic's retained message.
type retainedMsg struct {
	topic   string // MQTT form
	payload []byte
	props   msg.Props // as the event carries them (props.go)
	qos     byte
	// published is when it was published, in Unix milliseconds: its
	// event's tick at the pubend, or, at the broker that took it, when
	// the PUBLISH was read; its Message Expiry Interval counts from there
	// (sendExpiry).
	published int64
}

// expired reports whether r's Message Expiry Interval has passed at nowMs.
func (r *retainedMsg) expired(nowMs int64) bool {
	_, ok := sendExpiry(eventExpiry(r.props), r.published, nowMs)
	return !ok
}

// retainStore is the broker's retained messages by MQTT topic.
type retainStore struct {
	mu sync.Mutex
	m  map[string]retainedMsg
	// covered is, per pubend, the tick up to which the watch's deliveries
	// are applied to m (the file's token when it was read, then what the
	// watch delivered: events, Progress, Gap).
	covered msg.Token
	// skip is the token of the file read at the start: a delivery at or
	// below it is in m already (the catch-up from an older checkpoint
	// brings it again).
	skip msg.Token
	// dirty: m changed since it was last handed to the file.
	dirty bool
	// changed (cap 1) wakes keepRetained; nil without a file.
	changed chan struct{}
}

func newRetainStore() retainStore {
	return retainStore{m: map[string]retainedMsg{}, covered: msg.Token{}}
}

// set keeps r as its topic's retained message, or clears the topic.
func (rs *retainStore) set(r retainedMsg) {
	rs.mu.Lock()
	defer rs.mu.Unlock()
	rs.setLocked(r)
}

func (rs *retainStore) setLocked(r retainedMsg) {
	if len(r.payload) == 0 {
		delete(rs.m, r.topic)
	} else {
		rs.m[r.topic] = r
	}
	rs.dirty = true
	rs.wake()
}

func (rs *retainStore) wake() {
	if rs.changed != nil {
		signal(rs.changed)
	}
}

// learn keeps a retained message the watch delivered, unless the store
// read at the start holds it already.
func (rs *retainStore) learn(ev *msg.Event) {
	rs.mu.Lock()
	defer rs.mu.Unlock()
	if ev.Tick > rs.skip[ev.Pubend] {
		if topic, ok := TopicOf(ev.Topic); ok {
			rs.setLocked(retainedMsg{topic: topic, payload: slices.Clone(ev.Payload), props: ev.Props, qos: eventQoS(ev),
				published: ev.Tick.Millis()})
		}
	}
	rs.coverLocked(msg.Token{ev.Pubend: ev.Tick})
}

// cover: the watch has had everything up to tok (Progress, Gap).
func (rs *retainStore) cover(tok msg.Token) {
	rs.mu.Lock()
	defer rs.mu.Unlock()
	rs.coverLocked(tok)
}

func (rs *retainStore) coverLocked(tok msg.Token) {
	for p, t := range tok {
		if t > rs.covered[p] {
			rs.covered[p] = t
			rs.wake()
		}
	}
}

// snapshot returns the token the store covers and whether the store
// changed since the last snapshot; if so, its messages too, for the file
// (then counted as written: unwritten marks it changed again).
func (rs *retainStore) snapshot() (retainedFile, bool) {
	rs.mu.Lock()
	defer rs.mu.Unlock()
	f := retainedFile{token: maps.Clone(rs.covered)}
	dirty := rs.dirty
	if dirty {
		f.msgs = slices.Collect(maps.Values(rs.m))
	}
	rs.dirty = false
	return f, dirty
}

// unwritten: the last snapshot did not reach the file; it is tried
// again.
func (rs *retainStore) unwritten() {
	rs.mu.Lock()
	defer rs.mu.Unlock()
	rs.dirty = true
	rs.wake()
}

// restore fills the empty store from its file.
func (rs *retainStore) restore(f retainedFile) {
	rs.mu.Lock()
	defer rs.mu.Unlock()
	for _, r := range f.msgs {
		rs.m[r.topic] = r
	}
	rs.covered, rs.skip = maps.Clone(f.token), maps.Clone(f.token)
}

// retainedEvent reports whether ev was published retained.
func retainedEvent(ev *msg.Event) bool {
	v, ok := ev.Props.Get(retainProperty)
	return ok && v.Kind == msg.PropBool && v.Bool()
}

// watchName is the broker's own subscription to retained messages.
const watchName = "mqtt-retained"

// watchSelector lets only retained messages travel to the watch.
const watchSelector = retainProperty + " = TRUE"

// watchRetained subscribes, as a client of the broker of its own, to
// every retained message published in the network: they fill this
// broker's store as they are delivered. Without a file the subscription
// starts with the listener, so a retained message published while the
// broker was down, or before the subscription is in force, is not known
// here (docs/MQTT.md). With one the watch is durable and starts where the
// store stands, so nothing is missed: a first, plain subscription (the
// probe, probeName) learns which pubends the broker routes (its
// SubStarted token); the watch then subscribes from the store's token
// for each pubend, and from the start of the log of every pubend the
// store has not covered (a first start, or a file missing or unreadable:
// the store is rebuilt from what the logs still hold).
func (s *Server) watchRetained() {
	cl := s.srv.NewClient(nil, "aerie", "aerie-retained", true)
	c := newConn(s, cl)
	c.watch, c.st = true, &clientState{in: map[uint16]*inbound{}}
	c.id = s.opts.Host.Up(c)
	s.watchID, s.watching = c.id, true
	name := msg.SubID(watchName)
	if s.opts.RetainedFile != "" {
		name = probeName
	}
	s.opts.Host.Request(c.id, msg.Subscribe{Sub: name, Pattern: ">", Selector: watchSelector})
}

// probeName is the plain subscription that learns the pubends before the
// durable watch starts.
const probeName = "mqtt-retained-probe"

// probed: the probe is in force, at routed; the durable watch starts (on
// a goroutine of its own: the broker's loop called, and asking it waits
// for it).
func (s *Server) probed(routed msg.Token) {
	from := msg.Token{}
	for p := range routed {
		from[p] = 0
	}
	fresh := len(from)
	s.retained.mu.Lock()
	for p, t := range s.retained.skip {
		if _, ok := from[p]; ok {
			fresh--
		}
		from[p] = t // a pubend not routed now keeps its position
	}
	s.retained.mu.Unlock()
	s.log.Info("MQTT retained watch starting", "pubends", len(from), "from the start of their logs", fresh)
	s.bg.Add(1)
	go func() {
		defer s.bg.Done()
		s.opts.Host.Request(s.watchID, msg.Unsubscribe{Sub: probeName})
		s.opts.Host.Request(s.watchID, msg.Subscribe{Sub: watchName, Pattern: ">", Selector: watchSelector, Durable: true, From: from})
	}()
}

// watchSent takes what the broker sends the retained watch (the broker's
// loop, through Conn.Send): it never blocks.
func (s *Server) watchSent(m msg.Msg) {
	switch x := m.(type) {
	case msg.SubStarted:
		if x.Sub == probeName {
			s.probed(x.Token)
		}
	case msg.Delivery:
		if x.Sub == watchName {
			s.retained.learn(x.Event)
		}
	case msg.Progress:
		if x.Sub == watchName {
			s.retained.cover(x.Token)
		}
	case msg.Gap:
		if x.From == 0 {
			s.log.Info("MQTT retained store: the pubend's log no longer holds its oldest retained messages",
				"pubend", string(x.Pubend), "released through", x.To)
		} else {
			s.log.Warn("MQTT retained store: retained messages may be missing; the pubend had released them before this broker's watch took them",
				"pubend", string(x.Pubend), "from", x.From, "to", x.To)
		}
		s.retained.cover(msg.Token{x.Pubend: x.To})
	case msg.SubRejected:
		s.log.Error("MQTT retained store: the retained watch was refused; retained messages published elsewhere are not learnt here",
			"sub", string(x.Sub), "reason", x.Reason)
	}
}

// keepRetained writes the store to its file whenever it changed, then
// tells the broker the watch's checkpoint the file covers (msg.SubAck):
// never before, so that a restart resumes no later than the file. Writes
// come no closer than twice the time the last one took (at least
// minRetainGap): the whole store is written each time, and a busy store
// costs at most a third of one core's time in writing. At Close it
// writes a last time, without telling the broker (which is stopping).
func (s *Server) keepRetained() {
	defer s.bg.Done()
	var acked msg.Token
	gap := minRetainGap
	for {
		select {
		case <-s.retained.changed:
		case <-s.closing:
			s.saveRetained()
			return
		}
		start := time.Now()
		tok, ok := s.saveRetained()
		if ok && s.watching && moved(tok, acked) {
			s.opts.Host.Request(s.watchID, msg.SubAck{Sub: watchName, Token: tok})
			acked = tok
		}
		gap = max(minRetainGap, 2*time.Since(start))
		if !ok {
			gap = retainRetry
		}
		t := time.NewTimer(gap) // pacing the writes, not synchronisation
		select {
		case <-t.C:
		case <-s.closing:
			t.Stop()
			s.saveRetained()
			return
		}
	}
}

const (
	minRetainGap = 20 * time.Millisecond
	retainRetry  = time.Second // after a failed write
)

// saveRetained writes the store to its file if it changed, and returns
// the token the file covers (ok: the file holds the store).
func (s *Server) saveRetained() (msg.Token, bool) {
	f, dirty := s.retained.snapshot()
	if !dirty {
		return f.token, true
	}
	if err := writeSynced(s.opts.RetainedFile, encodeRetained(f)); err != nil {
		s.retained.unwritten()
		s.log.Error("MQTT retained store not written; the retained watch's checkpoint waits for it",
			"path", s.opts.RetainedFile, "err", err)
		return nil, false
	}
	return f.token, true
}

// moved reports whether tok passes acked at some pubend.
func moved(tok, acked msg.Token) bool {
	for p, t := range tok {
		if a, ok := acked[p]; !ok || t > a {
			return true
		}
	}
	return false
}

// loadRetained reads the store's file at the start. A file missing (a
// first start, or a crash before the first write) or unreadable leaves
// the store empty, to be rebuilt from the pubends' logs (watchRetained);
// an unreadable one is logged and set aside as FILE.corrupt, for
// inspection.
func (s *Server) loadRetained() {
	path := s.opts.RetainedFile
	_ = os.Remove(path + ".tmp") // a write a crash cut short
	b, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return
	}
	var f retainedFile
	if err == nil {
		f, err = decodeRetained(b)
	}
	if err != nil {
		aside := path + ".corrupt"
		if rerr := os.Rename(path, aside); rerr != nil {
			aside = fmt.Sprintf("not set aside: %v", rerr)
		}
		s.log.Error("MQTT retained store file unreadable: set aside; the store is rebuilt from what the pubends' logs still hold, retained messages they have released are lost",
			"path", path, "aside", aside, "err", err)
		return
	}
	s.retained.restore(f)
	s.log.Info("MQTT retained store read", "path", path, "messages", len(f.msgs))
}

// matching returns the retained messages filter matches at nowMs, by
// topic. One whose Message Expiry Interval has passed is discarded
// (MQTT 5 §3.3.2.3.3): its topic has no retained message any more.
func (rs *retainStore) matching(filter string, nowMs int64) []retainedMsg {
	rs.mu.Lock()
	defer rs.mu.Unlock()
	var out []retainedMsg
	for t, r := range rs.m {
		if !MatchFilter(filter, t) {
			continue
		}
		if r.expired(nowMs) {
			delete(rs.m, t)
			rs.dirty = true
			rs.wake()
			continue
		}
		out = append(out, r)
	}
	slices.SortFunc(out, func(a, b retainedMsg) int { return strings.Compare(a.topic, b.topic) })
	return out
}

// MatchFilter is MQTT's own matching rule (MQTT 4.7): whether topic name
// matches filter, '$' topics only under a first level that names them.
func MatchFilter(filter, topic string) bool {
	if !MatchesDollar(filter, topic) {
		return false
	}
	f, tl := strings.Split(filter, "/"), strings.Split(topic, "/")
	for i, l := range f {
		if l == "#" {
			return true // zero or more levels, the parent included
		}
		if i >= len(tl) || (l != "+" && l != tl[i]) {
			return false
		}
	}
	return len(f) == len(tl)
}

// retainGrant is a filter of a SUBSCRIBE whose retained messages go out
// after its SUBACK.
type retainGrant struct {
	filter string
	name   string // the subscription's first aerie name (its QoS and options)
}

// retainDue: filter was granted on subscription sub in SUBSCRIBE pid;
// fresh: it did not exist before. The v5 retain handling option says
// whether its retained messages are sent (0: always, 1: if fresh, 2:
// never) [MQTT-3.3.1-9] [MQTT-3.3.1-10] (mu held).
func (c *Conn) retainDueLocked(pid uint16, f packets.Subscription, sub *subscription, fresh bool) {
	if f.RetainHandling == 2 || (f.RetainHandling == 1 && !fresh) || len(sub.names) == 0 || sub.share != "" {
		return // none for a shared subscription [MQTT-3.8.4-?] (MQTT 5 §4.8.2)
	}
	c.retainDue[pid] = append(c.retainDue[pid], retainGrant{filter: f.Filter, name: string(sub.names[0])})
}

// subackSent: the SUBACK of pid is written; the retained messages of its
// filters go next, ahead of the live deliveries still queued for them.
func (c *Conn) subackSent(pid uint16) {
	c.mu.Lock()
	grants := c.retainDue[pid]
	delete(c.retainDue, pid)
	var items []queued
	now := time.Now().UnixMilli()
	for _, g := range grants {
		for _, r := range c.s.retained.matching(g.filter, now) {
			items = append(items, queued{retained: &r, sub: msgSubID(g.name)})
		}
	}
	if len(items) > 0 {
		c.queue = append(items, c.queue...)
	}
	c.mu.Unlock()
	if len(items) > 0 {
		signal(c.wake)
	}
}

// deliverRetained writes a retained message to the client under
// subscription name, at the lower of its QoS and the subscription's, with
// the retain flag; it counts towards no checkpoint (it is not a delivery
// of the subscription's stream).
func (c *Conn) deliverRetained(r *retainedMsg, name string, window int) bool {
	c.mu.Lock()
	sub := c.byName[msgSubID(name)]
	c.mu.Unlock()
	if sub == nil {
		return true
	}
	qos := min(sub.qos, r.qos)
	pk := packets.Packet{FixedHeader: packets.FixedHeader{Type: packets.Publish, Qos: qos, Retain: true},
		TopicName: r.topic, Payload: r.payload}
	if c.v5 {
		pk.Properties = mqttProps(r.props, r.payload)
		if sub.id > 0 {
			pk.Properties.SubscriptionIdentifier = []int{sub.id}
		}
	}
	interval := eventExpiry(r.props)
	if interval > 0 && c.expired(interval, r.published) {
		return true // expired since the SUBACK
	}
	if qos > 0 && !c.awaitRoom(&pk, sub, msgSubID(name), nil, window) {
		return false
	}
	if !c.setExpiry(&pk, interval, r.published) {
		if qos > 0 {
			c.delivered(pk.PacketID)
		}
		return true
	}
	if err := c.writePublish(pk); err != nil {
		if err == packets.ErrPacketTooLarge {
			if qos > 0 {
				c.delivered(pk.PacketID)
			}
			return true
		}
		return false
	}
	return true
}

// OnPacketSent: a SUBACK is out; its retained messages follow.
func (h *hook) OnPacketSent(cl *mochi.Client, pk packets.Packet, _ []byte) {
	if pk.FixedHeader.Type != packets.Suback {
		return
	}
	if c := h.s.conn(cl); c != nil {
		c.subackSent(pk.PacketID)
	}
}
