package config

import (
	"fmt"
	"net"
	"slices"
	"strconv"
	"strings"
	"time"
)

// check reports every semantic problem of n. bad marks fields already
// reported as mistyped (nil: none).
func (n *Network) check(p *problems, bad map[fieldRef]bool) {
	if len(n.Brokers) == 0 {
		p.at(0, 0, "no brokers: a network needs at least one [[broker]]")
	}
	cells := n.checkBrokers(p, bad)
	n.checkSeeds(p, bad)
	n.checkChaos(p)
	n.checkLinks(p, bad, cells)
	n.checkTrees(p)
	n.checkSecurity(p, bad)
	n.checkRaftClients(p, bad)
	n.checkRaftElection(p, bad)
	n.checkRaftSlots(p, bad)
}

// checkRaftElection: raft_election_timeout only on the members of a
// replicated PHB cell, and the same at all of them (a member with a
// shorter timeout would campaign while the others still follow a
// leader they hear).
func (n *Network) checkRaftElection(p *problems, bad map[fieldRef]bool) {
	first := map[string]int{} // cell -> index of its first member
	for i, b := range n.Brokers {
		if bad[fieldRef{"broker", i, "raft_election_timeout"}] {
			continue
		}
		if n.Replicas(b.ID) == nil {
			if b.RaftElection != nil {
				p.field("broker", i, "raft_election_timeout", "%s: raft_election_timeout applies to the members of a replicated PHB cell (a cell of 2 to 7 brokers that host pubends), and this broker is not one", p.who(b, i))
			}
			continue
		}
		j, seen := first[b.cell()]
		if !seen {
			first[b.cell()] = i
			continue
		}
		if o := n.Brokers[j]; !sameDuration(o.RaftElection, b.RaftElection) {
			p.field("broker", i, "raft_election_timeout", "%s: the members of replicated PHB cell %q must have the same raft_election_timeout: %s has %s, %s has %s",
				p.who(b, i), b.cell(), o.ID, durationOrDefault(o.RaftElection), b.ID, durationOrDefault(b.RaftElection))
		}
	}
}

func sameDuration(a, b *time.Duration) bool {
	return (a == nil) == (b == nil) && (a == nil || *a == *b)
}

func durationOrDefault(d *time.Duration) string {
	if d == nil {
		return "none (the default, 1s)"
	}
	return d.String()
}

// checkRaftClients: raft_clients is forward or redirect, and only on a
// member of a replicated PHB cell (elsewhere it would silently do nothing).
func (n *Network) checkRaftClients(p *problems, bad map[fieldRef]bool) {
	size := map[string]map[string]bool{}
	for _, b := range n.Brokers {
		if size[b.cell()] == nil {
			size[b.cell()] = map[string]bool{}
		}
		size[b.cell()][b.ID] = true
	}
	for i, b := range n.Brokers {
		switch {
		case b.RaftClients == "" || bad[fieldRef{"broker", i, "raft_clients"}]:
		case b.RaftClients != RaftClientsForward && b.RaftClients != RaftClientsRedirect:
			p.field("broker", i, "raft_clients", "%s: raft_clients must be %q or %q, not %q", p.who(b, i), RaftClientsForward, RaftClientsRedirect, b.RaftClients)
		case len(size[b.cell()]) < 2 || !n.hostsPubends(b.cell()):
			p.field("broker", i, "raft_clients", "%s: raft_clients applies to the members of a replicated PHB cell (a cell of 2 to 7 brokers that host pubends), and this broker is not one", p.who(b, i))
		}
	}
}

// checkChaos: every spared broker exists.
func (n *Network) checkChaos(p *problems) {
	if n.Chaos == nil {
		return
	}
	ids := make([]string, 0, len(n.Brokers))
	for _, b := range n.Brokers {
		ids = append(ids, b.ID)
	}
	slices.Sort(ids)
	for _, s := range n.Chaos.Spare {
		if _, ok := n.Broker(s); !ok {
			p.top("chaos", "chaos.spare: unknown broker %q%s", s, knownCells(s, ids))
		}
	}
	for _, f := range n.Chaos.Faults {
		if !slices.Contains(ChaosFaults, f) {
			p.top("chaos", "chaos.faults: unknown fault %q (known: %s)", f, strings.Join(ChaosFaults, ", "))
		}
	}
}

// checkBrokers checks ids, cells, addresses and pubends; it returns the set
// of cells.
func (n *Network) checkBrokers(p *problems, bad map[fieldRef]bool) map[string]bool {
	firstID := map[string]int{}   // broker id → index
	cellOwner := map[string]int{} // cell → index of its first broker
	addrOwner := map[string]string{}
	hostOf := map[string]int{} // pubend → index of its PHB
	cells := map[string]bool{}
	for i, b := range n.Brokers {
		who := p.who(b, i)
		j, dupID := firstID[b.ID]
		switch {
		case b.ID == "" && !bad[fieldRef{"broker", i, "id"}]:
			p.field("broker", i, "id", "%s has no id", who)
		case dupID:
			p.field("broker", i, "id", "duplicate broker id %q (first at %s)", b.ID, p.where("broker", j))
		case b.ID != "":
			firstID[b.ID] = i
		}
		// A repeated id in its default cell is one problem, not two.
		if c := b.cell(); c != "" && !(dupID && c == b.ID) {
			cells[c] = true
			if _, dup := cellOwner[c]; !dup {
				cellOwner[c] = i
			}
		}
		if b.Listen == "" && !bad[fieldRef{"broker", i, "listen"}] {
			p.field("broker", i, "listen", "%s has no listen address", who)
		}
		for _, a := range []struct{ key, addr string }{{"listen", b.Listen}, {"clients", b.Clients}, {"gossip", b.Gossip}, {"http", b.HTTP}, {"mqtt", b.MQTT}} {
			if a.addr == "" {
				continue
			}
			norm, err := normalizeAddr(a.addr)
			if err != nil {
				p.field("broker", i, a.key, "%s: %s address %q: %v", who, a.key, a.addr, err)
				continue
			}
			use := fmt.Sprintf("%s (%s)", who, a.key)
			if prev, dup := addrOwner[norm]; dup {
				p.field("broker", i, a.key, "%s: address %q is already used by %s", who, a.addr, prev)
				continue
			}
			addrOwner[norm] = use
		}
		for _, pe := range b.Pubends {
			switch j, dup := hostOf[pe]; {
			case pe == "":
				p.field("broker", i, "pubends", "%s: empty pubend name", who)
			case strings.ContainsAny(pe, ",:"):
				p.field("broker", i, "pubends", "%s: pubend %q: a pubend name cannot contain ',' or ':' (tokens list pubend:tick pairs)", who, pe)
			case dup && j == i:
				p.field("broker", i, "pubends", "%s: pubend %q is listed twice", who, pe)
			case dup && n.Brokers[j].cell() == b.cell():
				// Members of one cell share its pubends: a replicated PHB
				// (checkReplicatedCell).
			case dup:
				p.field("broker", i, "pubends", "pubend %q is hosted by two brokers, %q and %q", pe, n.Brokers[j].ID, b.ID)
			default:
				hostOf[pe] = i
			}
		}
		switch {
		case b.MaxRetain == nil:
		case *b.MaxRetain < 0:
			p.field("broker", i, "max_retain", "%s: max_retain %v is negative (\"0s\" never releases early)", who, *b.MaxRetain)
		case len(b.Pubends) == 0:
			// Early release is the PHB's policy (Gryphon DS, DSN 2003 §3):
			// elsewhere the key would silently do nothing.
			p.field("broker", i, "max_retain", "%s: max_retain applies to the pubends a broker hosts, and this one hosts none", who)
		}
		if b.DiskReserve != 0 && len(b.Pubends) == 0 {
			p.field("broker", i, "disk_reserve", "%s: disk_reserve applies to the pubends a broker hosts, and this one hosts none", who)
		}
		if b.MaxRetainBytes > 0 && len(b.Pubends) == 0 {
			p.field("broker", i, "max_retain_bytes", "%s: max_retain_bytes applies to the pubends a broker hosts, and this one hosts none", who)
		}
	}
	n.checkRedundantCells(p, cellOwner)
	return cells
}

// checkSeeds: every seed names a broker with a gossip address, once. A
// seed list that names nobody would leave every broker alone in a
// membership of its own.
func (n *Network) checkSeeds(p *problems, bad map[fieldRef]bool) {
	if n.Seeds == nil {
		return
	}
	gossip := map[string]bool{} // broker id → has a gossip address (or a mistyped one, reported already)
	for i, b := range n.Brokers {
		gossip[b.ID] = gossip[b.ID] || b.Gossip != "" || bad[fieldRef{"broker", i, "gossip"}]
	}
	seen := map[string]bool{}
	for _, s := range n.Seeds {
		has, known := gossip[s]
		switch {
		case s == "":
			p.top("seeds", "seeds: empty broker id")
		case seen[s]:
			p.top("seeds", "seeds: broker %q is listed twice", s)
		case !known:
			ids := make([]string, 0, len(gossip))
			for id := range gossip {
				ids = append(ids, id)
			}
			slices.Sort(ids)
			p.top("seeds", "seeds: unknown broker %q%s", s, knownCells(s, ids))
		case !has:
			p.top("seeds", "seeds: broker %q has no gossip address, so nobody can join through it", s)
		}
		seen[s] = true
	}
	if len(n.Seeds) == 0 {
		p.top("seeds", "seeds is empty: list the brokers to join the membership through, or leave seeds out to use every broker with a gossip address")
	}
}

// checkRedundantCells: a cell of several brokers is either an intermediate
// virtual broker (seed 000 §3: "PHBs and SHBs each map to a cell consisting
// of a single physical broker"), which takes no clients and has a
// downstream cell to forward to, or — when its brokers list pubends — a
// replicated PHB (checkReplicatedCell).
func (n *Network) checkRedundantCells(p *problems, cellOwner map[string]int) {
	ids := map[string]map[string]bool{} // cell → distinct broker ids
	for _, b := range n.Brokers {
		if b.cell() == "" || b.ID == "" {
			continue // reported elsewhere
		}
		if ids[b.cell()] == nil {
			ids[b.cell()] = map[string]bool{}
		}
		ids[b.cell()][b.ID] = true
	}
	hasDown := map[string]bool{}
	for _, l := range n.Links {
		hasDown[l.Up] = true
	}
	reported := map[string]bool{}
	for i, b := range n.Brokers {
		c := b.cell()
		if len(ids[c]) < 2 {
			continue
		}
		if n.hostsPubends(c) {
			if !reported[c] {
				reported[c] = true
				n.checkReplicatedCell(p, c, cellOwner[c])
			}
			continue
		}
		who := p.who(b, i)
		if b.Clients != "" {
			p.field("broker", i, "clients", "%s: cell %q has several brokers and cannot take clients: publishers and subscribers connect to cells of one broker", who, c)
		}
		if b.MQTT != "" {
			p.field("broker", i, "mqtt", "%s: cell %q has several brokers and cannot take MQTT clients: publishers and subscribers connect to cells of one broker", who, c)
		}
		if !hasDown[c] && !reported[c] {
			reported[c] = true
			j := cellOwner[c]
			p.field("broker", j, "cell", "cell %q has several brokers but no downstream cell: only intermediate cells can be redundant (Gryphon GD §3)", c)
		}
	}
}

// normalizeAddr checks that addr is host:port with a numeric port and
// returns a form in which equal addresses compare equal.
func normalizeAddr(addr string) (string, error) {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		if ae, ok := err.(*net.AddrError); ok {
			return "", fmt.Errorf("not host:port (%s)", ae.Err)
		}
		return "", fmt.Errorf("not host:port (%v)", err)
	}
	v, err := strconv.ParseUint(port, 10, 16)
	if err != nil {
		return "", fmt.Errorf("port %q is not a number in 1–65535", port)
	}
	if v == 0 {
		return "", fmt.Errorf("port 0: peers and clients need a fixed port")
	}
	return net.JoinHostPort(strings.ToLower(host), strconv.FormatUint(v, 10)), nil
}

// checkLinks checks that links join two different known cells, once each.
func (n *Network) checkLinks(p *problems, bad map[fieldRef]bool, cells map[string]bool) {
	known := make([]string, 0, len(cells))
	for c := range cells {
		known = append(known, c)
	}
	slices.Sort(known)
	cellOf := map[string]string{} // broker id → cell, for a link naming a broker
	for _, b := range n.Brokers {
		cellOf[b.ID] = b.cell()
	}
	first := map[Link]int{}
	for i, l := range n.Links {
		ok := true
		for _, end := range []struct{ key, cell string }{{"up", l.Up}, {"down", l.Down}} {
			switch {
			case end.cell == "" && !bad[fieldRef{"link", i, end.key}]:
				p.field("link", i, end.key, "link has no %s cell", end.key)
				ok = false
			case end.cell == "":
				ok = false
			case !cells[end.cell]:
				hint := knownCells(end.cell, known)
				if c, isBroker := cellOf[end.cell]; isBroker {
					hint = fmt.Sprintf(" (links join cells; broker %q is in cell %q)", end.cell, c)
				}
				p.field("link", i, end.key, "link %s: unknown cell %q%s", end.key, end.cell, hint)
				ok = false
			}
		}
		if !ok {
			continue
		}
		if l.Up == l.Down {
			p.elem("link", i, "link from cell %q to itself", l.Up)
			continue
		}
		if j, dup := first[l]; dup {
			p.elem("link", i, "duplicate link %q → %q (first at %s)", l.Up, l.Down, p.where("link", j))
			continue
		}
		first[l] = i
	}
}

// knownCells helps with an unknown cell name: a close match, or the list.
func knownCells(cell string, known []string) string {
	if s := suggest(cell, known); s != "" {
		return s
	}
	if len(known) > 10 {
		return ""
	}
	return fmt.Sprintf(" (cells: %s)", strings.Join(known, ", "))
}

// checkTrees checks that, per pubend, the links reachable from its PHB's
// cell form a tree [000 §3]: knowledge reaches every cell on one path only.
func (n *Network) checkTrees(p *problems) {
	down := n.downLinks()
	for _, b := range n.Brokers {
		if b.cell() == "" {
			continue
		}
		t := walkTree(b.cell(), down, n.Links)
		for _, pe := range b.Pubends {
			if pe == "" {
				continue
			}
			for _, tw := range t.twice {
				how := fmt.Sprintf("via %q and %q", tw.first, tw.again)
				if tw.cell == b.cell() {
					how = fmt.Sprintf("as the pubend's own cell and via %q", tw.again)
				}
				p.elem("link", tw.link, "pubend %s: cell %q is reached twice (%s); the links from a pubend's cell must form a tree",
					pe, tw.cell, how)
			}
		}
	}
}
