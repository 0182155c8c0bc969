package mlist

import (
	"sync"

	"github.com/hashicorp/memberlist"

	"github.com/aerie-mq/aerie/internal/member"
)

// delegate receives memberlist's callbacks on memberlist's goroutines and
// queues them as view-layer inputs for the node's goroutine. The queue is
// unbounded so that memberlist is never blocked by a slow consumer.
type delegate struct {
	self member.ID
	meta []byte

	mu      sync.Mutex
	inputs  []member.Input
	nodes   map[member.ID]*memberlist.Node
	state   []byte // LocalState: our view, refreshed by the node's goroutine
	kick    chan struct{}
	dropped int
}

func newDelegate(self member.ID, meta []byte) *delegate {
	return &delegate{self: self, meta: meta, nodes: map[member.ID]*memberlist.Node{}, kick: make(chan struct{}, 1)}
}

func (d *delegate) push(in member.Input) {
	d.mu.Lock()
	d.inputs = append(d.inputs, in)
	d.mu.Unlock()
	select {
	case d.kick <- struct{}{}:
	default:
	}
}

func (d *delegate) take() []member.Input {
	d.mu.Lock()
	defer d.mu.Unlock()
	in := d.inputs
	d.inputs = nil
	return in
}

func (d *delegate) node(id member.ID) *memberlist.Node {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.nodes[id]
}

// Delegate: metadata, messages, state exchange.

func (d *delegate) NodeMeta(limit int) []byte { return d.meta }

// NotifyMsg: a view-layer message, framed by frame().
func (d *delegate) NotifyMsg(b []byte) {
	from, m, err := unframe(b)
	if err != nil {
		d.mu.Lock()
		d.dropped++
		d.mu.Unlock()
		return
	}
	d.push(member.Recv{From: from, Msg: m})
}

func (d *delegate) GetBroadcasts(overhead, limit int) [][]byte { return nil }

// LocalState hands a joiner our view (push/pull on join and periodically):
// that is how a member joining through a seed learns the current view.
func (d *delegate) LocalState(join bool) []byte {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.state
}

func (d *delegate) MergeRemoteState(buf []byte, join bool) {
	if len(buf) > 0 {
		d.NotifyMsg(buf)
	}
}

func (d *delegate) setState(b []byte) {
	d.mu.Lock()
	d.state = b
	d.mu.Unlock()
}

// EventDelegate: the failure detector's verdicts.

func (d *delegate) NotifyJoin(n *memberlist.Node)   { d.alive(n) }
func (d *delegate) NotifyUpdate(n *memberlist.Node) { d.alive(n) }

func (d *delegate) alive(n *memberlist.Node) {
	id, err := member.ParseName(n.Name)
	if err != nil || id == d.self {
		return
	}
	meta, err := member.DecodeMeta(n.Meta)
	if err != nil {
		return // not one of ours
	}
	cp := *n
	d.mu.Lock()
	d.nodes[id] = &cp
	d.mu.Unlock()
	d.push(member.Alive{Member: member.Member{ID: id, Meta: meta}})
}

// NotifyLeave is called for both graceful leaves and deaths; memberlist
// marks a node that announced its own departure StateLeft.
func (d *delegate) NotifyLeave(n *memberlist.Node) {
	id, err := member.ParseName(n.Name)
	if err != nil || id == d.self {
		return
	}
	d.mu.Lock()
	delete(d.nodes, id)
	d.mu.Unlock()
	if n.State == memberlist.StateLeft {
		d.push(member.Departed{ID: id})
	} else {
		d.push(member.Failed{ID: id})
	}
}

// frame prefixes a message with the sender's name: memberlist does not
// tell NotifyMsg who sent it.
func frame(from member.ID, m member.Message) []byte {
	name := from.Name()
	body := m.Encode()
	b := make([]byte, 0, 2+len(name)+len(body))
	b = append(b, byte(len(name)>>8), byte(len(name)))
	b = append(b, name...)
	return append(b, body...)
}

func unframe(b []byte) (member.ID, member.Message, error) {
	if len(b) < 2 {
		return member.ID{}, member.Message{}, member.ErrBadMessage
	}
	n := int(b[0])<<8 | int(b[1])
	if len(b) < 2+n {
		return member.ID{}, member.Message{}, member.ErrBadMessage
	}
	id, err := member.ParseName(string(b[2 : 2+n]))
	if err != nil {
		return member.ID{}, member.Message{}, err
	}
	m, err := member.DecodeMessage(b[2+n:])
	return id, m, err
}
