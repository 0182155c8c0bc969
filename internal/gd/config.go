package gd

import (
	"errors"
	"fmt"
	"time"

	"github.com/aerie-mq/aerie/internal/congestion"
	"github.com/aerie-mq/aerie/internal/msg"
	"github.com/aerie-mq/aerie/internal/tick"
)

// Config holds every parameter of the GD engine. Each field names its unit,
// its default (the seeds' values unless said otherwise) and when to change it.
type Config struct {
	// TickInterval is how often the runtime must call Step with a Tick input.
	// Default 10ms. Every timer below is checked on ticks, so it bounds their
	// precision; lower it only if GCT is set below ~50ms.
	TickInterval time.Duration

	// GapCuriosityThreshold (GCT): a subend nacks a gap's Q ticks once the
	// gap has lasted this long. Default 200ms [000 §4.2]. Lower recovers
	// faster after loss but nacks more on reordering paths.
	GapCuriosityThreshold time.Duration

	// NackRepetitionMin (NRT floor): an unanswered nack is repeated after
	// max(this, SRTT+4·RTTVAR) [000 §3.1, docs/CONCEPTS.md P7]. Default 600ms
	// [000 §4.2]. Raise it on long-delay links.
	NackRepetitionMin time.Duration

	// NackRepetitionMax caps the exponential backoff of repeated nacks when
	// the pubend seems down. Default 60s (docs/CONCEPTS.md P7).
	NackRepetitionMax time.Duration

	// ForgettingInterval: curiosity C in an istream is forgotten after this
	// long so that a repeated nack is not swallowed by consolidation
	// [000 §3.1]. Default = NackRepetitionMin, as the seed says; it must not
	// exceed it.
	ForgettingInterval time.Duration

	// DelayCuriosityThreshold (DCT): a subend whose doubt horizon has not
	// moved for this long nacks towards the pubend's present, guarding
	// against loss of the latest message. Default 5s (docs/CONCEPTS.md P8; the
	// seed's experiments used infinity). Zero disables it.
	DelayCuriosityThreshold time.Duration

	// AckExpectedThreshold (AET): the pubend expects every tick older than
	// this to be acked and sends AckExpected down unacked paths otherwise
	// [000 §3.2]. Default 10s [000 §4.2]; repeated with doubling up to 8×
	// (docs/CONCEPTS.md P10).
	AckExpectedThreshold time.Duration

	// SilenceInterval (t_silence): an idle pubend announces silence, and an
	// ostream forwards coalesced first-time silence, at most this often
	// [003 Table 1, docs/CONCEPTS.md P5]. Default 1s. It bounds how far an idle
	// subscriber's doubt horizon lags.
	SilenceInterval time.Duration

	// AckInterval: acks go upstream at most this often per pubend and link
	// (docs/CONCEPTS.md P11). Default 200ms.
	AckInterval time.Duration

	// NackChunk: a nack covers at most this much pubend time; longer ranges
	// are split (docs/CONCEPTS.md P7). Default 600ms of ticks.
	NackChunk time.Duration

	// HWMLead: how far ahead of its clock a pubend reserves ticks with a
	// persisted high-water mark (docs/CONCEPTS.md P2). Default 2s. Silence is never
	// announced beyond the durable mark, so this must exceed the fsync
	// latency by a wide margin.
	HWMLead time.Duration

	// DedupWindow: how many recent sequence numbers per publisher a pubend
	// remembers for idempotent retries. Default 4096; it must exceed a
	// publisher's maximum number of unacknowledged publishes.
	DedupWindow int

	// PubendCacheBytes: memory for the payloads of logged events a pubend
	// keeps until they are released, each counted as its bytes and 256
	// bytes of bookkeeping (pubendCacheOverhead); older payloads are read
	// back from the event log when a nack or a catch-up needs them
	// (cache.go). Default 64 MiB per pubend. Raise it to serve long catch-ups from memory; lower it to
	// bound a PHB's memory when downstreams may stay away long.
	PubendCacheBytes int64

	// RelayCacheBytes: payload bytes of a pubend's events a broker that
	// does not host it (an IB or SHB) keeps in memory, each counted as its
	// encoding (msg.EventSize; in memory a small event takes about 250
	// bytes more, BenchmarkRecoveryHold). Past it the oldest
	// payloads every ostream has had go, the ticks stay D, and a nack that
	// needs one is answered once the payloads are back from upstream
	// (msg.Refetch, refetch.go; docs/CONCEPTS.md P12); then, above a gap,
	// the newest go, and local delivery asks for them back when it reaches
	// them (cache.go evictAboveDelivery). Default 64 MiB per pubend (the
	// config key relay_cache_bytes). It bounds an IB's memory when a
	// downstream stays away, and an SHB's while it recovers a gap
	// (docs/RELIABILITY.md "An SHB recovering a gap"); lower it where
	// many pubends recover at once, at the cost of payloads sent twice.
	RelayCacheBytes int64

	// TotalOrderHoldBytes: event bytes a subscription in uniform total
	// order may hold back at its SHB while it waits for the slowest
	// pubend's doubt horizon (total.go). Past it the subscription ends
	// with the reason (a pubend that stays silent for good, its PHB down,
	// would otherwise make it hold every other pubend's events forever).
	// Default 64 MiB per subscription; 0 means no limit.
	TotalOrderHoldBytes int64

	// MaxRetain (maxRetain(p)): a pubend discards a tick older than this
	// once every downstream SHB has delivered it to its consolidated
	// stream, even if a durable subscriber that is away has not
	// acknowledged it; that subscriber gets a gap instead (Gryphon DS, DSN
	// 2003 §3, the PHB-controlled early-release policy; release.go). Zero
	// never releases early: a durable subscriber that never comes back
	// then holds the pubend's log forever. Default 168h (the config key
	// max_retain). Without durable subscribers it changes nothing.
	MaxRetain time.Duration
	// MaxRetainBytes bounds, beside MaxRetain, the bytes of a pubend's
	// logged events that are not released (whichever bound comes first,
	// as Kafka's retention.bytes beside retention.ms): past it the pubend
	// releases its oldest events that every downstream SHB has delivered,
	// with the same gap to a durable subscriber that is away
	// (retainbytes.go). Zero (the default) sets no size bound. The config
	// key max_retain_bytes.
	MaxRetainBytes int64
	// ReleaseGone: a downstream that acknowledged nothing for longer than
	// its pubend's max_retain no longer holds this broker, and resyncs from
	// the pubend when it returns (gone.go, resync.go, vouch.go;
	// docs/RELIABILITY.md "Running for weeks"); max_retain = "0s" never
	// judges a downstream gone. On by default; off (tests and `aerie sim
	// --release-gone=false` only), a downstream that dies for good holds
	// every broker above it until it is removed from the config.
	ReleaseGone bool
	// GoneMin: no downstream is judged gone sooner than this, whatever the
	// pubend's max_retain: the links' heartbeat timeout
	// (transport.DefaultDeadAfter, 5s), below which a brokers' config
	// refuses max_retain. A shorter bound judges downstreams that are
	// merely slow gone, and one whose resync takes longer than the bound is
	// judged gone again before it catches up, for ever (gone.go).
	GoneMin time.Duration

	// SummaryDeltaMin: a summary of more clauses than this is sent upstream
	// as what changed (msg.SummaryDelta) when that is shorter, and a
	// pubend logs its filter versions the same way; smaller ones go whole.
	// Default 16. Zero sends every change as a delta when shorter.
	SummaryDeltaMin int

	// CatchupWindowEvents and CatchupWindowBytes bound, per durable
	// subscription whose client reports what its application has taken
	// (msg.SubConsumed), the catch-up events delivered to it and not yet
	// reported taken (durable.go, "Pacing"): its catch-up advances only as
	// fast as it reads, and the connection's outbound queue
	// (SubscriberQueue, 100 000 events by default) never fills with it.
	// Defaults 10 000 events and 8 MiB (zero: the default). A client that
	// reports every k events (or bytes) needs a window of at least 2k, or
	// what it has not reported yet could stall its catch-up: the client
	// library reports every msg.ConsumedEvery events or msg.ConsumedBytes
	// bytes, so a broker's setting is at least MinCatchupWindowEvents and
	// MinCatchupWindowBytes (the config keys catchup_window_events and
	// catchup_window_bytes; the simulator's clients report more often and
	// run smaller windows). Larger windows ride out a subscriber's pauses;
	// a connection with several durable subscriptions catching up at once
	// holds a window for each. Clients of protocol version 15 and earlier
	// report nothing and catch up unpaced.
	CatchupWindowEvents int
	CatchupWindowBytes  int64

	// PersistWindow: how many batches of records the engine hands out for
	// persisting before the first of them is made durable (Advance). The
	// default, 0, is 1: one fsync at a time, the records of the next batch
	// queue meanwhile (group commit, docs/ARCHITECTURE.md "The core contract"). A replicated PHB sets
	// more, so that the next batch replicates while earlier ones await
	// their majority (P2S, DEBS 2014 §3.4 pipelines α = 10 instances);
	// its Durability must then complete batches in the order it got them.
	PersistWindow int

	// BestEffort switches guaranteed delivery off (besteffort.go): no log,
	// no knowledge, no nacks or acks; events go down once and are lost if
	// a link drops them. Default false. It is the baseline that seed 000
	// §4.1 measures GD against; use it only to measure.
	BestEffort bool

	// CongestionControl switches Gryphon CC on (congestion.go): pubends
	// send DCQs and slow their publishers to the rate the network sustains,
	// SHBs alert when they fall behind and bound their nacks while they
	// recover. Default false in this struct, so that the protocol's golden
	// stories stay about GD; the broker turns it on. Switch it off only to
	// watch a network collapse under overload (Gryphon CC §2).
	CongestionControl bool

	// Congestion holds Table 1 of Gryphon CC and our additions, each with
	// unit, default and advice (congestion.Config).
	Congestion congestion.Config
}

// DefaultConfig returns the seed's parameters (see each field).
func DefaultConfig() Config {
	return Config{
		TickInterval:            10 * time.Millisecond,
		GapCuriosityThreshold:   200 * time.Millisecond,
		NackRepetitionMin:       600 * time.Millisecond,
		NackRepetitionMax:       60 * time.Second,
		ForgettingInterval:      600 * time.Millisecond,
		DelayCuriosityThreshold: 5 * time.Second,
		AckExpectedThreshold:    10 * time.Second,
		SilenceInterval:         time.Second,
		AckInterval:             200 * time.Millisecond,
		NackChunk:               600 * time.Millisecond,
		HWMLead:                 2 * time.Second,
		DedupWindow:             4096,
		PubendCacheBytes:        64 << 20,
		RelayCacheBytes:         64 << 20,
		TotalOrderHoldBytes:     64 << 20,
		MaxRetain:               168 * time.Hour,
		GoneMin:                 5 * time.Second,
		ReleaseGone:             true,
		Congestion:              congestion.DefaultConfig(),
		SummaryDeltaMin:         16,
	}
}

// ErrConfig reports an invalid configuration.
var ErrConfig = errors.New("gd: invalid config")

// Validate checks the relations between parameters.
func (c Config) Validate() error {
	pos := map[string]time.Duration{
		"TickInterval": c.TickInterval, "GapCuriosityThreshold": c.GapCuriosityThreshold,
		"NackRepetitionMin": c.NackRepetitionMin, "ForgettingInterval": c.ForgettingInterval,
		"AckExpectedThreshold": c.AckExpectedThreshold, "SilenceInterval": c.SilenceInterval,
		"AckInterval": c.AckInterval, "NackChunk": c.NackChunk, "HWMLead": c.HWMLead,
	}
	for _, name := range []string{"TickInterval", "GapCuriosityThreshold", "NackRepetitionMin", "ForgettingInterval",
		"AckExpectedThreshold", "SilenceInterval", "AckInterval", "NackChunk", "HWMLead"} {
		if pos[name] <= 0 {
			return fmt.Errorf("%w: %s must be positive, got %v", ErrConfig, name, pos[name])
		}
	}
	switch {
	case c.NackRepetitionMax < c.NackRepetitionMin:
		return fmt.Errorf("%w: NackRepetitionMax %v below NackRepetitionMin %v", ErrConfig, c.NackRepetitionMax, c.NackRepetitionMin)
	case c.ForgettingInterval > c.NackRepetitionMin:
		return fmt.Errorf("%w: ForgettingInterval %v exceeds NackRepetitionMin %v: repeated nacks would be swallowed", ErrConfig, c.ForgettingInterval, c.NackRepetitionMin)
	case c.HWMLead < 4*c.TickInterval:
		return fmt.Errorf("%w: HWMLead %v too short for TickInterval %v", ErrConfig, c.HWMLead, c.TickInterval)
	case c.DedupWindow < 1:
		return fmt.Errorf("%w: DedupWindow must be at least 1", ErrConfig)
	case c.PubendCacheBytes < 0:
		return fmt.Errorf("%w: PubendCacheBytes must not be negative", ErrConfig)
	case c.RelayCacheBytes < 0:
		return fmt.Errorf("%w: RelayCacheBytes must not be negative", ErrConfig)
	case c.TotalOrderHoldBytes < 0:
		return fmt.Errorf("%w: TotalOrderHoldBytes must not be negative", ErrConfig)
	case c.SummaryDeltaMin < 0:
		return fmt.Errorf("%w: SummaryDeltaMin must not be negative", ErrConfig)
	case c.MaxRetainBytes < 0:
		return fmt.Errorf("%w: MaxRetainBytes must not be negative (0 sets no size bound)", ErrConfig)
	case c.CatchupWindowEvents < 0 || c.CatchupWindowBytes < 0:
		return fmt.Errorf("%w: CatchupWindowEvents and CatchupWindowBytes must not be negative (0: the default)", ErrConfig)
	case c.MaxRetain < 0:
		return fmt.Errorf("%w: MaxRetain must not be negative (0 never releases early)", ErrConfig)
	}
	if c.CongestionControl {
		if err := c.Congestion.Validate(); err != nil {
			return fmt.Errorf("%w: %w", ErrConfig, err)
		}
	}
	return nil
}

func ticksOf(d time.Duration) tick.Tick { return tick.Tick(d.Milliseconds()) << tick.SubTickBits }

// The catch-up window's defaults, and its least values for clients of the
// client library (Config.CatchupWindowEvents, CatchupWindowBytes): they
// report what they have taken at least every msg.ConsumedEvery events or
// msg.ConsumedBytes bytes, so less than that may stay unreported when a
// catch-up pauses; a window of at least twice that is then at most half
// full, which always lets the catch-up ask again (hasRoom).
const (
	DefaultCatchupWindowEvents = 10000
	DefaultCatchupWindowBytes  = 8 << 20
	MinCatchupWindowEvents     = 2 * msg.ConsumedEvery
	MinCatchupWindowBytes      = 2 * msg.ConsumedBytes
)

// catchupWindow returns the window in events and bytes, defaults applied.
func (c Config) catchupWindow() (int, int) {
	ev, by := c.CatchupWindowEvents, c.CatchupWindowBytes
	if ev <= 0 {
		ev = DefaultCatchupWindowEvents
	}
	if by <= 0 {
		by = DefaultCatchupWindowBytes
	}
	return ev, int(by)
}
