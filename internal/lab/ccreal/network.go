package ccreal

import (
	"fmt"
	"os"
	"path/filepath"
	"syscall"

	"github.com/aerie-mq/aerie/internal/config"
	"github.com/aerie-mq/aerie/internal/proc"
)

// brokers of Gryphon CC Fig. 1 at the smallest scale that has a
// bottleneck to one SHB and not to the other.
var brokers = []string{"p1", "b1", "s1", "s2"}

// addrs are one broker's addresses.
type addrs struct{ listen, clients, http string }

// network is the run's config and addresses.
type network struct {
	cfg   *config.Network
	addrs map[string]addrs
}

func newNetwork(dir string, o Options) (*network, error) {
	var ports proc.Ports
	n := &network{cfg: &config.Network{}, addrs: map[string]addrs{}}
	for _, id := range brokers {
		var a addrs
		var err error
		if a.listen, err = ports.Addr(); err != nil {
			return nil, err
		}
		if a.http, err = ports.Addr(); err != nil {
			return nil, err
		}
		b := config.Broker{ID: id, Listen: a.listen}
		if id != "b1" {
			if a.clients, err = ports.Addr(); err != nil {
				return nil, err
			}
			b.Clients = a.clients
		}
		if id == "p1" {
			b.Pubends, b.Data = []string{"P1"}, filepath.Join(dir, "data", "p1")
		}
		n.addrs[id] = a
		n.cfg.Brokers = append(n.cfg.Brokers, b)
	}
	n.cfg.Links = []config.Link{{Up: "p1", Down: "b1"}, {Up: "b1", Down: "s1"}, {Up: "b1", Down: "s2"}}
	if o.Cap > 0 {
		n.cfg.Bandwidth = map[config.Link]int64{{Up: "b1", Down: "s2"}: o.Cap}
	}
	cc := o.CongestionControl
	n.cfg.CongestionControl = &cc
	return n, nil
}

// write writes the config with b1 listening at b1At (the proxy, for s2's
// copy; b1's own address otherwise).
func (n *network) write(dir, name, b1At string) (string, error) {
	c := *n.cfg
	c.Brokers = append([]config.Broker(nil), n.cfg.Brokers...)
	for i := range c.Brokers {
		if c.Brokers[i].ID == "b1" {
			c.Brokers[i].Listen = b1At
		}
	}
	b, err := c.Marshal()
	if err != nil {
		return "", fmt.Errorf("ccreal: config: %w", err)
	}
	path := filepath.Join(dir, name)
	if err := os.WriteFile(path, b, 0o644); err != nil {
		return "", fmt.Errorf("ccreal: config: %w", err)
	}
	return path, nil
}

// start starts every broker, s2 with the config in which b1 is the proxy.
func (n *network) start(g *proc.Group, dir, proxyAddr string) error {
	main, err := n.write(dir, "network.toml", n.addrs["b1"].listen)
	if err != nil {
		return err
	}
	viaProxy, err := n.write(dir, "network-s2.toml", proxyAddr)
	if err != nil {
		return err
	}
	for _, id := range brokers {
		cfg := main
		if id == "s2" {
			cfg = viaProxy
		}
		if err := g.Start(id, "broker", "--config", cfg, "--id", id, "--http", n.addrs[id].http); err != nil {
			return fmt.Errorf("ccreal: %w", err)
		}
	}
	return nil
}

// reload gives b1 → s2 the bandwidth bw (0: none) in b1's config and
// tells b1 to reload it (SIGHUP, `aerie broker`).
func (n *network) reload(g *proc.Group, dir string, bw int64) error {
	n.cfg.Bandwidth = nil
	if bw > 0 {
		n.cfg.Bandwidth = map[config.Link]int64{{Up: "b1", Down: "s2"}: bw}
	}
	if _, err := n.write(dir, "network.toml", n.addrs["b1"].listen); err != nil {
		return err
	}
	if !g.Signal("b1", syscall.SIGHUP) {
		return fmt.Errorf("ccreal: b1 is not running")
	}
	return nil
}
