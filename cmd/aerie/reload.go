package main

import (
	"context"
	"log/slog"
	"os"

	"github.com/aerie-mq/aerie/internal/broker"
	"github.com/aerie-mq/aerie/internal/config"
	"github.com/aerie-mq/aerie/internal/msg"
)

// downBandwidth is broker id's downstream links' bandwidths, by downstream
// broker (docs/CONFIG.md); nil when none has one.
func downBandwidth(n *config.Network, id string) map[msg.NodeID]int64 {
	var out map[msg.NodeID]int64
	for down, bw := range n.DownBandwidth(id) {
		if out == nil {
			out = map[msg.NodeID]int64{}
		}
		out[msg.NodeID(down)] = bw
	}
	return out
}

// reloadRaftMembers hands a replicated PHB member the reloaded config's
// members of its cell: members removed take effect at once
// (broker.Node.SetRaftMembers), members added at the next restart.
func reloadRaftMembers(ctx context.Context, n *config.Network, id string, node *broker.Node, log *slog.Logger) {
	rs := n.Replicas(id)
	if rs == nil {
		return
	}
	ms := make([]msg.NodeID, len(rs))
	for i, m := range rs {
		ms[i] = msg.NodeID(m)
	}
	did, err := node.SetRaftMembers(ctx, ms, n.RaftSlots(id))
	switch {
	case err != nil:
		log.Warn("replicated PHB cell members unchanged", "err", err)
	case did != "":
		log.Info("replicated PHB cell members reloaded: " + did)
	}
}

// reloadBandwidth applies the links' `bandwidth` of the network config at
// path to node each time hup fires, until ctx ends: an operator whose link
// got slower or faster edits the config and sends SIGHUP, without
// restarting the broker and so without a recovery (Gryphon CC §5 E2 changes
// a bottleneck's bandwidth during a run). Bandwidths change, and a
// replicated PHB member learns the members removed from its cell
// (reloadRaftMembers); a config that does not load leaves everything as it
// was, and congestion control stays as it was at start (ccOn).
func reloadBandwidth(ctx context.Context, hup <-chan os.Signal, path, id string, ccOn bool, node *broker.Node, log *slog.Logger) {
	for {
		select {
		case <-ctx.Done():
			return
		case <-hup:
		}
		n, err := config.Load(path)
		if err != nil {
			log.Warn("config reload failed; link bandwidths unchanged", "config", path, "err", err)
			continue
		}
		bw := downBandwidth(n, id)
		node.SetBandwidth(bw)
		attrs := []any{"config", path}
		for down, b := range bw {
			attrs = append(attrs, string(down), config.FormatBandwidth(b))
		}
		log.Info("link bandwidths reloaded", attrs...)
		if n.CongestionOn() != ccOn {
			log.Warn("congestion_control takes effect at start only; restart the brokers to change it", "running", ccOn)
		}
		reloadRaftMembers(ctx, n, id, node, log)
	}
}
