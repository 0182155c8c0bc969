package broker

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
