package main

import (
	"fmt"
	"log/slog"
	"path/filepath"

	"github.com/aerie-mq/aerie/internal/broker"
	"github.com/aerie-mq/aerie/internal/config"
	"github.com/aerie-mq/aerie/internal/gd"
	"github.com/aerie-mq/aerie/internal/msg"
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
	ups := map[msg.NodeID]string{}
	for _, r := range routes {
		if r.Up == "" {
			continue
		}
		ub, ok := n.Broker(string(r.Up))
		if !ok {
			return broker.Options{}, fmt.Errorf("broker %q: upstream %q not found", id, r.Up)
		}
		ups[r.Up] = ub.Listen
	}
	data := b.Data
	if data != "" && !filepath.IsAbs(data) {
		data = filepath.Join(base, data)
	}
	return broker.Options{
		ID: msg.NodeID(id), Routes: routes, GD: gd.DefaultConfig(), Listen: b.Listen, Clients: b.Clients,
		Upstreams: ups, DataDir: data, Logger: logger,
	}, nil
}
