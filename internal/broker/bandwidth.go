package broker

import (
	"maps"
	"sync"

	"github.com/aerie-mq/aerie/internal/msg"
	"github.com/aerie-mq/aerie/internal/transport"
)

// bandwidths are the caps of this broker's downstream links (a link's
// `bandwidth` in the network config, docs/CONFIG.md) and the live
// connections they apply to, so that an operator can change a cap while
// the broker runs (SetBandwidth; `aerie broker` on SIGHUP). Gryphon CC §5
// E2 changes a bottleneck's bandwidth during a run.
type bandwidths struct {
	mu    sync.Mutex
	caps  map[msg.NodeID]int64
	conns map[*transport.Conn]msg.NodeID
}

func newBandwidths(caps map[msg.NodeID]int64) *bandwidths {
	return &bandwidths{caps: maps.Clone(caps), conns: map[*transport.Conn]msg.NodeID{}}
}

// attach caps c, a connection to downstream peer, and keeps it for later
// changes until detach.
func (b *bandwidths) attach(peer msg.NodeID, c *transport.Conn) {
	b.mu.Lock()
	defer b.mu.Unlock()
	c.SetBandwidth(b.caps[peer])
	b.conns[c] = peer
}

func (b *bandwidths) detach(c *transport.Conn) {
	b.mu.Lock()
	defer b.mu.Unlock()
	delete(b.conns, c)
}

// set replaces every cap (a link absent from caps has none) and applies
// them to the live connections.
func (b *bandwidths) set(caps map[msg.NodeID]int64) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.caps = maps.Clone(caps)
	for c, peer := range b.conns {
		c.SetBandwidth(b.caps[peer])
	}
}

// SetBandwidth replaces the caps of this broker's downstream links, in
// bytes per second by downstream broker (absent: no cap), on the live
// connections and on those made later. Whether congestion control runs
// is decided at start and does not change.
func (n *Node) SetBandwidth(caps map[msg.NodeID]int64) { n.bw.set(caps) }
