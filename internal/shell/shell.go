// Package shell carries out what the GD engine asks, for one broker: it is
// the one place where a gd.Ready becomes sends, client answers, log appends
// and reads. It owns the engine, the client sessions and the bookkeeping of
// the event log, and it talks to the world only through three narrow
// interfaces it is given — Clock, Net and Durability — so that the same
// code runs in the real broker (internal/broker: the OS clock, TCP, the
// event log on disk) and in the simulator (internal/sim: simulated time,
// simulated links carrying the real wire codec, the event log over a
// crashable in-memory filesystem).
//
// A Broker is single-threaded, like the engine: one goroutine (or the
// simulator's event loop) calls its methods. Inputs step the engine; Drain
// carries out what it asks, once per burst of inputs. Durability is asynchronous:
// Append, Fetch and Trim start work whose completion the caller reports
// back through Persisted, Fetched and Trimmed. The persist-before-ack rule
// lives here once: publish acks leave only in Persisted, after the records
// of their batch are durable (Gryphon GD, ICDCS 2000 §3).
package shell

import (
	"fmt"
	"hash/fnv"
	"log/slog"
	"slices"
	"strings"
	"time"

	"github.com/aerie-mq/aerie/internal/gd"
	"github.com/aerie-mq/aerie/internal/msg"
	"github.com/aerie-mq/aerie/internal/retention"
	"github.com/aerie-mq/aerie/internal/tick"
)

// Clock is the broker's local clock.
type Clock interface {
	Now() tick.Time
}

// ClientID names one client connection for the life of a Broker. Ids only
// grow: a late request from a client's old connection must not steal its
// acks from the new one.
type ClientID uint64

// Net carries messages out of the broker. Both calls must not block: a
// message a full or broken connection cannot take is dropped, and the
// protocol recovers it (to a neighbour: nacks; to a client: the connection
// is closed with a reason, and the client resubscribes).
type Net interface {
	// Send hands m to the link to neighbour to, if there is one.
	Send(to msg.NodeID, m msg.Msg)
	// ToClient hands m to client connection c, if it is still open.
	ToClient(c ClientID, m msg.Msg)
	// CloseClient ends client connection c because it misbehaved, telling
	// it why.
	CloseClient(c ClientID, err error, reason string)
}

// Durability is the broker's stable storage (the event log of the pubends
// it hosts). Each call starts work and returns at once; the caller reports
// completion through the Broker method named with each call. At most the
// engine's gd.Config.PersistWindow Appends (one by default) and one Trim
// are outstanding at a time; Appends complete in the order they were made
// (Persisted names the oldest). Fetches may overlap them but must see the
// records of every Append that completed before them.
type Durability interface {
	// Append writes recs, in order, and makes them durable (fsync):
	// complete with Persisted, giving the log index of the first.
	Append(recs []msg.Record)
	// Fetch reads events of f back from the log, starting each range's
	// scan at the log index in from: complete with Fetched.
	Fetch(f gd.Fetch, from []uint64)
	// Trim writes snap as the log's snapshot, durably, then drops the
	// whole segments below log index cut: complete with Trimmed.
	Trim(cut uint64, snap []msg.Record)
}

// Reopener is implemented by a Durability that can recover its log in
// place after an append failed for want of room (DiskFull): it reopens
// the log, keeping exactly what was durable before the failure
// (storage.Store.Reopen), and completes with LogReopened. A Durability
// without it stops the broker on any failed append (crash-only).
type Reopener interface {
	ReopenLog()
	// NoRoom reports whether err, a failed append or fsync, is for want
	// of room (storage.NoRoom), and its reason for the log: the I/O side
	// classifies its own errors, the shell only acts on the answer.
	NoRoom(err error) (reason string, ok bool)
}

// noRoom reports whether err is a failed append for want of room, at a
// Durability that can reopen its log (Reopener).
func (b *Broker) noRoom(err error) (string, bool) {
	r, ok := b.dur.(Reopener)
	if !ok || err == nil {
		return "", false
	}
	return r.NoRoom(err)
}

// Backoff of the log's reopen attempts while its disk is full: the first
// after this, doubling to at most reopenMax.
const (
	reopenFirst = 500 * time.Millisecond
	reopenMax   = 5 * time.Second
)

// Config is what a Broker needs besides its engine.
type Config struct {
	ID     msg.NodeID
	Engine *gd.Engine
	Clock  Clock
	Net    Net
	// Durability: nil when the broker hosts no pubend.
	Durability Durability
	// Hosted lists the pubends this broker hosts: a publish that names no
	// pubend goes to one of them, by publisher.
	Hosted []msg.PubendID
	Logger *slog.Logger
	// Strict makes an input the engine refuses a panic rather than a
	// logged warning: in the simulator and in tests it is a bug.
	Strict bool
	// TrimOnlyWhenIdle (tests only) starts a trim only while nothing is
	// being persisted, as the shell did before it trimmed under load: the
	// simulator's mutation test whose scenario frequent trims hide runs
	// with it (docs/known-issues/trim-entries-ask.md).
	TrimOnlyWhenIdle bool
	// DiskReserve: while the event log's filesystem has less room than
	// this (DiskRoom), new publishes are refused with the reason instead
	// of filling the disk, where a failed append would stop the broker
	// (crash-only) again at every restart. 0 checks nothing.
	DiskReserve int64
	// GroupHomes lists the brokers that may be a consumer group's home
	// (groups.go), the same list at every broker of the network: a group
	// is served only at the one group.Home picks, and a member asking
	// elsewhere is refused with the home's client address. Empty: every
	// broker serves the groups its members ask it for.
	GroupHomes []GroupHome
}

// Broker is one broker's loop state.
type Broker struct {
	id     msg.NodeID
	eng    *gd.Engine
	clock  Clock
	net    Net
	dur    Durability
	log    *slog.Logger
	hosted []msg.PubendID
	strict bool
	homes  []GroupHome
	// trimIdle: Config.TrimOnlyWhenIdle.
	trimIdle bool
	// reserve is Config.DiskReserve; room the last DiskRoom (-1: unknown).
	reserve, room int64

	// recvIn and localIn are the inputs handed to eng.Step by pointer for
	// every peer message and publish, so that none is boxed per message.
	recvIn  gd.Recv
	localIn gd.Local

	sessions   map[ClientID]*session
	acks       acker     // coalesces the acks of a batch into ranges (acks.go)
	deliveries deliverer // coalesces the deliveries of a batch into runs (deliveries.go)
	pubOwner   owners[string]
	subOwner   owners[msg.SubID]

	// Durable subscriptions held here (durable.go).
	durables durables
	groups   groups // consumer groups with members here (groups.go)

	// The log: the bookkeeping of its events (retention), the batches
	// being persisted (oldest first, at most the engine's PersistWindow),
	// the engine's batches waiting for room in that window, the shell's
	// own records (durable subscriptions) waiting likewise, the fetches
	// and the trim out, and the log's bounds as last seen.
	retain   retention.Tracker
	inflight []*batch
	waiting  []*gd.Ready
	ownRecs  []msg.Record
	fetching int
	trimming bool
	first    uint64
	next     uint64
	// armed: a trim whose snapshot waits for the records it describes to
	// be durable (Trim); started and done count the batches appended and
	// completed, for its mark on the shell's own records.
	armed         *armedTrim
	started, done uint64

	// The log's disk is full (full: the cause, for refusals): the
	// leading failed batches of inflight wait to be appended again, once
	// the log is reopened (reopening: asked of Durability) at or after
	// reopenAt; backoff doubles with every attempt that fails.
	full       string
	failed     int
	reopening  bool
	reopenAt   tick.Time
	backoff    time.Duration
	fullSince  tick.Time
	fullEvents uint64 // times the disk was found full, for metrics
	// refusedDisk counts publishes refused for want of room.
	refusedDisk uint64

	// mem is the memory budget's state (memory.go).
	mem MemoryState
}

// armedTrim is a trim taken under load: its snapshot describes the state
// after records not yet durable, so it is handed to Durability only once
// the engine's batches up to engMark and the shell's up to ownMark are.
type armedTrim struct {
	cut              uint64
	snap             []msg.Record
	engMark, ownMark uint64
}

// batch is one Append: the engine's records (rd, nil when the batch holds
// only the shell's) followed by the shell's own.
type batch struct {
	rd  *gd.Ready
	own []msg.Record
	all []msg.Record
}

// New returns a Broker around cfg.Engine.
func New(cfg Config) *Broker {
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	hosted := slices.Clone(cfg.Hosted)
	slices.Sort(hosted)
	return &Broker{
		id: cfg.ID, eng: cfg.Engine, clock: cfg.Clock, net: cfg.Net, dur: cfg.Durability, log: cfg.Logger,
		hosted: hosted, strict: cfg.Strict, trimIdle: cfg.TrimOnlyWhenIdle, homes: cfg.GroupHomes,
		reserve: cfg.DiskReserve, room: -1,
		sessions: map[ClientID]*session{}, pubOwner: newOwners[string](), subOwner: newOwners[msg.SubID](),
		durables: newDurables(),
		groups:   newGroups(),
	}
}

// Engine returns the engine, for inspection (status, the simulator's
// oracle). Inputs go through the Broker's methods.
func (b *Broker) Engine() *gd.Engine { return b.eng }

// Restore hands the engine what the log held at startup (retention.Load),
// and adopts the log's bookkeeping.
func (b *Broker) Restore(l retention.Loaded) error {
	recs := b.restoreDurables(l.Records)
	if err := b.eng.RestoreLog(recs, l.Events); err != nil {
		return err
	}
	b.retain = l.Tracker
	b.first, b.next = l.First, l.Next
	// Before the first link comes up: the pubends must not release what a
	// durable subscriber that is away still needs (Gryphon DS §3).
	b.applyFloors()
	return nil
}

// LogBounds returns the first and next index of the event log, as of the
// last completed append or trim.
func (b *Broker) LogBounds() (first, next uint64) { return b.first, b.next }

// Clients returns the number of open client connections.
func (b *Broker) Clients() int { return len(b.sessions) }

// DiskRoom tells the shell how many bytes the event log's filesystem has
// left (-1: unknown), as the runtime measures it after its durable work
// and now and then.
func (b *Broker) DiskRoom(free int64) { b.room = free }

// diskFull reports why new publishes to pubend p are refused, or "".
func (b *Broker) diskFull(p msg.PubendID) string {
	if b.full != "" {
		return fmt.Sprintf("pubend %s at broker %s: disk full (%s): publishes are refused until space returns; nothing acknowledged is lost", p, b.id, b.full)
	}
	if b.reserve <= 0 || b.room < 0 || b.room >= b.reserve || len(b.hosted) == 0 {
		return ""
	}
	return fmt.Sprintf("pubend %s at broker %s: disk nearly full: the event log's disk has %d MiB free, below its %d MiB reserve: publishes are refused until space returns", p, b.id, b.room>>20, b.reserve>>20)
}

// Stalled reports whether the log is down for a full disk with nothing
// out at Durability: what waits (the failed batches, the records behind
// them) waits for a reopen, which a broker that is stopping does not
// make; none of it was acknowledged.
func (b *Broker) Stalled() bool {
	return b.full != "" && b.failed == len(b.inflight) && !b.reopening && b.fetching == 0 && !b.trimming
}

// Idle reports whether no durable work is outstanding.
func (b *Broker) Idle() bool {
	return len(b.inflight) == 0 && len(b.waiting) == 0 && len(b.ownRecs) == 0 && b.fetching == 0 && !b.trimming
}

// Tick is the engine's timer (every gd.Config.TickInterval).
func (b *Broker) Tick() {
	b.retryLog()
	b.step(gd.Tick{})
}

// PeerUp: a link to neighbour peer (incarnation inc) is established.
func (b *Broker) PeerUp(peer msg.NodeID, inc uint64) {
	b.step(gd.LinkUp{Peer: peer, Incarnation: inc})
}

// PeerDown: the link to neighbour peer is gone.
func (b *Broker) PeerDown(peer msg.NodeID) { b.step(gd.LinkDown{Peer: peer}) }

// ReleaseFloor sets or clears the release floor of a pubend at this SHB:
// the lowest tick its durable subscribers have acknowledged (Gryphon DS,
// DSN 2003 §3; gd.ReleaseFloor).
func (b *Broker) ReleaseFloor(in gd.ReleaseFloor) { b.step(in) }

// PeerMsg hands the engine a message from neighbour peer. An error means
// the message is not one brokers exchange: the caller closes the link.
func (b *Broker) PeerMsg(peer msg.NodeID, m msg.Msg) error {
	b.recvIn = gd.Recv{From: peer, Msg: m}
	err := b.eng.Step(b.clock.Now(), &b.recvIn)
	b.recvIn = gd.Recv{}
	return err
}

// Persisted completes the oldest outstanding Append: the batch is durable
// from log index first on (err nil), so its publishers get their acks and
// the engine learns. A failed append or fsync cannot be retried as it
// is (the log's state is unknown): for want of room (DiskFull), with a
// Durability that can reopen its log (Reopener), the batch waits unacked
// for the log to be reopened and takes it again (diskFilled, retryLog,
// LogReopened; docs/RELIABILITY.md "Disk full"); otherwise the error is
// returned, and the broker must stop without acking the batch, or any
// later one (crash-only).
func (b *Broker) Persisted(first uint64, err error) error {
	if len(b.inflight) <= b.failed {
		return fmt.Errorf("shell: broker %s: persist completion with no batch outstanding", b.id)
	}
	if reason, full := b.noRoom(err); full {
		b.diskFilled(err, reason)
		return nil
	}
	if err == nil && b.failed > 0 {
		return fmt.Errorf("shell: broker %s: a batch persisted after an earlier one failed", b.id)
	}
	bt := b.inflight[0]
	b.inflight[0] = nil
	b.inflight = b.inflight[1:]
	if err != nil {
		b.inflight, b.armed = nil, nil
		return fmt.Errorf("broker %s: event log append or fsync failed: %w", b.id, err)
	}
	if b.full != "" {
		b.log.Info("event log writable again: publishes are taken again", "pubends", b.hostedNames(), "full_for", b.clock.Now().Sub(b.fullSince).String())
		b.full, b.backoff = "", 0
	}
	for i, r := range bt.all {
		b.retain.Appended(first+uint64(i), r)
	}
	b.next = first + uint64(len(bt.all))
	if rd := bt.rd; rd != nil {
		b.toClients(rd.ToClientsAfterPersist)
		b.eng.Advance(*rd)
	}
	if len(bt.own) > 0 {
		b.durablesPersisted(bt.own)
	}
	b.done++
	b.startTrim()
	return nil
}

// diskFilled: the oldest outstanding batch failed for want of room. It
// stays in inflight, unacknowledged (its acks are released only by a
// successful Persisted), to be appended again once the log is reopened;
// the batches after it fail in turn (the log stays failed). New
// publishes are refused meanwhile (diskFull).
func (b *Broker) diskFilled(err error, reason string) {
	b.failed++
	now := b.clock.Now()
	if b.full == "" {
		b.fullEvents++
		b.fullSince = now
		b.full = reason
		b.log.Error("event log disk full: refusing publishes until space returns; nothing acknowledged is lost",
			"pubends", b.hostedNames(), "err", err)
	}
	if b.backoff == 0 {
		b.backoff = reopenFirst
	} else if b.failed == 1 {
		b.backoff = min(2*b.backoff, reopenMax)
	}
	b.reopenAt = now.Add(b.backoff)
}

// hostedNames lists the hosted pubends for messages: "P1" or "P1,P2".
func (b *Broker) hostedNames() string {
	s := make([]string, len(b.hosted))
	for i, p := range b.hosted {
		s[i] = string(p)
	}
	return strings.Join(s, ",")
}

// retryLog asks Durability to reopen the log once its backoff has passed
// and no failed append is still outstanding (from Tick).
func (b *Broker) retryLog() {
	if b.full == "" || b.reopening || b.failed < len(b.inflight) || b.clock.Now() < b.reopenAt {
		return
	}
	b.reopening = true
	b.dur.(Reopener).ReopenLog()
}

// LogReopened completes a ReopenLog. On success the failed batches are
// appended again, in order, at the indexes they were first given (the
// reopened log ends where the last successful fsync left it); publishes
// are taken again once the first of them is durable. On failure the
// reopen is tried again after a longer backoff, unless it failed for
// another reason than room (an I/O error): then it returns the error, and
// the broker must stop (crash-only), as for a failed append.
func (b *Broker) LogReopened(err error) error {
	b.reopening = false
	if _, full := b.noRoom(err); err != nil && !full {
		return fmt.Errorf("broker %s: event log reopen failed: %w", b.id, err)
	}
	if err != nil {
		b.backoff = min(2*b.backoff, reopenMax)
		b.reopenAt = b.clock.Now().Add(b.backoff)
		b.log.Warn("could not reopen the event log; trying again", "in", b.backoff.String(), "err", err)
		return nil
	}
	redo := slices.Clone(b.inflight)
	b.failed = 0
	if len(redo) == 0 {
		b.full, b.backoff = "", 0
		return nil
	}
	for _, bt := range redo {
		b.dur.Append(bt.all)
	}
	return nil
}

// DiskState is what status and metrics show of the event log's disk.
type DiskState struct {
	// Full is why publishes are refused for want of room now: the error
	// of the append that failed ("no space left on device"), or the
	// reserve's reason; "" when they are not refused.
	Full string
	// FullSince is when the failed append that Full names was seen (0
	// for the reserve).
	FullSince tick.Time
	// FullTimes counts the times an append failed on a full disk;
	// Refused the publishes refused for want of room (either way).
	FullTimes, Refused uint64
}

// Disk reports the event log's disk state.
func (b *Broker) Disk() DiskState {
	st := DiskState{Full: b.full, FullTimes: b.fullEvents, Refused: b.refusedDisk}
	if b.full != "" {
		st.FullSince = b.fullSince
	} else if len(b.hosted) > 0 {
		st.Full = b.diskFull(b.hosted[0])
	}
	return st
}

// Fetched completes a Fetch.
func (b *Broker) Fetched(f gd.Fetched) {
	b.fetching--
	defer b.startTrim()
	if f.Err != nil {
		b.log.Error("could not read events back from the event log; downstream will nack again", "pubend", string(f.Pubend), "err", f.Err)
	}
	b.step(f)
}

// Trim starts dropping the log segments whose events every downstream has
// released, after a snapshot of what they summarise (internal/retention).
// The snapshot is taken now, whatever is being persisted, and stored once
// every record it describes is durable (startTrim): a PHB under continuous
// load is never idle, and a trim that waited for an idle moment never ran
// (its log grew until the publishers paused). One trim at a time.
func (b *Broker) Trim() {
	if b.dur == nil || b.trimming || b.armed != nil || (b.trimIdle && !b.Idle()) {
		return
	}
	cut := b.retain.Cut(b.next, b.eng.Released)
	if cut <= b.first {
		return // nothing released since the last trim
	}
	snap, mark := b.eng.Snapshot()
	own := b.started
	if len(b.ownRecs) > 0 {
		own++ // the next batch takes every record of the shell's
	}
	b.armed = &armedTrim{cut: cut, snap: append(snap, b.durableSnapshot()...), engMark: mark, ownMark: own}
	b.startTrim()
}

// startTrim hands the armed trim to Durability once what its snapshot
// describes is durable, and no fetch is out (a fetch's start indexes must
// stay in the log). The cut lies below the log's end as it was when the
// trim was armed, so the records appended since stay.
func (b *Broker) startTrim() {
	t := b.armed
	if t == nil || !b.eng.PersistedThrough(t.engMark) || b.done < t.ownMark || b.fetching > 0 {
		return
	}
	b.armed = nil
	b.trimming = true
	b.dur.Trim(t.cut, t.snap)
}

// Trimmed completes a Trim: the log now starts at first, dropped records
// fewer than before.
func (b *Broker) Trimmed(first, dropped uint64, err error) {
	b.trimming = false
	if err != nil {
		b.log.Error("could not trim the event log (it keeps growing until this is fixed)", "err", err)
		return
	}
	b.first = first
	if dropped > 0 {
		b.log.Info("trimmed event log", "records_dropped", dropped, "first_index", first)
	}
}

func (b *Broker) step(in gd.Input) {
	b.refused(b.eng.Step(b.clock.Now(), in))
}

func (b *Broker) refused(err error) {
	if err == nil {
		return
	}
	if b.strict {
		panic(fmt.Sprintf("shell: broker %s: engine refused input: %v", b.id, err))
	}
	b.log.Warn("engine refused input", "err", err)
}

// Drain carries out every Ready the engine has: sends and client answers
// at once, records to the log (their acks wait for Persisted), reads back.
// Inputs only step the engine; the caller drains when it has handed over
// what arrived together (a burst read from the sockets), so that one Ready
// — one batch of sends, one group commit — serves them all.
func (b *Broker) Drain() {
	for {
		if len(b.groups.reports) > 0 {
			b.reportGroups()
		}
		for b.eng.HasReady() {
			rd := b.eng.Ready()
			for _, env := range rd.Send {
				b.net.Send(env.To, env.Msg)
			}
			b.toClients(rd.ToClients)
			if len(b.groups.reports) > 0 {
				b.reportGroups() // the engine may answer at once: this loop takes it
			}
			if len(rd.Persist) > 0 {
				r := rd // valid until its Advance
				b.waiting = append(b.waiting, &r)
			}
			for _, f := range rd.Fetch {
				from := make([]uint64, len(f.Ranges))
				for i, r := range f.Ranges {
					from[i] = b.retain.FetchStart(f.Pubend, r.Lo)
				}
				b.fetching++
				b.dur.Fetch(f, from)
			}
		}
		if len(b.groups.dirty) > 0 {
			b.saveGroups()
		}
		started := false
		for b.startBatch() {
			started = true
		}
		if !started || len(b.inflight) > 0 {
			return
		}
		// The batches completed within Append (a disk that is durable at
		// once, in tests): the engine may have more to do.
	}
}

// startBatch appends the oldest batch waiting — the engine's records,
// then the shell's — if the persist window has room. It reports whether
// it did.
func (b *Broker) startBatch() bool {
	if b.full != "" || len(b.inflight) >= b.eng.PersistWindow() || (len(b.waiting) == 0 && len(b.ownRecs) == 0) {
		return false
	}
	if b.dur == nil {
		panic(fmt.Sprintf("shell: broker %s has records to persist and no storage", b.id))
	}
	bt := &batch{own: b.ownRecs}
	if len(b.waiting) > 0 {
		bt.rd = b.waiting[0]
		b.waiting[0] = nil
		b.waiting = b.waiting[1:]
	}
	switch {
	case bt.rd == nil:
		bt.all = bt.own
	case len(bt.own) == 0:
		bt.all = bt.rd.Persist // the common case: no copy
	default:
		bt.all = append(slices.Clip(bt.rd.Persist), bt.own...)
	}
	b.ownRecs = nil
	b.started++
	b.inflight = append(b.inflight, bt)
	b.dur.Append(bt.all)
	return true
}

// pickPubend spreads publishers over the hosted pubends by a hash of their
// id, so one publisher's events all go to one pubend (and stay in order).
func (b *Broker) pickPubend(publisher string) msg.PubendID {
	if len(b.hosted) == 0 {
		return ""
	}
	h := fnv.New32a()
	h.Write([]byte(publisher))
	return b.hosted[int(h.Sum32()%uint32(len(b.hosted)))]
}
