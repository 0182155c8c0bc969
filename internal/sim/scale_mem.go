package sim

// The memory a scale run needs, from measured runs (docs/SCALE.md: the live
// heap of `aerie sim --topology scale` at several sizes, fitted to base +
// per broker + per subscription, the per-broker and per-subscription terms
// growing with the pubends each broker and each subscription keep state
// for), with a quarter added for the garbage collector: `aerie sim` sets
// the process's memory limit to the bound a run is admitted against
// (runtime/debug.SetMemoryLimit), so the heap is collected before it grows
// to twice the live data as GOGC alone would let it. An estimate, rounded
// up: a run refused here would have been stopped by the OOM killer or
// swapped, not finished.
//
// Per subscription, about half of the live heap is the filter edges on
// its path (every IB and PHB above its SHB indexes its clause: Gryphon GD
// §4's filters, match.Edge), a fifth the selector parsed again at every
// hop, the rest the SHB's subscription, the client session, and the
// simulator's and oracle's sessions.
const (
	scaleBaseBytes         = 64 << 20
	scaleBrokerBytes       = 384 << 10 // engine, shell, disk, links, per broker
	scaleBrokerPubendBytes = 16 << 10  // streams of one pubend at one broker
	scaleSubBytes          = 8 << 10   // subscription at the SHB, its clause in every edge on the path, the oracle's session
	scaleSubPubendBytes    = 160       // per subscription and pubend: start tokens, pending SubReqs
)

func perBrokerBytes(s ScaleShape) int64 {
	return scaleBrokerBytes + int64(s.Pubends)*scaleBrokerPubendBytes
}

func perSubBytes(s ScaleShape) int64 {
	return scaleSubBytes + int64(s.Pubends)*scaleSubPubendBytes
}

// EstimateScaleBytes is the memory a scale run of shape s (defaults filled)
// with subs subscriptions is expected to need at its peak.
func EstimateScaleBytes(s ScaleShape, subs int) int64 {
	return scaleBaseBytes + int64(s.Brokers)*perBrokerBytes(s) + int64(subs)*perSubBytes(s)
}
