// Package mlist drives the pure view layer of internal/member with
// hashicorp/memberlist (SWIM with Lifeguard) as the failure detector. It is
// the edge: sockets, goroutines and clocks live here, the decisions
// (views, elder, crash vs leave) live in internal/member.
package mlist

import (
	"errors"
	"io"
	"log"
	"time"

	"github.com/hashicorp/memberlist"

	"github.com/aerie-mq/aerie/internal/member"
)

// Sentinel errors.
var (
	// ErrConfig: the configuration cannot work.
	ErrConfig = errors.New("mlist: bad config")
	// ErrStopped: the node has been shut down.
	ErrStopped = errors.New("mlist: stopped")
)

// Config configures one membership node.
type Config struct {
	// ID is this broker incarnation: the broker id and a boot nonce that
	// grows across restarts. The memberlist node name is ID.Name().
	ID member.ID
	// Meta is the static metadata published through memberlist's NodeMeta
	// (encoded ≤ 512 bytes).
	Meta member.Meta
	// BindAddr and BindPort: where memberlist listens (UDP and TCP on the
	// same port). Port 0 picks a free port; Addr reports it.
	BindAddr string
	BindPort int
	// Seeds are the memberlist addresses (host:port) of seed brokers from
	// the network config. The node retries them with backoff until it has
	// joined someone, then keeps re-joining seeds that are not members so
	// that pools formed apart during a concurrent start merge.
	Seeds []string
	// View configures the view layer; Self is filled in from ID and Meta.
	View member.Config
	// Timing is the memberlist configuration; nil means LoopbackTiming().
	// Name, bind address, delegates and logging are set by New.
	Timing *memberlist.Config
	// JoinBackoffMax (default 1 s) caps the join retry interval; the first
	// retry is after 50 ms. RejoinInterval (default 2 s) is how often a
	// joined node re-joins seeds that are not members.
	JoinBackoffMax time.Duration
	RejoinInterval time.Duration
	// OnView is called from the node's goroutine for every installed view,
	// in id order. It must not block for long.
	OnView func(member.Change)
	// Log receives memberlist's log; nil discards it.
	Log io.Writer
}

// LoopbackTiming is memberlist's LAN profile tuned so that a crashed broker
// is declared dead well under a second when members share a host or a
// fast LAN (loopback RTT ≈ 50 µs). Each change says why.
//
// Expected detection of a crash: the dead member is probed by someone
// within about one ProbeInterval (every member probes one member per
// interval, so each member is probed about once per interval), the direct
// probe times out after ProbeTimeout, indirect probes fail within the rest
// of the interval, then the suspicion timeout runs (SuspicionMult ·
// max(1, log10 n) · ProbeInterval, shortened by Lifeguard as other members
// confirm), and the dead message spreads by gossip in a few
// GossipIntervals: 100 + 50 + 50 + 200…400 + ~50 ms ≈ 0.45–0.65 s for a
// small cluster.
func LoopbackTiming() *memberlist.Config {
	c := memberlist.DefaultLANConfig()
	// 1 s in LAN: probe ten times as often. Detection time scales with it;
	// the cost is one small UDP ping per member per interval.
	c.ProbeInterval = 100 * time.Millisecond
	// 500 ms in LAN: a loopback or LAN ack comes back in well under 1 ms;
	// 50 ms leaves room for a busy host's scheduling delays and GC pauses.
	// Lifeguard's awareness (AwarenessMaxMultiplier, default 8) stretches
	// it when this member itself is slow, so an overloaded member does not
	// accuse healthy ones.
	c.ProbeTimeout = 50 * time.Millisecond
	// 4 in LAN: with a 10× shorter interval, 2 still gives a suspect member
	// 200 ms (n ≤ 10) to refute a suspicion: many probe rounds.
	c.SuspicionMult = 2
	// 6 in LAN: the Lifeguard upper bound when no other member confirms the
	// suspicion. 2 keeps the worst case at 400 ms for small clusters.
	c.SuspicionMaxTimeoutMult = 2
	// 200 ms in LAN: gossip (suspect, dead, alive messages) every 50 ms so
	// that a verdict reaches everyone in a few rounds.
	c.GossipInterval = 50 * time.Millisecond
	// 3 in LAN: one more gossip target per round; cheap on a LAN.
	c.GossipNodes = 4
	// 30 s in LAN: full state exchange (anti-entropy) every 5 s; memberlist
	// scales it up past 32 members, so large clusters do not pay more.
	c.PushPullInterval = 5 * time.Second
	// 10 s in LAN: a TCP connect or stream to a live member on a LAN takes
	// milliseconds; 1 s bounds how long a send to a dead member blocks.
	c.TCPTimeout = time.Second
	// 30 s in LAN: stop gossiping to a dead member after 2 s; a restarted
	// broker comes back under a new name (new boot nonce) anyway.
	c.GossipToTheDeadTime = 2 * time.Second
	// true in LAN: compressing push/pull state and large messages only
	// costs CPU on loopback or a fast LAN.
	c.EnableCompression = false
	return c
}

// ScaleTiming is the LAN profile adjusted for many members sharing a few
// busy cores (Scale on one host). There every instance's probes and gossip
// compete for the CPU with each other and with whatever else runs, and
// LoopbackTiming's 50 ms probe timeout turns scheduling delays into false
// suspicions that churn the views. It keeps LAN's 1 s probe interval and
// suspicion multiplier (detection ≈ 2–5 s), doubles the probe timeout to
// 1 s, and turns compression off (on loopback it only costs CPU).
func ScaleTiming() *memberlist.Config {
	c := memberlist.DefaultLANConfig()
	c.ProbeTimeout = time.Second
	c.EnableCompression = false
	c.PushPullInterval = 10 * time.Second
	c.TCPTimeout = 2 * time.Second
	return c
}

func (c Config) withDefaults() Config {
	if c.JoinBackoffMax == 0 {
		c.JoinBackoffMax = time.Second
	}
	if c.RejoinInterval == 0 {
		c.RejoinInterval = 2 * time.Second
	}
	if c.BindAddr == "" {
		c.BindAddr = "127.0.0.1"
	}
	if c.Timing == nil {
		c.Timing = LoopbackTiming()
	}
	if c.View.ViewBundling == 0 {
		// Gossip spreads a concurrent start's joins over a few hundred
		// ms; bundling them for 100 ms cuts the views (each sent to every
		// member over TCP) by an order of magnitude for < 150 ms latency.
		c.View.ViewBundling = 100 * time.Millisecond
	}
	c.View.Self = member.Member{ID: c.ID, Meta: c.Meta}
	return c
}

func (c Config) memberlist(d *delegate) *memberlist.Config {
	mc := *c.Timing
	mc.Name = c.ID.Name()
	mc.BindAddr, mc.BindPort = c.BindAddr, c.BindPort
	mc.AdvertiseAddr, mc.AdvertisePort = "", 0
	mc.Delegate, mc.Events = d, d
	out := c.Log
	if out == nil {
		out = io.Discard
	}
	mc.LogOutput, mc.Logger = nil, log.New(out, c.ID.Name()+" ", log.Lmicroseconds)
	return &mc
}
