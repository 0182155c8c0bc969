package broker

import "time"

// KillMembership stops this broker's membership abruptly, without a leave,
// as if its memberlist had stopped answering; the broker itself runs on.
// For tests that stall a broker.
func (n *Node) KillMembership() {
	n.mu.Lock()
	ml := n.ml
	n.mu.Unlock()
	if ml != nil {
		ml.Kill()
	}
}

// Incarnation is the boot nonce this node sends in its handshakes.
func (n *Node) Incarnation() uint64 { return n.inc }

// AsVersion returns o for a broker that announces protocol version v.
func AsVersion(o Options, v uint16) Options {
	o.protocolVersion = v
	return o
}

// RunsSplit counts the KnowledgeRuns this broker sent as their pieces to
// brokers of an older protocol version.
func (n *Node) RunsSplit() uint64 { return n.runsSplit.Load() }

// PublishRuns counts the PublishRun frames this broker took from clients.
func (n *Node) PublishRuns() uint64 { return n.publishRuns.Load() }

// WithLiveHeap returns o for a broker that samples live instead of its
// process's live heap (memory_budget), every `every`.
func WithLiveHeap(o Options, live func() int64, every time.Duration) Options {
	o.liveHeap, o.MemoryEvery = live, every
	return o
}
