package gd

// Mutation switches off one protocol rule. It exists only so that tests can
// show the oracle catches each broken rule; production code never sets it.
// Every switch is here, one line each: what it breaks, then the test that
// catches it (sim tests are in internal/sim). Values are not persisted
// anywhere (no flag, no test data), so the list may be reordered.
type Mutation uint

const (
	// MutDropNackForward: an IB does not forward nacks upstream. Caught by sim TestOracleBites (I11).
	MutDropNackForward Mutation = 1 << iota
	// MutAckBeforeDeliver: a subend acks ticks it has not delivered, across gaps. Caught by sim TestOracleBites (I5, I11).
	MutAckBeforeDeliver
	// MutNoForgetting: istream curiosity is never forgotten. Caught by sim TestOracleBites (I11).
	MutNoForgetting
	// MutReuseTicks: after a restart the pubend ignores its high-water mark. Caught by sim TestOracleBites, TestOracleBitesReplicated (I9, I7).
	MutReuseTicks
	// MutDeliverPastGaps: deliver up to the highest known tick, not the DH. Caught by sim TestOracleBites, TestScaleOracleBites (I5).
	MutDeliverPastGaps
	// MutIgnoreSelector: deliver on the topic pattern alone. Caught by sim TestOracleBites, TestScaleOracleBites (I1).
	MutIgnoreSelector
	// MutSkipFetch: nacks for payloads evicted from memory are answered without reading the log. Caught by sim TestOracleBites.
	MutSkipFetch
	// MutNoRateDecrease: a pubend ignores UCAs (Gryphon CC eq. 2, 3 off). Caught by sim TestCCE1MutationNoRateDecrease, TestCCCollapseIBMutationNoRateDecrease.
	MutNoRateDecrease
	// MutAckNoAck: a pubend acks publishes that asked for no ack. Caught by sim TestOracleBites (I9).
	MutAckNoAck
	// MutReleaseEarly: early release ignores T_d, discarding unacked ticks older than maxRetain. Caught by sim TestOracleBitesEarlyRelease.
	MutReleaseEarly
	// MutGapNotFinal: a Replay is answered with a gap over ticks not released (L). Caught by sim TestOracleBitesDurable (I6).
	MutGapNotFinal
	// MutNoHold: live deliveries of a subscription in catch-up overtake its replay. Caught by sim TestOracleBitesDurable (I6, I2, I3).
	MutNoHold
	// MutCatchupUnasked: a catch-up answer is applied to catch-ups that joined after the request. Caught by sim TestOracleBitesCatchupGroup.
	MutCatchupUnasked
	// MutAskSameMember: an unanswered request is repeated to the same cell member forever (askUp off). Caught by sim TestOracleBitesAskSameMember (I11).
	MutAskSameMember
	// MutTotalUnmerged: total-order events are handed over per pubend, unmerged. Caught by sim TestOracleBites (I4).
	MutTotalUnmerged
	// MutExactNackAnswers: not a fault, the older rule (no silence past the range asked) some mutation seeds need; used by sim TestOracleBitesAskSameMember.
	MutExactNackAnswers
	// MutReleaseOneMore: past the size bound the pubend releases one event more. Caught by sim TestOracleBitesReleaseOneMore, gd TestRetainedBytesOver.
	MutReleaseOneMore
	// MutGoneEarly: a downstream is judged gone after an eighth of its bound, so a slow one loses unacked ticks. Caught by sim TestOracleBites (I10).
	MutGoneEarly
	// MutPastWindow: catch-ups ignore their subscriber's window. Caught by gd TestPacedWindowBites.
	MutPastWindow
	// MutVouchAll: every final prefix is vouched and every ack clean, as if going on without a gone downstream were known everywhere. Caught by sim TestOracleBites (I5).
	MutVouchAll
	// MutHoldAboveDelivery: no evictAboveDelivery, an SHB behind a gap holds rate × recovery time. Caught by sim TestOracleBites (I14); gd BenchmarkRecoveryHold.
	MutHoldAboveDelivery
)

// Mutate switches off the given rules (tests only).
func (e *Engine) Mutate(m Mutation) { e.mut = m }
