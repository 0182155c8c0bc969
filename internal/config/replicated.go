package config

import (
	"slices"
	"strings"
)

// A cell whose brokers list pubends is a replicated PHB (docs/CONFIG.md): one
// Raft group (internal/raftphb) for those pubends, so that they survive the
// loss of a minority of the cell. P2S (DEBS 2014 §3) replicates a broker the
// same way, with Multi-Paxos.

// ReplicaCounts are the sizes a replicated PHB cell may have: 2 to 7. An
// odd size is what a majority quorum rewards, so an even one is allowed
// but warned about (raftphb.EvenCellWarning, which the broker logs at
// start): 4 members tolerate one failure, as 3 do, with one more member in
// every commit; 2 members tolerate none, worse than one. Past 7, every
// commit waits for a fourth fsync while the cell rarely loses four
// machines at once (P2S §4 measures up to 7).
var ReplicaCounts = []int{2, 3, 4, 5, 6, 7}

// hostsPubends reports whether some broker of cell c lists a pubend.
func (n *Network) hostsPubends(c string) bool {
	for _, b := range n.Brokers {
		if b.cell() == c && len(b.Pubends) > 0 {
			return true
		}
	}
	return false
}

// checkReplicatedCell: every member of the replicated PHB cell c lists the
// same pubends (each is one Raft group's state: a member without one of
// them could be elected and lose it), has a data directory (its Raft log),
// and the cell has 2 to 7 members (an even count is allowed, and warned
// about by the broker: raftphb.EvenCellWarning). No link leads into it:
// its brokers host pubends and relay nothing (the engine runs at the Raft
// leader only), and they take no MQTT clients yet. first is the index of
// c's first broker.
func (n *Network) checkReplicatedCell(p *problems, c string, first int) {
	var members []int
	for i, b := range n.Brokers {
		if b.cell() == c && b.ID != "" {
			members = append(members, i)
		}
	}
	if k := len(members); !slices.Contains(ReplicaCounts, k) {
		p.field("broker", first, "cell", "cell %q hosts pubends on %d brokers: a replicated PHB cell has %d to %d members "+
			"(3, 5 or 7 is best: a Raft majority of an even number tolerates no more failures than one member less; past 7 every commit waits for more fsyncs)",
			c, k, ReplicaCounts[0], ReplicaCounts[len(ReplicaCounts)-1])
	}
	want := sortedPubends(n.Brokers[first])
	for _, i := range members {
		b := n.Brokers[i]
		who := p.who(b, i)
		if got := sortedPubends(b); !slices.Equal(got, want) {
			p.field("broker", i, "pubends", "%s: the members of replicated PHB cell %q must list the same pubends: %s lists [%s], %s lists [%s]",
				who, c, n.Brokers[first].ID, strings.Join(want, ", "), b.ID, strings.Join(got, ", "))
		}
		if b.Data == "" {
			p.field("broker", i, "data", "%s: a member of replicated PHB cell %q needs a data directory (its Raft log and its copy of the pubends' log)", who, c)
		}
		if b.MQTT != "" {
			p.field("broker", i, "mqtt", "%s: a member of replicated PHB cell %q cannot take MQTT clients yet", who, c)
		}
	}
	for i, l := range n.Links {
		if l.Down == c {
			p.elem("link", i, "link %s -> %s: cell %q is a replicated PHB cell and cannot be downstream of a link: only its Raft leader runs an engine, so it relays nothing", l.Up, l.Down, c)
		}
	}
}

func sortedPubends(b Broker) []string {
	out := slices.Clone(b.Pubends)
	slices.Sort(out)
	return out
}

// Replicas returns the members of broker id's cell, sorted, when that cell
// is a replicated PHB (brokers that list pubends, more than one), else nil.
func (n *Network) Replicas(id string) []string {
	me, ok := n.Broker(id)
	if !ok || len(me.Pubends) == 0 {
		return nil
	}
	peers := n.Peers(id)
	if len(peers) == 0 {
		return nil
	}
	out := append(peers, id)
	slices.Sort(out)
	return out
}

// RaftSlots returns the slots of the members of broker id's replicated PHB
// cell, in Replicas' order (nil when its cell is not one). A member's slot
// is its raft_slot, or else its position among the cell's members without
// one, in sorted order, skipping the slots taken by raft_slot: the same at
// every member whatever order the config lists them in, and, with no
// raft_slot anywhere, the sorted position plus one (which every cell had
// before raft_slot existed). Two members on one slot are refused
// (checkRaftSlots); here the later one keeps its position.
func (n *Network) RaftSlots(id string) []uint64 {
	ms := n.Replicas(id)
	if ms == nil {
		return nil
	}
	out := make([]uint64, len(ms))
	taken := map[uint64]bool{}
	for i, m := range ms {
		b, _ := n.Broker(m)
		out[i] = b.RaftSlot
		taken[b.RaftSlot] = true
	}
	next := uint64(1)
	for i := range out {
		if out[i] != 0 {
			continue
		}
		for taken[next] {
			next++
		}
		out[i] = next
		next++
	}
	return out
}

// RaftID returns broker id's slot in its replicated PHB cell (1 …), its
// Raft id while it has not lost its state (raftphb.MemberID), or 0 when its
// cell is not one.
func (n *Network) RaftID(id string) uint64 {
	i := slices.Index(n.Replicas(id), id)
	if i < 0 {
		return 0
	}
	return n.RaftSlots(id)[i]
}

// checkRaftSlots: raft_slot only on the members of a replicated PHB cell,
// and no two members of a cell on one slot (two brokers would answer for
// one Raft member).
func (n *Network) checkRaftSlots(p *problems, bad map[fieldRef]bool) {
	for i, b := range n.Brokers {
		if bad[fieldRef{"broker", i, "raft_slot"}] {
			continue
		}
		ms := n.Replicas(b.ID)
		if ms == nil {
			if b.RaftSlot != 0 {
				p.field("broker", i, "raft_slot", "%s: raft_slot applies to the members of a replicated PHB cell (a cell of 2 to 7 brokers that host pubends), and this broker is not one", p.who(b, i))
			}
			continue
		}
		slots := n.RaftSlots(b.ID)
		me := slots[slices.Index(ms, b.ID)]
		for j, m := range ms {
			if m != b.ID && slots[j] == me && m < b.ID {
				p.field("broker", i, "raft_slot", "%s: %s and %s of replicated PHB cell %q both have raft_slot %d: give one of them another",
					p.who(b, i), m, b.ID, b.cell(), me)
			}
		}
	}
}
