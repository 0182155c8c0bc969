package ops

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"sync"
	"time"

	"github.com/aerie-mq/aerie/internal/broker"
)

// Topology is the network a dashboard draws: every broker, with the
// address of its ops endpoint when it has one, and the connections the
// config asks for.
type Topology struct {
	Brokers []TopoBroker `json:"brokers"`
	Links   []TopoLink   `json:"links"`
}

// TopoBroker is one broker of the network.
type TopoBroker struct {
	ID   string `json:"id"`
	Cell string `json:"cell"`
	// HTTP is its ops endpoint, as a base URL ("http://host:port"); ""
	// when it has none.
	HTTP string `json:"http,omitempty"`
	// Pubends are the pubends it hosts.
	Pubends []string `json:"pubends,omitempty"`
}

// TopoLink is a connection between two brokers: Up is the one dialled
// (the upstream broker of a link, or the cell peer with the larger id),
// Cell tells a link inside a redundant cell from one between cells.
type TopoLink struct {
	Up   string `json:"up"`
	Down string `json:"down"`
	Cell bool   `json:"cell,omitempty"`
}

// neighbours are the brokers linked to one of ids that are not in ids.
func (t Topology) neighbours(ids []string) []TopoBroker {
	var want []string
	for _, l := range t.Links {
		switch {
		case slices.Contains(ids, l.Up) && !slices.Contains(ids, l.Down):
			want = append(want, l.Down)
		case slices.Contains(ids, l.Down) && !slices.Contains(ids, l.Up):
			want = append(want, l.Up)
		}
	}
	var out []TopoBroker
	for _, b := range t.Brokers {
		if slices.Contains(want, b.ID) {
			out = append(out, b)
		}
	}
	return out
}

// Snapshot is the state of some brokers at one moment.
type Snapshot struct {
	TimeMs  int64           `json:"time_ms"` // Unix ms when it was taken
	Brokers []broker.Status `json:"brokers"`
}

// Cluster is what /cluster returns: the brokers of this process, the
// neighbours' own views (fetched from their /status), and the topology.
type Cluster struct {
	Snapshot
	Local    []string          `json:"local"`            // ids of this process's brokers
	Errors   map[string]string `json:"errors,omitempty"` // broker id → why its view is missing
	Topology Topology          `json:"topology"`
}

// fetchTimeout bounds the wait for a neighbour's view: a slow neighbour
// shows as unreachable rather than stalling the dashboard.
const fetchTimeout = time.Second

func (s *Server) cluster(ctx context.Context) Cluster {
	c := Cluster{Topology: s.opts.Topology, Errors: map[string]string{}}
	st, err := statuses(ctx, s.opts.Nodes)
	c.TimeMs, c.Brokers = time.Now().UnixMilli(), st
	for _, n := range s.opts.Nodes {
		c.Local = append(c.Local, string(n.ID()))
	}
	if err != nil {
		c.Errors["this process"] = err.Error()
	}
	if len(c.Topology.Brokers) == 0 { // no topology: this process's brokers
		for _, n := range st {
			c.Topology.Brokers = append(c.Topology.Brokers, TopoBroker{ID: n.ID, Cell: n.ID})
		}
	}
	var mu sync.Mutex
	var wg sync.WaitGroup
	for _, nb := range s.opts.Topology.neighbours(c.Local) {
		if nb.HTTP == "" {
			c.Errors[nb.ID] = "no http address in the config"
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			got, err := s.fetch(ctx, nb.HTTP+"/status")
			mu.Lock()
			defer mu.Unlock()
			if err != nil {
				c.Errors[nb.ID] = err.Error()
				return
			}
			c.Brokers = append(c.Brokers, got...)
		}()
	}
	wg.Wait()
	return c
}

// fetch reads a neighbour's /status.
func (s *Server) fetch(ctx context.Context, url string) ([]broker.Status, error) {
	ctx, cancel := context.WithTimeout(ctx, fetchTimeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return nil, fmt.Errorf("ops: %w", err)
	}
	resp, err := s.opts.Fetch.Do(req)
	if err != nil {
		return nil, fmt.Errorf("ops: %w", err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("ops: %s: %s", url, resp.Status)
	}
	var st []broker.Status
	if err := json.NewDecoder(resp.Body).Decode(&st); err != nil {
		return nil, fmt.Errorf("ops: %s: %w", url, err)
	}
	return st, nil
}
