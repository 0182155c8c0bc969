package main

import (
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"time"

	"github.com/aerie-mq/aerie/internal/broker"
	"github.com/aerie-mq/aerie/internal/config"
	"github.com/aerie-mq/aerie/internal/congestion"
	"github.com/aerie-mq/aerie/internal/gd"
	"github.com/aerie-mq/aerie/internal/msg"
	"github.com/aerie-mq/aerie/internal/shell"
)

// brokerOptions turns one broker of a network config into runtime options.
// Relative data directories are resolved against base (the config file's
// directory).
func brokerOptions(n *config.Network, id, base string, logger *slog.Logger) (broker.Options, error) {
	b, ok := n.Broker(id)
	if !ok {
		return broker.Options{}, fmt.Errorf("broker %q is not in the network config", id)
	}
	routes := n.Routes(id)
	hostRetain(n, routes)
	cells := n.Cells()
	// This broker dials every member of its upstream cells (a link bundle)
	// and the members of its own cell whose ids sort after its own.
	ups := map[msg.NodeID]string{}
	for _, peer := range n.Dials(id) {
		pb, ok := n.Broker(peer)
		if !ok {
			return broker.Options{}, fmt.Errorf("broker %q: neighbour %q not found", id, peer)
		}
		ups[msg.NodeID(peer)] = pb.Listen
	}
	data := b.Data
	if data != "" && !filepath.IsAbs(data) {
		data = filepath.Join(base, data)
	}
	var monkey *broker.Monkey
	if c := n.Chaos; c != nil && c.Interval > 0 && !slices.Contains(c.Spare, id) {
		// Crash stays nil here: only a broker that has its process to
		// itself may end it (runBroker sets it).
		monkey = &broker.Monkey{Interval: c.Interval, Faults: c.Faults}
	}
	cfg := gd.DefaultConfig()
	cfg.MaxRetain = b.Retain() // the PHB's early-release bound (Gryphon DS, DSN 2003 §3)
	cfg.MaxRetainBytes = b.MaxRetainBytes
	// The durable subscriptions' catch-up window (0: the defaults).
	cfg.CatchupWindowEvents, cfg.CatchupWindowBytes = b.CatchupWindow, b.CatchupWindowBytes
	if b.RelayCacheBytes > 0 {
		// What it keeps of the pubends it does not host (0: the default).
		cfg.RelayCacheBytes = b.RelayCacheBytes
	}
	// Gryphon CC in every broker alike (config.Network.CongestionOn).
	cfg.CongestionControl = n.CongestionOn()
	cfg.Congestion = congestion.BrokerConfig()
	opts := broker.Options{
		Monkey: monkey,
		ID:     msg.NodeID(id), Routes: routes, Cells: cells, GD: cfg, Listen: b.Listen, Clients: b.Clients, MQTT: b.MQTT,
		Upstreams: ups, DataDir: data, Logger: logger, DiskReserve: b.DiskReserve,
		// Over (near) it the broker sheds its caches (shell.Memory).
		MemoryBudget: n.MemoryBudget,
		// Membership only where the config gives a gossip address.
		Gossip: b.Gossip, Seeds: seedsFor(n, b),
	}
	if rs := n.Replicas(id); rs != nil {
		// A replicated PHB cell: one Raft group for its pubends.
		opts.Raft = &broker.RaftOptions{Cell: msg.NodeID(b.CellID()), Clients: broker.RaftClients(b.RaftClients)}
		if d := b.RaftElection; d != nil {
			// Ten ticks to an election, a heartbeat every tick (the
			// defaults' proportions: 10 × 100 ms).
			opts.Raft.TickInterval, opts.Raft.ElectionTicks = *d/10, 10
		}
		chunk, err := snapshotChunkBytes()
		if err != nil {
			return broker.Options{}, err
		}
		opts.Raft.Compaction.ChunkBytes = chunk
		for _, m := range rs {
			opts.Raft.Members = append(opts.Raft.Members, msg.NodeID(m))
		}
		opts.Raft.Slots = n.RaftSlots(id)
	}
	opts.GroupHomes = groupHomes(n)
	opts.Bandwidth = downBandwidth(n, id)
	if err := securityOptions(n, b, base, logger, &opts); err != nil {
		return broker.Options{}, err
	}
	return opts, nil
}

// groupHomes lists the brokers that may be a consumer group's home
// (docs/CONCEPTS.md "Consumer groups"): those with a client address and a
// data directory, outside replicated PHB cells, in the config's order.
func groupHomes(n *config.Network) []shell.GroupHome {
	var out []shell.GroupHome
	for _, b := range n.Brokers {
		if b.Clients != "" && b.Data != "" && n.Replicas(b.ID) == nil {
			out = append(out, shell.GroupHome{ID: msg.NodeID(b.ID), Clients: b.Clients, MQTT: b.MQTT})
		}
	}
	return out
}

// hostRetain gives every route the max_retain of its pubend's host: every
// broker of the tree judges its downstreams gone by it (gd.Route.Retain).
func hostRetain(n *config.Network, routes []gd.Route) {
	retain := map[msg.PubendID]time.Duration{}
	for _, b := range n.Brokers {
		for _, p := range b.Pubends {
			if _, ok := retain[msg.PubendID(p)]; !ok {
				retain[msg.PubendID(p)] = b.Retain()
			}
		}
	}
	for i := range routes {
		if d, ok := retain[routes[i].Pubend]; ok {
			routes[i].Retain, routes[i].RetainSet = d, true
		}
	}
}

// seedsFor is the seed list of broker b: none without membership.
func seedsFor(n *config.Network, b config.Broker) []string {
	if b.Gossip == "" {
		return nil
	}
	return n.SeedAddrs()
}

// snapshotChunkEnv sets the size of the chunks a replicated PHB member
// sends a large snapshot in (raftphb/node.Compaction.ChunkBytes; default
// 1 MiB): a test knob, so that tests with small stores exercise chunked
// transfers across processes.
const snapshotChunkEnv = "AERIE_RAFT_SNAPSHOT_CHUNK"

// snapshotChunkBytes reads snapshotChunkEnv (0: the default).
func snapshotChunkBytes() (int, error) {
	v := os.Getenv(snapshotChunkEnv)
	if v == "" {
		return 0, nil
	}
	n, err := strconv.Atoi(v)
	if err != nil || n <= 0 {
		return 0, fmt.Errorf("%s=%q: want a positive number of bytes", snapshotChunkEnv, v)
	}
	return n, nil
}
