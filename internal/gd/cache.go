package gd

import (
	"slices"

	"github.com/aerie-mq/aerie/internal/msg"
	"github.com/aerie-mq/aerie/internal/tick"
)

// The pubend's payload cache: bounded memory at the PHB (issue 3). Other
// brokers bound theirs the same way and get payloads back from upstream
// (refetch.go).
//
// Every logged event stays D in the pubend's istream until it is released
// (L), which can take as long as the slowest downstream needs. Its payload
// need not stay in memory all that time, since the event log holds it. Once
// first-time knowledge has gone to every downstream, a payload is needed
// again only to answer a nack. The engine therefore keeps at most
// Config.PubendCacheBytes of payloads per pubend, dropping the oldest.
// When a nack reaches a dropped one, the engine parks the nack and asks the
// runtime to read the events back from the log (Ready.Fetch); the Fetched
// input brings them back, and the parked nacks are answered.
//
// The tick stays D throughout. Only the payload leaves memory, so knowledge
// never moves down the lattice (docs/CONCEPTS.md I8; P12 is the same choice for IB
// caches).

// Fetch asks the runtime to read the logged events of Pubend with ticks in
// Ranges back from the event log and return them in a Fetched input.
type Fetch struct {
	Pubend msg.PubendID
	Ranges []tick.Range
}

// Fetched returns what a Fetch read: every logged event of Pubend in the
// requested ranges that the log still holds. Err says the read failed; the
// parked nacks are then dropped, and downstream nacks again.
type Fetched struct {
	Pubend msg.PubendID
	Events []*msg.Event
	Err    error
}

func (Fetched) isInput() {}

type payloadCache struct {
	// overhead is what each cached payload counts for besides its
	// encoding (pubendCacheOverhead at a pubend, else 0).
	overhead int64
	fifo     []cached // ticks whose payload is in memory, oldest first
	head     int      // fifo[:head] were evicted or released
	bytes    int64    // payload bytes of fifo[head:]
	parked   []parkedNack
	fetching bool          // a Fetch (or Refetch) is out; parked nacks wait for it
	asked    tick.RangeSet // the ranges of the Fetch out
	returned tick.RangeSet // the ranges of the Fetch just returned

	// At the pubend: Refetches from downstream waiting for the same Fetch.
	parkedRefetch []msg.Refetch
	// At the pubend: Replays of durable catch-ups waiting likewise (replay.go).
	parkedReplay []msg.Replay
	// While parked requests are replayed (replaying), the payloads still
	// needed are gathered in pending and asked for at once at the end.
	replaying bool
	pending   tick.RangeSet
	// Elsewhere (refetch.go): what the Payloads so far settled of the
	// Refetch out, and when it left.
	got       tick.RangeSet
	refetchAt tick.Time
}

type cached struct {
	t    tick.Tick
	size int64
}

type parkedNack struct {
	from msg.NodeID
	r    tick.Range
}

// release drops the accounting of payloads at or below final: released
// ticks leave memory with the knowledge's final prefix. Called as final
// moves, it keeps the queue as short as the unreleased payloads instead of
// letting it grow to the budget between evictions.
func (c *payloadCache) release(final tick.Tick) {
	for c.head < len(c.fifo) && c.fifo[c.head].t <= final {
		c.bytes -= c.fifo[c.head].size
		c.head++
	}
	if c.head == len(c.fifo) {
		c.fifo, c.head = c.fifo[:0], 0
	}
	c.compact()
}

// pubendCacheOverhead is the memory a pubend's cached payload takes
// besides its bytes as msg.EventSize counts them: the rest of its
// encoding (pubend, publisher, tick and seq), the msg.Event (128 bytes), the knowledge run of
// its tick (and often one of silence beside it, 32 bytes each) and its
// entries here and in retainedBytes (16 each). Counting it makes
// Config.PubendCacheBytes bound the memory the cache takes, which with
// small events was three times the payload bytes it counted before.
const pubendCacheOverhead = 256

func (c *payloadCache) push(t tick.Tick, ev *msg.Event) {
	sz := int64(msg.EventSize(ev.Topic, ev.Props, ev.Payload)) + c.overhead
	c.fifo = append(c.fifo, cached{t, sz})
	c.bytes += sz
}

// evict drops the oldest payloads while the cache is over budget. Only
// payloads that every ostream has had first-time (at or below its SentHi)
// and that local delivery has passed can go: nothing but a nack needs them
// after that. Entries for released ticks just leave the accounting.
func (e *Engine) evict(ps *pstream) {
	budget := e.cacheBudget(ps)
	c := &ps.cache
	if c.fetching || len(c.parked) > 0 || len(c.parkedRefetch) > 0 || len(c.parkedReplay) > 0 {
		// Payloads brought back for parked nacks stay until those are
		// answered: evicting them between two rounds of requests would
		// have the next round ask for them again, forever when the budget
		// is smaller than what the nacks need together. Payloads above
		// them still go (evictAboveDelivery skips what parked nacks
		// need): an SHB's memory stays bounded while a round it asked
		// for is on its way, however long that takes.
		if ps.pub == nil && e.mut&MutHoldAboveDelivery == 0 {
			e.evictAboveDelivery(ps, budget)
		}
		return
	}
	limit := ps.delivered
	for _, o := range ps.outs {
		limit = min(limit, o.SentHi)
	}
	acked := ackedByAll(ps, limit)
	final := ps.in.K.Final()
	for c.head < len(c.fifo) {
		x := c.fifo[c.head]
		if x.t > final && x.t > acked && (c.bytes <= budget || x.t > limit) {
			break
		}
		c.head++
		c.bytes -= x.size
		if x.t > final && e.dropPayload(ps, x.t) {
			e.stats.Evicted++
		}
	}
	if ps.pub == nil && e.mut&MutHoldAboveDelivery == 0 {
		e.evictAboveDelivery(ps, budget)
	} else if ps.pub != nil {
		e.freeze(ps, limit)
	}
	c.compact()
}

// ackedByAll is the tick up to which a pubend's payloads go whatever the
// budget (evict): every downstream cell acknowledged it, so none nacks it,
// and local delivery and every ostream passed it (limit). What still asks
// for such a payload (a durable subscriber's catch-up, a member of a
// redundant cell that lags the one that acked, a refetch) has it read back
// from the log as after any eviction. A pubend holding events for a durable
// subscriber that is away thus keeps none of their payloads however large
// its budget, only their ticks and sizes, cold (freeze): its memory does not
// grow with what it retains (docs/RELIABILITY.md "Running for weeks"). 0
// elsewhere, and at a pubend with no downstream.
func ackedByAll(ps *pstream, limit tick.Tick) tick.Tick {
	if ps.pub == nil || len(ps.outs) == 0 {
		return 0
	}
	acked := limit
	for _, o := range ps.outs {
		acked = min(acked, o.AckPrefix)
	}
	return acked
}

// compact drops the evicted and released entries from the queue's front
// and, once it holds a quarter of its room or less, the room: a queue that
// grew to the budget while the downstreams lagged does not keep that much
// memory once they caught up.
func (c *payloadCache) compact() {
	if c.head > len(c.fifo)/2 {
		c.fifo = append(c.fifo[:0], c.fifo[c.head:]...)
		c.head = 0
	}
	if cap(c.fifo) > 1024 && len(c.fifo) < cap(c.fifo)/4 {
		c.fifo = append(make([]cached, 0, 2*len(c.fifo)), c.fifo...)
	}
}

// dropPayload drops the payload of the D tick t at ps; the tick stays D.
// Below a redundant cell, whose members can render one tick D and S
// (ARCHITECTURE.md decision 10), the stream first notes whether the D is
// unobservable here, so that an S for t that a member sends later is
// judged as it would be with the payload: the payload is the only way to
// tell, and it is gone by then. Elsewhere one sender renders each tick
// once, and nothing is noted.
func (e *Engine) dropPayload(ps *pstream, t tick.Tick) bool {
	return ps.in.DropPayload(t, ps.pub == nil && len(e.membersOf(ps.up)) > 1)
}

// freeze makes the pubend's knowledge cold up to upTo, as far as its
// payloads are out of memory: an event kept for a durable subscriber that
// is away then costs its tick and size packed in a few bytes (its log
// record holds the rest) instead of a run of the knowledge and an entry of
// retainedBytes, 48 bytes. Only a prefix freezes, up to the first event
// whose payload is still cached.
func (e *Engine) freeze(ps *pstream, upTo tick.Tick) {
	r := &ps.retained
	if ps.in.K.Freeze(upTo, func(t tick.Tick, ev *msg.Event) (int64, bool) {
		if ev != nil {
			return 0, false
		}
		return r.take(t)
	}) > 0 {
		r.compact()
	}
}

// evictAboveDelivery drops the newest payloads while the cache is still over
// budget: above a gap a broker that does not host the pubend would
// otherwise keep every payload that arrives until the gap is filled, rate ×
// recovery time (docs/RELIABILITY.md "An SHB recovering a gap"). Anything
// every ostream has had first-time may go, local delivery or not: a nack
// brings it back from upstream (refetch.go), and so does local delivery
// when it reaches it (deliver, fetchForDelivery). The newest go first, as
// they are needed last. Payloads that a parked nack needs (needed) stay,
// and so do the newest that some ostream has not had yet: at an SHB, with
// no ostream and no nack, the cache holds at most budget bytes once it
// returns, and an event accepted since at most one more.
func (e *Engine) evictAboveDelivery(ps *pstream, budget int64) {
	c := &ps.cache
	sent := tick.Max
	for _, o := range ps.outs {
		sent = min(sent, o.SentHi)
	}
	final := ps.in.K.Final()
	kept := e.keptTail[:0] // needed payloads passed over, newest first
	for c.bytes > budget && len(c.fifo) > c.head {
		x := c.fifo[len(c.fifo)-1]
		if x.t > sent {
			break
		}
		c.fifo = c.fifo[:len(c.fifo)-1]
		if x.t > final && c.needed(x.t) {
			kept = append(kept, x)
			continue
		}
		c.bytes -= x.size
		if x.t > final && e.dropPayload(ps, x.t) {
			e.stats.Evicted++
		}
	}
	for i := len(kept) - 1; i >= 0; i-- {
		c.fifo = append(c.fifo, kept[i])
	}
	e.keptTail = kept[:0]
}

// needed reports whether the payload of t must stay for a nack parked until
// a request returns (evict). A round that local delivery asked for is not
// protected: delivery takes what comes back before the cache is trimmed
// (onPayloads), and what it could not take yet (a lower payload still on
// its way from further up) is asked again in the next round, which always
// delivers at least its first payload. So an SHB's bound holds while
// rounds are out, and recovery still moves on with a budget of 0.
func (c *payloadCache) needed(t tick.Tick) bool {
	for _, p := range c.parked {
		if p.r.Lo <= t && t <= p.r.Hi {
			return true
		}
	}
	return false
}

// fetchForDelivery asks upstream for the evicted payloads local delivery
// needs next, from tick from on: at most maxDeliveryFetch of them, so that
// a long backlog comes back in rounds and never all at once.
func (e *Engine) fetchForDelivery(ps *pstream, from, dh tick.Tick) {
	if ps.cache.fetching {
		return // its answer delivers, and asks for the next round
	}
	var need []tick.Range
	n := 0
	ps.in.K.Visit(tick.Range{Lo: from, Hi: dh}, func(p tick.Range, k tick.Kind, ev *msg.Event) bool {
		if k == tick.D && ev == nil {
			need = appendRange(need, p)
			n += int(p.Hi - p.Lo + 1)
		}
		return n < maxDeliveryFetch && len(need) < refetchChunk
	})
	if len(need) > 0 {
		e.stats.DeliveryFetches++
		e.requestPayloads(ps, need)
	}
}

// maxDeliveryFetch bounds the payloads one round of fetchForDelivery asks
// for.
const maxDeliveryFetch = 4096

// missing returns the D ticks in r whose payload was evicted.
func missing(ps *pstream, r tick.Range) []tick.Range {
	var out []tick.Range
	ps.in.K.Visit(r, func(p tick.Range, k tick.Kind, ev *msg.Event) bool {
		if k == tick.D && ev == nil {
			if n := len(out); n > 0 && out[n-1].Hi+1 == p.Lo {
				out[n-1].Hi = p.Hi
			} else {
				out = append(out, p)
			}
		}
		return true
	})
	return out
}

// park holds a nack that needs evicted payloads and asks for them. A repeat
// of a nack already parked is dropped: it gets the same answer. While the
// parked nacks are replayed, their needs are gathered into one request.
func (e *Engine) park(ps *pstream, from msg.NodeID, r tick.Range, need []tick.Range) {
	c := &ps.cache
	if !slices.Contains(c.parked, parkedNack{from, r}) {
		c.parked = append(c.parked, parkedNack{from, r})
	}
	if c.replaying {
		for _, x := range need {
			c.pending.Add(x)
		}
		return
	}
	e.requestPayloads(ps, need)
}

// requestPayloads asks for the payloads of need, one request per pubend at
// a time: the pubend reads its log (Ready.Fetch), any other broker asks
// upstream (msg.Refetch, refetch.go).
func (e *Engine) requestPayloads(ps *pstream, need []tick.Range) {
	c := &ps.cache
	if c.fetching {
		return
	}
	c.fetching = true
	c.asked.Clear()
	for _, r := range need {
		c.asked.Add(r)
	}
	if ps.pub == nil {
		e.refetch(ps, need)
		return
	}
	e.out.Fetch = append(e.out.Fetch, Fetch{Pubend: ps.id, Ranges: need})
	e.stats.Fetches++
}

// onFetched puts the read payloads back and answers the parked nacks.
// Payloads that are back count against the budget again and leave at the
// next eviction.
func (e *Engine) onFetched(f Fetched) {
	ps := e.pstreamOf(f.Pubend)
	if ps == nil || ps.pub == nil {
		return
	}
	c := &ps.cache
	c.fetching = false
	// Replaying a parked nack may park it again and send the next Fetch,
	// which resets asked: judge misses against what this Fetch covered.
	c.returned.Clear()
	for _, r := range c.asked.Ranges() {
		c.returned.Add(r)
	}
	if f.Err != nil {
		c.parked, c.parkedRefetch = nil, nil
		c.parkedReplay = nil // their SHBs ask again
		e.stats.FetchErrors++
		return
	}
	for _, ev := range f.Events {
		if k, v := ps.in.K.Get(ev.Tick); k == tick.D && v == nil && ev.Pubend == ps.id {
			ps.in.K.SetValue(ev.Tick, ev)
			c.push(ev.Tick, ev)
		}
	}
	e.replayParked(ps)
}

// replayParked answers the nacks (and, at the pubend, the Refetches) that
// waited for payloads. One may park again and start the next request,
// which resets asked: misses are judged against returned.
func (e *Engine) replayParked(ps *pstream) {
	c := &ps.cache
	parked, refetches, replays := c.parked, c.parkedRefetch, c.parkedReplay
	c.parked, c.parkedRefetch, c.parkedReplay = nil, nil, nil
	c.replaying = true
	c.pending.Clear()
	for _, p := range parked {
		if o := e.outFrom(ps, p.from); o != nil {
			e.answerNack(ps, o, p.from, p.r, true)
		}
	}
	for _, m := range refetches {
		if need := missingIn(ps, m.Ranges); len(need) > 0 {
			if !c.fetchedAll(need) {
				c.parkedRefetch = append(c.parkedRefetch, m)
				for _, x := range need {
					c.pending.Add(x)
				}
				continue
			}
			e.stats.FetchMisses++ // the log does not hold them: answered without
		}
		e.answerRefetch(ps, m.Ranges, m.Path)
	}
	for _, m := range replays {
		e.serveReplay(ps, m) // parks again what still lacks payloads
	}
	c.replaying = false
	if !c.pending.IsEmpty() {
		e.requestPayloads(ps, slices.Clone(c.pending.Ranges()))
	}
}

// fetchedAll reports whether every range in need was part of the Fetch that
// just returned: then a payload still missing is one the log does not hold.
// Otherwise it was evicted after that Fetch left, and another is due.
func (c *payloadCache) fetchedAll(need []tick.Range) bool {
	for _, r := range need {
		if !c.returned.Covers(r) {
			return false
		}
	}
	return true
}
