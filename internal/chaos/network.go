package chaos

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/aerie-mq/aerie/internal/config"
	"github.com/aerie-mq/aerie/internal/faultnet"
	"github.com/aerie-mq/aerie/internal/proc"
)

// link is one connection a broker dials: from dialer to target, through a
// proxy that a fault can cut or stall.
type link struct {
	dialer, target string
	proxy          *faultnet.Proxy
}

func (l *link) String() string { return l.dialer + "→" + l.target }

// network is a prepared run: every broker's own config file (the addresses
// it dials replaced by proxies), the links, and the brokers that host
// publishers and subscribers.
type network struct {
	args  []string // extra flags of every broker
	cfg   *config.Network
	files map[string]string // broker id → config file
	links []*link
	pubs  []config.Broker // brokers with pubends and a client address
	subs  []config.Broker // brokers with a client address and no pubends
	spare map[string]bool
	ids   []string // every broker, sorted
}

// start starts broker id of the network in g.
func (nw *network) start(g *proc.Group, id string) error {
	return g.Start(id, append([]string{"broker", "--config", nw.files[id], "--id", id}, nw.args...)...)
}

// DefaultNetwork is the dev network plus a redundant cell and a replicated
// PHB cell: p1 (P1–P4) feeds b1, which feeds s1 and s2, and the redundant
// cell c = {c1, c2}, which feeds s3; the replicated PHB cell r = {r1, r2,
// r3} (P5, P6, one Raft group) feeds b1 and c too. The subscriber brokers have
// data directories, so that they keep durable subscriptions. Addresses are
// free loopback ports; data lives under dir.
func DefaultNetwork(dir string) (*config.Network, error) {
	var ports proc.Ports
	addrs := make([]string, 27)
	for i := range addrs {
		a, err := ports.Addr()
		if err != nil {
			return nil, fmt.Errorf("chaos: %w", err)
		}
		addrs[i] = a
	}
	n := &config.Network{
		Brokers: []config.Broker{
			{ID: "p1", Cell: "p1", Listen: addrs[0], Clients: addrs[1], Data: filepath.Join(dir, "data", "p1"), Pubends: []string{"P1", "P2", "P3", "P4"}, HTTP: addrs[11]},
			{ID: "b1", Cell: "b1", Listen: addrs[2], HTTP: addrs[12]},
			{ID: "c1", Cell: "c", Listen: addrs[3], HTTP: addrs[13]},
			{ID: "c2", Cell: "c", Listen: addrs[4], HTTP: addrs[14]},
			{ID: "s1", Cell: "s1", Listen: addrs[5], Clients: addrs[6], HTTP: addrs[15], Data: filepath.Join(dir, "data", "s1")},
			{ID: "s2", Cell: "s2", Listen: addrs[7], Clients: addrs[8], HTTP: addrs[16], Data: filepath.Join(dir, "data", "s2")},
			{ID: "s3", Cell: "s3", Listen: addrs[9], Clients: addrs[10], HTTP: addrs[17], Data: filepath.Join(dir, "data", "s3")},
		},
		Links: []config.Link{{Up: "p1", Down: "b1"}, {Up: "b1", Down: "s1"}, {Up: "b1", Down: "s2"}, {Up: "p1", Down: "c"}, {Up: "c", Down: "s3"}, {Up: "r", Down: "b1"}, {Up: "r", Down: "c"}},
	}
	for i, id := range []string{"r1", "r2", "r3"} {
		a := addrs[18+3*i:]
		n.Brokers = append(n.Brokers, config.Broker{ID: id, Cell: "r", Listen: a[0], Clients: a[1], HTTP: a[2],
			Data: filepath.Join(dir, "data", id), Pubends: []string{"P5", "P6"}})
	}
	return n, n.Validate()
}

// prepare checks that n can run here, starts a proxy for every connection a
// broker dials, and writes each broker's config into dir. base resolves
// relative data directories (the original config's directory).
func prepare(ctx context.Context, n *config.Network, base, dir string) (*network, error) {
	nw := &network{cfg: n, files: map[string]string{}, spare: map[string]bool{}}
	if n.Chaos != nil {
		for _, s := range n.Chaos.Spare {
			nw.spare[s] = true
		}
	}
	var problems []error
	for _, b := range n.Brokers {
		nw.ids = append(nw.ids, b.ID)
		switch {
		case len(b.Pubends) > 0 && b.Data == "":
			problems = append(problems, fmt.Errorf("broker %s hosts pubends but has no data directory: its events would not survive a kill", b.ID))
		case len(b.Pubends) > 0 && b.Clients != "":
			nw.pubs = append(nw.pubs, b)
		case len(b.Pubends) == 0 && b.Clients != "":
			nw.subs = append(nw.subs, b)
		}
		for _, a := range []string{b.Listen, b.Clients, b.Gossip, b.HTTP} {
			if a == "" {
				continue
			}
			ln, err := net.Listen("tcp", a)
			if err != nil {
				problems = append(problems, fmt.Errorf("broker %s: address %s cannot be used: %w", b.ID, a, err))
				continue
			}
			ln.Close()
		}
	}
	sort.Strings(nw.ids)
	if len(nw.pubs) == 0 {
		problems = append(problems, errors.New("no broker hosts pubends and takes clients: there is nobody to publish"))
	}
	if len(nw.subs) == 0 {
		problems = append(problems, errors.New("a topology without subscribers: no broker without pubends takes clients"))
	}
	if len(problems) > 0 {
		return nil, errors.Join(problems...)
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("chaos: %w", err)
	}
	for _, b := range n.Brokers {
		cfg := *n
		if n.Chaos != nil {
			// aerie chaos injects the faults itself: the brokers' own
			// monkeys stay off (a crash they caused would count as one
			// nobody caused).
			cfg.Chaos = &config.Chaos{Spare: n.Chaos.Spare}
		}
		cfg.Brokers = slices.Clone(n.Brokers)
		for i := range cfg.Brokers {
			o := &cfg.Brokers[i]
			if o.Data != "" && !filepath.IsAbs(o.Data) {
				o.Data = filepath.Join(base, o.Data)
			}
			if !slices.Contains(n.Dials(b.ID), o.ID) {
				continue
			}
			p, err := faultnet.Listen(ctx, o.Listen)
			if err != nil {
				return nil, fmt.Errorf("chaos: proxy %s→%s: %w", b.ID, o.ID, err)
			}
			nw.links = append(nw.links, &link{dialer: b.ID, target: o.ID, proxy: p})
			o.Listen = p.Addr()
		}
		data, err := cfg.Marshal()
		if err != nil {
			return nil, fmt.Errorf("chaos: config for %s: %w", b.ID, err)
		}
		f := filepath.Join(dir, "network-"+b.ID+".toml")
		if err := os.WriteFile(f, data, 0o644); err != nil {
			return nil, fmt.Errorf("chaos: %w", err)
		}
		nw.files[b.ID] = f
	}
	return nw, nil
}

// pubAddrs: the pubend one publisher publishes to, and the client
// addresses of every broker hosting it (the members of a replicated PHB
// cell), comma-separated as client.Dial takes them.
type pubAddrs struct {
	pubend, addrs string
}

// publishTo lists one publisher per pubend, in pubend order.
func (nw *network) publishTo() []pubAddrs {
	by := map[string][]string{}
	for _, b := range nw.pubs {
		for _, p := range b.Pubends {
			by[p] = append(by[p], b.Clients)
		}
	}
	out := make([]pubAddrs, 0, len(by))
	for p, as := range by {
		out = append(out, pubAddrs{pubend: p, addrs: strings.Join(as, ",")})
	}
	slices.SortFunc(out, func(a, b pubAddrs) int { return strings.Compare(a.pubend, b.pubend) })
	return out
}

// dumpStatus writes every broker's /status (those with an http address)
// into dir/status-<id>.json, for the diagnosis of a run that did not
// converge, and returns the files written.
func (nw *network) dumpStatus(dir string) []string {
	hc := &http.Client{Timeout: 5 * time.Second}
	var files []string
	for _, b := range nw.cfg.Brokers {
		if b.HTTP == "" {
			continue
		}
		resp, err := hc.Get("http://" + b.HTTP + "/status")
		if err != nil {
			continue
		}
		body, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		f := filepath.Join(dir, "status-"+b.ID+".json")
		if err == nil && os.WriteFile(f, body, 0o644) == nil {
			files = append(files, f)
		}
	}
	return files
}
