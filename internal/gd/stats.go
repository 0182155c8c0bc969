package gd

import (
	"github.com/aerie-mq/aerie/internal/match"
	"github.com/aerie-mq/aerie/internal/msg"
	"github.com/aerie-mq/aerie/internal/tick"
)

// Stats counts what the engine did, for metrics and the simulator's traces.
type Stats struct {
	NacksSent          uint64
	NackTicksSent      uint64
	NacksReceived      uint64
	Retransmissions    uint64
	Delivered          uint64
	DuplicatePublishes uint64
	Stale              uint64 // messages for unknown pubends or from non-neighbours
	// Pubend payload cache (cache.go): payloads dropped from memory, reads
	// asked of the event log, failed reads, and nacks whose evicted
	// payloads the log did not return (must stay 0: a lost event).
	Evicted, Fetches, FetchErrors, FetchMisses uint64
	// Bounded caches elsewhere (refetch.go): Refetches sent upstream, and
	// those that timed out (their parked nacks dropped); DeliveryFetches
	// the rounds of payloads local delivery asked back (fetchForDelivery).
	Refetches, RefetchTimeouts, DeliveryFetches uint64
	// Relayed counts messages sent sideways through a cell peer (cells.go).
	Relayed uint64
	// AsksMoved counts requests sent to the next member of an upstream cell
	// because the member asked before left a request unanswered (askUp).
	AsksMoved uint64
	// Contradictions counts D⊔S or D(m)⊔D(m') joins; must stay 0 (docs/CONCEPTS.md P1).
	Contradictions int
	// FirstContradiction describes the first one, for diagnosis.
	FirstContradiction string
	// UnobservedD counts joins of D and S, in either order, where nothing
	// at this broker would observe the D (stream.Istream.Unobserved,
	// ARCHITECTURE.md decision 10): not contradictions.
	UnobservedD int
	// Congestion control (congestion.go, Gryphon CC): publishes that
	// waited for the pubend's rate, DCQs a pubend sent, UCAs sent upstream,
	// rate decreases at a pubend, recoveries an SHB started, and DCQs or
	// UCAs ignored (from outside the pubend's tree, or with an impossible
	// rate).
	PublishesHeld, DCQsSent, UCAsSent, RateDecreases, Recoveries, CCIgnored uint64
	// PublishesDropped counts publishes that asked for no ack and were
	// dropped because too many waited for their pubend's rate.
	PublishesDropped uint64
	// DownstreamsGone counts downstreams judged gone: silent for longer
	// than their pubend's max_retain (gone.go). Resyncs counts the
	// Replays this broker sent because its upstream's final prefix had
	// passed its delivery point (resync.go).
	DownstreamsGone, Resyncs uint64
	// Sheds counts the times the engine began shedding its caches (the
	// Shed input, shed.go), ShedBytes the payload bytes that left the
	// caches when it did.
	Sheds, ShedBytes uint64
}

// Stats returns the counters so far.
func (e *Engine) Stats() Stats {
	st := e.stats
	for _, ps := range e.streams {
		st.UnobservedD += ps.in.UnobservedD
	}
	return st
}

// StreamState is a read-only view of one pubend's streams at this broker,
// for the oracle and for operators.
type StreamState struct {
	Pubend       msg.PubendID
	Hosted       bool
	Final        tick.Tick // L prefix of istream[P]
	DoubtHorizon tick.Tick
	KnownHi      tick.Tick
	AckPrefix    tick.Tick
	Delivered    tick.Tick
	Runs         int       // knowledge runs held (memory)
	Gaps         int       // subend gaps tracked
	Announced    tick.Tick // pubend only
	Published    uint64    // pubend only: events announced since this incarnation began
	// Cached is the payload bytes the stream's cache counts as in memory
	// (cache.go; at least what its knowledge holds), CacheBudget the
	// budget they are trimmed to (PubendCacheBytes or RelayCacheBytes),
	// Downstreams its ostreams and ParkedNacks the nacks waiting for
	// payloads: at an SHB with neither, Cached stays within CacheBudget
	// after every step (docs/CONCEPTS.md I14).
	Cached, CacheBudget int64
	Downstreams         int
	ParkedNacks         int
}

// Inspect returns the state of every pubend stream, sorted by pubend.
func (e *Engine) Inspect() []StreamState {
	return e.InspectInto(make([]StreamState, 0, len(e.streams)))
}

// InspectInto is Inspect appending to buf[:0], so that a caller after every
// step (the simulator's oracle) need not allocate.
func (e *Engine) InspectInto(buf []StreamState) []StreamState {
	out := buf[:0]
	for _, ps := range e.streams {
		st := StreamState{
			Pubend: ps.id, Hosted: ps.pub != nil, Final: ps.in.K.Final(), DoubtHorizon: ps.in.K.DoubtHorizon(),
			KnownHi: ps.in.K.KnownHi(), AckPrefix: ps.in.AckPrefix, Delivered: ps.delivered,
			Runs: ps.in.K.Runs(), Gaps: ps.sub.Gaps(),
			Cached: ps.cache.bytes, CacheBudget: e.cacheBudget(ps), Downstreams: len(ps.outs), ParkedNacks: len(ps.cache.parked),
		}
		if ps.pub != nil {
			st.Announced, st.Published = ps.pub.Announced, ps.published
		}
		out = append(out, st)
	}
	return out
}

// Forwarded returns, per downstream cell, the events sent to it over all
// pubends, first-time and in answer to nacks.
func (e *Engine) Forwarded() map[msg.NodeID]uint64 {
	out := map[msg.NodeID]uint64{}
	for _, ps := range e.streams {
		for _, o := range ps.outs {
			out[o.Down] += o.Forwarded
		}
	}
	return out
}

// Knowledge returns istream[P]'s value at t (for the oracle's I7 checks).
func (e *Engine) Knowledge(p msg.PubendID, t tick.Tick) (tick.Kind, *msg.Event) {
	ps := e.pstreamOf(p)
	if ps == nil {
		return tick.Q, nil
	}
	return ps.in.K.Get(t)
}

// FilterAt returns the filter that the edge towards downstream neighbour to
// applies to tick t of pubend p (nil: passes everything), for the oracle's
// soundness check of silence.
func (e *Engine) FilterAt(p msg.PubendID, to msg.NodeID, t tick.Tick) match.Filter {
	if ps := e.pstreamOf(p); ps != nil {
		if o := e.outFrom(ps, to); o != nil {
			return o.FilterAt(t)
		}
	}
	return nil
}

// Released returns pubend p's release point (its final prefix) at a PHB.
func (e *Engine) Released(p msg.PubendID) tick.Tick {
	if ps := e.pstreamOf(p); ps != nil {
		return ps.in.K.Final()
	}
	return 0
}
