package gd

// Mutation switches off one protocol rule. It exists only so that tests can
// show the oracle catches each broken rule; production code never sets it.
type Mutation uint

const (
	// MutDropNackForward: an IB does not forward nacks upstream.
	MutDropNackForward Mutation = 1 << iota
	// MutAckBeforeDeliver: a subend acks every tick it has heard of, even
	// across gaps it has not delivered.
	MutAckBeforeDeliver
	// MutNoForgetting: istream curiosity is never forgotten.
	MutNoForgetting
	// MutReuseTicks: after a restart the pubend ignores its high-water mark.
	MutReuseTicks
	// MutDeliverPastGaps: deliver up to the highest known tick, not the DH.
	MutDeliverPastGaps
	// MutIgnoreSelector: deliver on the topic pattern alone.
	MutIgnoreSelector
	// MutSkipFetch: the pubend answers nacks for payloads it evicted from
	// memory without reading them back from its log.
	MutSkipFetch
	// MutNoRateDecrease: a pubend ignores congestion alerts (UCAs), so its
	// rate never goes down (Gryphon CC eq. 2, 3 switched off).
	MutNoRateDecrease
	// MutAckNoAck: a pubend acks publishes that asked for no ack.
	MutAckNoAck
)

// Mutate switches off the given rules (tests only).
func (e *Engine) Mutate(m Mutation) { e.mut = m }
