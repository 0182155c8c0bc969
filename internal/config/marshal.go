package config

import (
	"bytes"
	"fmt"
	"path/filepath"
	"strconv"
	"strings"
)

// Marshal writes n in the format Parse reads, keys in a fixed order, optional
// keys left out when empty (cell when it is the id). Parse(Marshal(n))
// returns n with every Cell filled in. It refuses a network that does not
// validate, so that what it writes always loads.
func (n *Network) Marshal() ([]byte, error) {
	if err := n.Validate(); err != nil {
		return nil, err
	}
	var b bytes.Buffer
	b.WriteString("# aerie network config (docs/CONFIG.md)\n")
	if n.Seeds != nil {
		q := make([]string, len(n.Seeds))
		for i, s := range n.Seeds {
			q[i] = quote(s)
		}
		fmt.Fprintf(&b, "seeds = [%s]\n", strings.Join(q, ", "))
	}
	if n.CongestionControl != nil {
		fmt.Fprintf(&b, "congestion_control = %v\n", *n.CongestionControl)
	}
	if n.MemoryBudget > 0 {
		kv(&b, "memory_budget", FormatSize(n.MemoryBudget))
	}
	if n.TLS != nil {
		fmt.Fprintf(&b, "\n[tls]\nca = %s\n", quote(n.TLS.CA))
	}
	for _, br := range n.Brokers {
		b.WriteString("\n[[broker]]\n")
		kv(&b, "id", br.ID)
		if br.Cell != "" && br.Cell != br.ID {
			kv(&b, "cell", br.Cell)
		}
		kv(&b, "listen", br.Listen)
		if br.Clients != "" {
			kv(&b, "clients", br.Clients)
		}
		if br.Data != "" {
			kv(&b, "data", br.Data)
		}
		if br.TLSCert != "" || br.TLSKey != "" {
			fmt.Fprintf(&b, "tls_cert = %s\ntls_key  = %s\n", quote(br.TLSCert), quote(br.TLSKey))
		}
		if len(br.Pubends) > 0 {
			q := make([]string, len(br.Pubends))
			for i, p := range br.Pubends {
				q[i] = quote(p)
			}
			fmt.Fprintf(&b, "%-7s = [%s]\n", "pubends", strings.Join(q, ", "))
		}
		if br.Gossip != "" {
			kv(&b, "gossip", br.Gossip)
		}
		if br.HTTP != "" {
			kv(&b, "http", br.HTTP)
		}
		if br.MaxRetain != nil {
			kv(&b, "max_retain", br.MaxRetain.String())
		}
		if br.MaxRetainBytes > 0 {
			kv(&b, "max_retain_bytes", FormatSize(br.MaxRetainBytes))
		}
		switch {
		case br.DiskReserve > 0:
			kv(&b, "disk_reserve", FormatSize(br.DiskReserve))
		case br.DiskReserve < 0:
			kv(&b, "disk_reserve", "0")
		}
		if br.CatchupWindow > 0 {
			fmt.Fprintf(&b, "%-7s = %d\n", "catchup_window", br.CatchupWindow)
		}
		if br.CatchupWindowBytes > 0 {
			kv(&b, "catchup_window_bytes", FormatSize(br.CatchupWindowBytes))
		}
		if br.RelayCacheBytes > 0 {
			kv(&b, "relay_cache_bytes", FormatSize(br.RelayCacheBytes))
		}
		if br.MQTT != "" {
			kv(&b, "mqtt", br.MQTT)
		}
		if br.RaftClients != "" {
			kv(&b, "raft_clients", br.RaftClients)
		}
		if br.RaftElection != nil {
			kv(&b, "raft_election_timeout", br.RaftElection.String())
		}
		if br.RaftSlot != 0 {
			fmt.Fprintf(&b, "%-7s = %d\n", "raft_slot", br.RaftSlot)
		}
	}
	for _, l := range n.Links {
		b.WriteString("\n[[link]]\n")
		fmt.Fprintf(&b, "%-4s = %s\n", "up", quote(l.Up))
		fmt.Fprintf(&b, "%-4s = %s\n", "down", quote(l.Down))
		if bw := n.Bandwidth[l]; bw > 0 {
			fmt.Fprintf(&b, "bandwidth = %s\n", quote(FormatBandwidth(bw)))
		}
	}
	if c := n.Chaos; c != nil {
		b.WriteString("\n[chaos]\n")
		list := func(key string, xs []string) {
			q := make([]string, len(xs))
			for i, s := range xs {
				q[i] = quote(s)
			}
			fmt.Fprintf(&b, "%-8s = [%s]\n", key, strings.Join(q, ", "))
		}
		if c.Spare != nil {
			list("spare", c.Spare)
		}
		if c.Interval > 0 {
			kv(&b, "interval", c.Interval.String())
		}
		if c.Faults != nil {
			list("faults", c.Faults)
		}
	}
	marshalUsers(&b, n.Users, n.Anonymous)
	return b.Bytes(), nil
}

func kv(b *bytes.Buffer, key, value string) {
	fmt.Fprintf(b, "%-7s = %s\n", key, quote(value))
}

// quote writes s as a TOML basic string. (Go's strconv.Quote is not TOML:
// it writes \x and \a escapes TOML 1.0 lacks.)
func quote(s string) string {
	var b strings.Builder
	b.WriteByte('"')
	for _, r := range s {
		switch {
		case r == '"':
			b.WriteString(`\"`)
		case r == '\\':
			b.WriteString(`\\`)
		case r == '\n':
			b.WriteString(`\n`)
		case r == '\t':
			b.WriteString(`\t`)
		case r == '\r':
			b.WriteString(`\r`)
		case r < 0x20 || r == 0x7f:
			fmt.Fprintf(&b, `\u%04x`, r)
		default:
			b.WriteRune(r)
		}
	}
	b.WriteByte('"')
	return b.String()
}

// Dev returns the default development network of `aerie dev` (docs/CONFIG.md),
// on 127.0.0.1: PHB p1 hosting P1–P4, IB b1, SHBs s1 and s2, linked
// p1 → b1 → {s1, s2}. Broker k (1-based, in that order) listens on
// basePort+k and, if it takes clients, serves them on basePort+100+k, as in
// the config contract's example (7101/7201 with basePort 7100), and gossips
// (membership) on basePort+200+k (7301…). Brokers with durable
// state (the PHB's event log, the SHBs' subscription state) keep it under
// dir/<id>; the IB holds only soft state.
func Dev(dir string, basePort int) *Network {
	addr := func(port int) string { return "127.0.0.1:" + strconv.Itoa(port) }
	brokers := []struct {
		id      string
		clients bool
		pubends []string
	}{
		{"p1", true, []string{"P1", "P2", "P3", "P4"}},
		{"b1", false, nil},
		{"s1", true, nil},
		{"s2", true, nil},
	}
	n := &Network{}
	for k, b := range brokers {
		br := Broker{ID: b.id, Cell: b.id, Listen: addr(basePort + 1 + k), Pubends: b.pubends, Gossip: addr(basePort + 201 + k)}
		if b.clients {
			br.Clients = addr(basePort + 101 + k)
			br.Data = filepath.Join(dir, b.id)
		}
		n.Brokers = append(n.Brokers, br)
	}
	n.Links = []Link{{"p1", "b1"}, {"b1", "s1"}, {"b1", "s2"}}
	return n
}
