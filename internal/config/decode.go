package config

import (
	"fmt"
	"slices"
	"time"

	"github.com/BurntSushi/toml"

	"github.com/aerie-mq/aerie/internal/transport"
)

// The decoder fills raw* with untyped leaves, so that a value of the wrong
// type is one more collected problem (with a position) rather than the
// decoder's first-and-only error. Undecoded keys are still tracked: a field
// of type any counts as decoded.
type rawNetwork struct {
	Seeds any `toml:"seeds"`
	// CongestionControl is congestion_control (Network.CongestionControl).
	CongestionControl any `toml:"congestion_control"`
	// MemoryBudget is memory_budget (Network.MemoryBudget).
	MemoryBudget any           `toml:"memory_budget"`
	Broker       []rawBroker   `toml:"broker"`
	Link         []rawLink     `toml:"link"`
	Chaos        *rawChaos     `toml:"chaos"`
	TLS          *rawTLS       `toml:"tls"`
	User         []rawUser     `toml:"user"`
	Anonymous    *rawAnonymous `toml:"anonymous"`
}

type rawChaos struct {
	Spare    any `toml:"spare"`
	Interval any `toml:"interval"`
	Faults   any `toml:"faults"`
}

type rawBroker struct {
	ID      any `toml:"id"`
	Cell    any `toml:"cell"`
	Listen  any `toml:"listen"`
	Clients any `toml:"clients"`
	Data    any `toml:"data"`
	TLSCert any `toml:"tls_cert"`
	TLSKey  any `toml:"tls_key"`
	Pubends any `toml:"pubends"`
	Gossip  any `toml:"gossip"`
	HTTP    any `toml:"http"`
	// MaxRetain is max_retain (Broker.MaxRetain).
	MaxRetain any `toml:"max_retain"`
	// MaxRetainBytes is max_retain_bytes (Broker.MaxRetainBytes).
	MaxRetainBytes any `toml:"max_retain_bytes"`
	// DiskReserve is disk_reserve (Broker.DiskReserve).
	DiskReserve any `toml:"disk_reserve"`
	// CatchupWindow and CatchupWindowBytes are catchup_window and
	// catchup_window_bytes (Broker.CatchupWindow, CatchupWindowBytes).
	CatchupWindow      any `toml:"catchup_window"`
	CatchupWindowBytes any `toml:"catchup_window_bytes"`
	// RelayCacheBytes is relay_cache_bytes (Broker.RelayCacheBytes).
	RelayCacheBytes any `toml:"relay_cache_bytes"`
	MQTT            any `toml:"mqtt"`
	// RaftClients is raft_clients (Broker.RaftClients).
	RaftClients any `toml:"raft_clients"`
	// RaftElection is raft_election_timeout (Broker.RaftElection).
	RaftElection any `toml:"raft_election_timeout"`
	// RaftSlot is raft_slot (Broker.RaftSlot).
	RaftSlot any `toml:"raft_slot"`
}

type rawLink struct {
	Up        any `toml:"up"`
	Down      any `toml:"down"`
	Bandwidth any `toml:"bandwidth"`
}

// fieldRef names one key of one element: ("broker", 2, "id").
type fieldRef struct {
	table string
	elem  int
	key   string
}

// shape checks that top-level key is absent or an array of tables.
func (p *problems) shape(top map[string]any, key string) bool {
	v, present := top[key]
	if !present {
		return true
	}
	ok := false
	switch v := v.(type) {
	case []map[string]any:
		ok = true
	case []any: // broker = [{...}, {...}]
		ok = true
		for _, e := range v {
			if _, isTable := e.(map[string]any); !isTable {
				ok = false
			}
		}
	}
	if !ok {
		line, col, _, _ := p.loc.nth([]string{key}, 0)
		p.at(line, col, "%s must be an array of tables ([[%s]]), not %s", key, key, typeName(v))
	}
	return ok
}

func typeName(v any) string {
	switch v.(type) {
	case string:
		return "a string"
	case int64:
		return "an integer"
	case float64:
		return "a float"
	case bool:
		return "a boolean"
	case time.Time:
		return "a date-time"
	case []any, []map[string]any:
		return "an array"
	case map[string]any:
		return "a table"
	}
	return fmt.Sprintf("%T", v)
}

// convert turns the raw tables into a Network, reporting values of the wrong
// type (and marking them in bad, so that check does not also call them
// missing).
func (p *problems) convert(raw *rawNetwork, bad map[fieldRef]bool) *Network {
	n := &Network{}
	for i, rb := range raw.Broker {
		s := func(key string, v any) string { return p.str(fieldRef{"broker", i, key}, v, bad) }
		b := Broker{
			ID: s("id", rb.ID), Listen: s("listen", rb.Listen),
			Clients: s("clients", rb.Clients), Data: s("data", rb.Data),
			Gossip: s("gossip", rb.Gossip), HTTP: s("http", rb.HTTP),
			MQTT: s("mqtt", rb.MQTT),
		}
		if rb.RaftClients != nil {
			switch v := s("raft_clients", rb.RaftClients); v {
			case RaftClientsForward, RaftClientsRedirect:
				b.RaftClients = v
			case "":
				if !bad[fieldRef{"broker", i, "raft_clients"}] {
					p.field("broker", i, "raft_clients", "%s: raft_clients must be %q or %q (leave it out for the default, %q), not an empty string",
						p.who(b, i), RaftClientsForward, RaftClientsRedirect, RaftClientsForward)
					bad[fieldRef{"broker", i, "raft_clients"}] = true
				}
			default:
				p.field("broker", i, "raft_clients", "%s: raft_clients must be %q (a member that does not serve forwards a client's publishes to the leader) "+
					"or %q (it closes the client, which tries another member), not %q", p.who(b, i), RaftClientsForward, RaftClientsRedirect, v)
				bad[fieldRef{"broker", i, "raft_clients"}] = true
			}
		}
		b.Cell = b.ID
		if rb.Cell != nil {
			if b.Cell = s("cell", rb.Cell); b.Cell == "" && !bad[fieldRef{"broker", i, "cell"}] {
				p.field("broker", i, "cell", "%s: cell must not be empty (leave it out to default to the id)", p.who(b, i))
				bad[fieldRef{"broker", i, "cell"}] = true
			}
		}
		b.Pubends = p.strings(fieldRef{"broker", i, "pubends"}, rb.Pubends, bad)
		if rb.MaxRetain != nil {
			s, _ := rb.MaxRetain.(string)
			d, err := time.ParseDuration(s)
			switch {
			case err != nil:
				p.field("broker", i, "max_retain", "%s: max_retain must be a duration such as \"168h\" (\"0s\": never release early), not %v", p.who(b, i), rb.MaxRetain)
				bad[fieldRef{"broker", i, "max_retain"}] = true
			case d < 0:
				p.field("broker", i, "max_retain", "%s: max_retain %v is negative (\"0s\" never releases early)", p.who(b, i), d)
				bad[fieldRef{"broker", i, "max_retain"}] = true
			case d > 0 && d < transport.DefaultDeadAfter:
				p.field("broker", i, "max_retain", "%s: max_retain %v is shorter than the links' heartbeat timeout (%v): it would release past "+
					"downstream brokers that are merely slow; make it at least %v (\"0s\" never releases early)",
					p.who(b, i), d, transport.DefaultDeadAfter, transport.DefaultDeadAfter)
				bad[fieldRef{"broker", i, "max_retain"}] = true
			default:
				b.MaxRetain = &d
			}
		}
		if rb.MaxRetainBytes != nil {
			if v, err := retainBytes(rb.MaxRetainBytes); err != nil {
				p.field("broker", i, "max_retain_bytes", "%s: max_retain_bytes %v", p.who(b, i), err)
				bad[fieldRef{"broker", i, "max_retain_bytes"}] = true
			} else {
				b.MaxRetainBytes = v
			}
		}
		if rb.DiskReserve != nil {
			switch v, err := retainBytes(rb.DiskReserve); {
			case rb.DiskReserve == "0" || rb.DiskReserve == int64(0):
				b.DiskReserve = -1
			case err != nil:
				p.field("broker", i, "disk_reserve", "%s: disk_reserve %v, or \"0\" for none", p.who(b, i), err)
				bad[fieldRef{"broker", i, "disk_reserve"}] = true
			default:
				b.DiskReserve = v
			}
		}
		if rb.CatchupWindow != nil {
			if v, ok := rb.CatchupWindow.(int64); !ok || v < MinCatchupWindow || v > MaxCatchupWindow {
				p.field("broker", i, "catchup_window", "%s: catchup_window %#v: want a number of events from %d to %d",
					p.who(b, i), rb.CatchupWindow, MinCatchupWindow, MaxCatchupWindow)
				bad[fieldRef{"broker", i, "catchup_window"}] = true
			} else {
				b.CatchupWindow = int(v)
			}
		}
		if rb.CatchupWindowBytes != nil {
			b.CatchupWindowBytes = p.sizeIn(b, i, "catchup_window_bytes", rb.CatchupWindowBytes, MinCatchupWindowBytes, MaxCatchupWindowBytes, bad)
		}
		if rb.RelayCacheBytes != nil {
			b.RelayCacheBytes = p.sizeIn(b, i, "relay_cache_bytes", rb.RelayCacheBytes, MinRelayCacheBytes, MaxRelayCacheBytes, bad)
		}
		if rb.RaftElection != nil {
			b.RaftElection = p.raftElection(b, i, rb.RaftElection, bad)
		}
		if rb.RaftSlot != nil {
			b.RaftSlot = p.raftSlot(b, i, rb.RaftSlot, bad)
		}
		n.Brokers = append(n.Brokers, b)
	}
	n.Seeds = p.seeds(raw.Seeds)
	if raw.CongestionControl != nil {
		if on, ok := raw.CongestionControl.(bool); ok {
			n.CongestionControl = &on
		} else {
			p.top("congestion_control", "congestion_control must be true or false (absent: on), not %s", typeName(raw.CongestionControl))
		}
	}
	if raw.MemoryBudget != nil {
		n.MemoryBudget = p.sizeTop("memory_budget", raw.MemoryBudget, MinMemoryBudget, MaxMemoryBudget)
	}
	if raw.Chaos != nil {
		n.Chaos = &Chaos{}
		if raw.Chaos.Spare != nil {
			n.Chaos.Spare = p.ids("chaos", "chaos.spare", raw.Chaos.Spare)
		}
		if raw.Chaos.Interval != nil {
			s, _ := raw.Chaos.Interval.(string)
			d, err := time.ParseDuration(s)
			switch {
			case err != nil:
				p.top("chaos", "chaos.interval must be a duration such as \"10m\", not %v", raw.Chaos.Interval)
			case d < time.Second:
				p.top("chaos", "chaos.interval %v is below 1s: the network would do nothing but recover", d)
			default:
				n.Chaos.Interval = d
			}
		}
		if raw.Chaos.Faults != nil {
			n.Chaos.Faults = p.ids("chaos", "chaos.faults", raw.Chaos.Faults)
		}
	}
	p.convertSecurity(raw, n, bad)
	for i, rl := range raw.Link {
		l := Link{
			Up:   p.str(fieldRef{"link", i, "up"}, rl.Up, bad),
			Down: p.str(fieldRef{"link", i, "down"}, rl.Down, bad),
		}
		if rl.Bandwidth != nil {
			s, ok := rl.Bandwidth.(string)
			if !ok {
				s = fmt.Sprint(rl.Bandwidth) // a number: say which, then why not
			}
			bw, err := ParseBandwidth(s)
			switch {
			case err != nil:
				p.field("link", i, "bandwidth", "link %s → %s: %v", l.Up, l.Down, err)
				bad[fieldRef{"link", i, "bandwidth"}] = true
			default:
				if n.Bandwidth == nil {
					n.Bandwidth = map[Link]int64{}
				}
				n.Bandwidth[l] = bw
			}
		}
		n.Links = append(n.Links, l)
	}
	return n
}

// str returns v as a string; "" when absent or of the wrong type.
func (p *problems) str(f fieldRef, v any, bad map[fieldRef]bool) string {
	if v == nil { // TOML has no null: absent
		return ""
	}
	s, ok := v.(string)
	if !ok {
		p.field(f.table, f.elem, f.key, "%s must be a string, not %s", f.key, typeName(v))
		bad[f] = true
	}
	return s
}

// strings returns v as a list of strings; nil when absent, empty or of the
// wrong type.
func (p *problems) strings(f fieldRef, v any, bad map[fieldRef]bool) []string {
	if v == nil {
		return nil
	}
	list, ok := v.([]any)
	var out []string
	for _, e := range list {
		s, isString := e.(string)
		ok = ok && isString
		out = append(out, s)
	}
	if !ok {
		p.field(f.table, f.elem, f.key, "%s must be an array of strings, not %s", f.key, typeName(v))
		bad[f] = true
		return nil
	}
	return out
}

// seeds converts the top-level seeds key: nil when absent or mistyped
// (reported here, so check does not also complain).
func (p *problems) seeds(v any) []string { return p.ids("seeds", "seeds", v) }

// ids converts a list of broker ids named name, reported at top-level key
// at; nil when absent or mistyped.
func (p *problems) ids(at, name string, v any) []string {
	if v == nil {
		return nil
	}
	list, ok := v.([]any)
	out := []string{}
	for _, e := range list {
		s, isString := e.(string)
		ok = ok && isString
		out = append(out, s)
	}
	if !ok {
		p.top(at, "%s must be an array of broker ids (strings), not %s", name, typeName(v))
		return nil
	}
	return out
}

// who names broker i in a message.
func (p *problems) who(b Broker, i int) string {
	if b.ID != "" {
		return fmt.Sprintf("broker %q", b.ID)
	}
	return fmt.Sprintf("[[broker]] #%d", i+1)
}

// unknownKeys reports every key the format does not define, once per
// occurrence, but not the keys inside an unknown table or a mistyped value.
func (p *problems) unknownKeys(md toml.MetaData) {
	known := map[string][]string{"broker": append(slices.Clone(brokerKeys), securityBrokerKeys...), "link": linkKeys, "chaos": chaosKeys,
		"tls": tlsKeys, "user": userKeys, "anonymous": anonymousKeys}
	undecoded := md.Undecoded()
	isUndecoded := map[string]bool{}
	for _, k := range undecoded {
		isUndecoded[k.String()] = true
	}
	occurrence := map[string]int{}
	for _, k := range undecoded {
		ks := k.String()
		n := occurrence[ks]
		occurrence[ks]++
		if len(k) == 0 || coveredBy(k, isUndecoded, known) {
			continue
		}
		line, col, _, _ := p.loc.nth(k, n)
		if keys, inTable := known[k[0]]; inTable && len(k) > 1 {
			hint := suggest(k[1], keys)
			if len(k) == 2 && slices.Contains(topKeys, k[1]) {
				hint = fmt.Sprintf(" (%s is a top-level key: put it before the first table)", k[1])
			}
			table := "[[" + k[0] + "]]"
			if k[0] == "chaos" || k[0] == "tls" || k[0] == "anonymous" {
				table = "[" + k[0] + "]" // a table, not an array of tables
			}
			p.at(line, col, "unknown key %q in %s%s", toml.Key(k[1:]).String(), table, hint)
			continue
		}
		p.at(line, col, "unknown key %q%s", ks, suggest(k[0], topKeys))
	}
}

// coveredBy reports whether a problem with a prefix of k is already
// reported: the prefix is itself unknown, or is a known key whose value is
// a table where a string was due (a type error).
func coveredBy(k toml.Key, isUndecoded map[string]bool, known map[string][]string) bool {
	for j := 1; j < len(k); j++ {
		if isUndecoded[k[:j].String()] {
			return true
		}
	}
	return len(k) > 2 && slices.Contains(known[k[0]], k[1])
}

// raftSlot parses a broker's raft_slot (0, reported, when it is not an
// integer from 1 to MaxRaftSlot).
// sizeIn decodes broker i's size key, which must lie in [lo, hi]; a bad
// one is reported, marked in bad, and decodes as 0 (the default).
func (p *problems) sizeIn(b Broker, i int, key string, raw any, lo, hi int64, bad map[fieldRef]bool) int64 {
	v, why := sizeWithin(key, raw, lo, hi)
	if why == "" {
		return v
	}
	p.field("broker", i, key, "%s: %s", p.who(b, i), why)
	bad[fieldRef{"broker", i, key}] = true
	return 0
}

// sizeTop decodes the top-level size key, as sizeIn a broker's.
func (p *problems) sizeTop(key string, raw any, lo, hi int64) int64 {
	v, why := sizeWithin(key, raw, lo, hi)
	if why != "" {
		p.top(key, "%s", why)
	}
	return v
}

// sizeWithin decodes the size key, which must lie in [lo, hi]: its bytes,
// or 0 and what is wrong with it.
func sizeWithin(key string, raw any, lo, hi int64) (int64, string) {
	v, err := retainBytes(raw)
	switch {
	case err != nil:
		return 0, fmt.Sprintf("%s %v", key, err)
	case v < lo || v > hi:
		return 0, fmt.Sprintf("%s %#v: want from %s to %s", key, raw, FormatSize(lo), FormatSize(hi))
	}
	return v, ""
}

func (p *problems) raftSlot(b Broker, i int, v any, bad map[fieldRef]bool) uint64 {
	if k, ok := v.(int64); ok && k >= 1 && k <= MaxRaftSlot {
		return uint64(k)
	}
	p.field("broker", i, "raft_slot", "%s: raft_slot must be an integer from 1 to %d, not %v", p.who(b, i), MaxRaftSlot, v)
	bad[fieldRef{"broker", i, "raft_slot"}] = true
	return 0
}

// raftElection parses a broker's raft_election_timeout (nil, reported, when
// it is not a duration within RaftElectionBounds).
func (p *problems) raftElection(b Broker, i int, v any, bad map[fieldRef]bool) *time.Duration {
	s, _ := v.(string)
	d, err := time.ParseDuration(s)
	lo, hi := RaftElectionBounds[0], RaftElectionBounds[1]
	switch {
	case err != nil:
		p.field("broker", i, "raft_election_timeout", "%s: raft_election_timeout must be a duration such as \"1s\", not %v", p.who(b, i), v)
	case d < lo || d > hi:
		p.field("broker", i, "raft_election_timeout", "%s: raft_election_timeout %v is outside %v to %v "+
			"(shorter mistakes a slow leader for a dead one; longer stops publishing that long when a leader dies)", p.who(b, i), d, lo, hi)
	default:
		return &d
	}
	bad[fieldRef{"broker", i, "raft_election_timeout"}] = true
	return nil
}
