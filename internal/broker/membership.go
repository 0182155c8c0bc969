package broker

import (
	"context"
	"errors"
	"fmt"
	"net"
	"slices"
	"strconv"

	"github.com/aerie-mq/aerie/internal/member"
	"github.com/aerie-mq/aerie/internal/member/mlist"
	"github.com/aerie-mq/aerie/internal/msg"
)

// Membership (docs/MEMBERSHIP.md): a broker with a gossip address runs an
// mlist.Node next to its engine. The node owns its goroutines; the broker
// owns the node's Run and stops it after the loop (a graceful stop leaves
// with Bye, so peers record a leave, not a crash). Installed views come
// into the loop as viewInstalled events, so the loop's state needs no lock.
//
// What a view does here: when it removes a member (crashed, left, or
// dropped) that is a neighbour with an open connection of that same
// incarnation, the loop closes that connection and steps gd.LinkDown at
// once. A stalled neighbour (SIGSTOP, accepts but does not answer) is so
// routed around after membership's detection (≈ 0.5 s) instead of the
// transport heartbeat timeout (5 s). The dial loops keep redialling as
// before, and a link to a member the view excluded is still accepted: a
// false suspicion costs a reconnect, never a message, and a stalled
// broker that resumes is linked again without waiting for the view to
// readmit it.

// startMembership creates the mlist node (listening) once the broker's own
// addresses are known. The caller runs it under ctx, which also bounds the
// hand-over of views to the loop.
func (n *Node) startMembership(ctx context.Context) (*mlist.Node, error) {
	host, port, err := net.SplitHostPort(n.opts.Gossip)
	if err != nil {
		return nil, fmt.Errorf("broker %s: gossip address %q: %w", n.opts.ID, n.opts.Gossip, err)
	}
	p, err := strconv.Atoi(port)
	if err != nil {
		return nil, fmt.Errorf("broker %s: gossip address %q: port: %w", n.opts.ID, n.opts.Gossip, err)
	}
	if host, err = bindIP(ctx, host); err != nil {
		return nil, fmt.Errorf("broker %s: gossip address %q: %w", n.opts.ID, n.opts.Gossip, err)
	}
	meta := member.Meta{Cell: string(n.cell()), Role: n.role()}
	if a := n.BrokerAddr(); a != "" {
		meta.Addrs = append(meta.Addrs, member.Addr{Purpose: "broker", HostPort: a})
	}
	if a := n.ClientAddr(); a != "" {
		meta.Addrs = append(meta.Addrs, member.Addr{Purpose: "clients", HostPort: a})
	}
	ml, err := mlist.New(mlist.Config{
		ID:       n.self(),
		Meta:     meta,
		BindAddr: host, BindPort: p,
		Seeds:  n.opts.Seeds,
		Timing: n.opts.GossipTiming,
		OnView: func(c member.Change) { n.post(ctx, event{ctl: viewInstalled{c}}) },
	})
	if err != nil {
		return nil, fmt.Errorf("broker %s: membership: %w", n.opts.ID, err)
	}
	n.mu.Lock()
	n.ml = ml
	n.mu.Unlock()
	return ml, nil
}

// bindIP is the address memberlist binds and advertises for host: host
// itself when it is an IP, else what it resolves to, IPv4 first. A
// config may then name a broker's gossip address by the name its
// neighbours reach it by (a compose service, a DNS name) rather than by
// an IP that changes with every container.
func bindIP(ctx context.Context, host string) (string, error) {
	if host == "" || net.ParseIP(host) != nil {
		return host, nil
	}
	ips, err := net.DefaultResolver.LookupIPAddr(ctx, host)
	if err != nil {
		return "", fmt.Errorf("resolve %s: %w", host, err)
	}
	for _, ip := range ips {
		if ip.IP.To4() != nil {
			return ip.IP.String(), nil
		}
	}
	if len(ips) == 0 {
		return "", fmt.Errorf("resolve %s: no address", host)
	}
	return ips[0].IP.String(), nil
}

// self is this incarnation as membership names it: the boot nonce is the
// one the transport handshake sends, so a view's member and a connection's
// peer are comparable.
func (n *Node) self() member.ID {
	return member.ID{Broker: string(n.opts.ID), BootNonce: n.inc}
}

// cell is the cell this broker belongs to.
func (n *Node) cell() msg.NodeID {
	for c, ms := range n.opts.Cells {
		if slices.Contains(ms, n.opts.ID) {
			return c
		}
	}
	return n.opts.ID
}

// role is the broker's role for the membership metadata.
func (n *Node) role() string {
	switch {
	case len(n.hosted) > 0:
		return "phb"
	case n.opts.Clients != "":
		return "shb"
	}
	return "ib"
}

// GossipAddr is the membership address ("" without membership, or before
// Listening).
func (n *Node) GossipAddr() string {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.ml == nil {
		return ""
	}
	return n.ml.Addr()
}

// installView is the loop's side of an installed view: remember it for
// Status, log it, and close the links to neighbours it removed.
func (n *Node) installView(c member.Change) {
	n.view, n.hasView, n.change = c.View, true, c
	n.log.Info("membership view", "id", c.View.ID, "elder", c.View.Elder().ID.Name(), "members", len(c.View.Members),
		"joined", names(c.Joined), "crashed", names(c.Crashed), "left", names(c.Left), "dropped", names(c.Dropped))
	for _, set := range []struct {
		why string
		ms  []member.Member
	}{{"crashed", c.Crashed}, {"left", c.Left}, {"dropped", c.Dropped}} {
		for _, m := range set.ms {
			n.dropLink(m.ID, set.why, c.View.ID)
		}
	}
}

// dropLink closes the connection to the incarnation id, if it is the one
// connected, and tells the engine the link is down now rather than when
// the connection goroutine notices (the conn's own evPeerDown is then a
// replaced connection's leftover and ignored).
func (n *Node) dropLink(id member.ID, why string, view uint64) {
	peer := msg.NodeID(id.Broker)
	c := n.peers[peer]
	if c == nil || c.Peer.Incarnation != id.BootNonce {
		return // not a neighbour, not connected, or already a newer incarnation
	}
	reason := fmt.Sprintf("membership view %d: %s %s", view, id.Name(), why)
	c.CloseWith(errors.New(reason), reason)
	delete(n.peers, peer)
	n.log.Info("link down", "peer", string(peer), "err", reason)
	n.sh.PeerDown(peer)
	n.forwardLinkGone(peer)
	n.relayCheck(false)
}

func names(ms []member.Member) []string {
	if len(ms) == 0 {
		return nil
	}
	out := make([]string, len(ms))
	for i, m := range ms {
		out[i] = m.ID.Name()
	}
	return out
}

// runMembership runs ml until ctx ends (a graceful leave) or it is killed.
func (n *Node) runMembership(ctx context.Context, ml *mlist.Node, done chan<- struct{}) {
	defer close(done)
	switch err := ml.Run(ctx); {
	case err == nil:
	case ctx.Err() != nil:
		// Stopping: the leave may go unconfirmed when every peer stops at
		// once (aerie dev's Ctrl-C); they record a crash, nothing more.
		n.log.Info("membership left without confirmation", "err", err)
	default:
		n.log.Warn("membership stopped with an error", "err", err)
	}
}

// MembershipStatus is the broker's installed membership view.
type MembershipStatus struct {
	Self   string `json:"self"`
	Gossip string `json:"gossip"`
	// ViewID is 0 before the first view is installed.
	ViewID  uint64   `json:"view_id"`
	Elder   string   `json:"elder,omitempty"`
	Members []string `json:"members,omitempty"`
	// Joined, Crashed, Left and Dropped say how the view differs from the
	// one this broker installed before it (member.Change).
	Joined  []string `json:"joined,omitempty"`
	Crashed []string `json:"crashed,omitempty"`
	Left    []string `json:"left,omitempty"`
	Dropped []string `json:"dropped,omitempty"`
	// Quorate: this broker sees a majority of its view's brokers. False
	// before the first view and on the minority side of a partition: the
	// view is fenced (kept, and no new view made on this side) until
	// the partition heals. Reported only: routing does not depend on it.
	Quorate bool `json:"quorate"`
}

func (n *Node) membershipStatus() *MembershipStatus {
	if n.opts.Gossip == "" {
		return nil
	}
	s := &MembershipStatus{Self: n.self().Name(), Gossip: n.GossipAddr()}
	n.mu.Lock()
	ml := n.ml
	n.mu.Unlock()
	if ml != nil {
		s.Quorate = ml.Quorate()
	}
	if n.hasView {
		s.ViewID, s.Elder = n.view.ID, n.view.Elder().ID.Name()
		for _, m := range n.view.Members {
			s.Members = append(s.Members, m.ID.Name())
		}
		s.Joined, s.Crashed = names(n.change.Joined), names(n.change.Crashed)
		s.Left, s.Dropped = names(n.change.Left), names(n.change.Dropped)
	}
	return s
}
