package node

import (
	"math/rand/v2"
	"slices"
	"testing"

	"go.etcd.io/raft/v3/raftpb"
	"google.golang.org/protobuf/proto"

	"github.com/aerie-mq/aerie/internal/eventlog"
	"github.com/aerie-mq/aerie/internal/gd"
	"github.com/aerie-mq/aerie/internal/msg"
	"github.com/aerie-mq/aerie/internal/raftphb"
	"github.com/aerie-mq/aerie/internal/tick"
	"github.com/aerie-mq/aerie/internal/vfs"
)

// firstsShell records the batches the node reports persisted.
type firstsShell struct{ firsts []uint64 }

func (s *firstsShell) Persisted(first uint64, err error) error {
	if err != nil {
		return err
	}
	s.firsts = append(s.firsts, first)
	return nil
}
func (s *firstsShell) Fetched(gd.Fetched)            {}
func (s *firstsShell) Trimmed(uint64, uint64, error) {}

// handCell is three members whose messages, Readies and fsyncs the test
// carries out one by one.
type handCell struct {
	t     *testing.T
	nodes map[uint64]*Node
	queue []*raftpb.Message
}

func newHandCell(t *testing.T) *handCell {
	c := &handCell{t: t, nodes: map[uint64]*Node{}}
	rng := rand.New(rand.NewPCG(7, 7))
	for slot := uint64(1); slot <= 3; slot++ {
		nd, err := Open(Config{Replica: raftphb.Config{ID: slot, Peers: []uint64{1, 2, 3}, Jitter: rng.IntN},
			FS: vfs.NewMem(), Dir: "/data", LogOptions: eventlog.Options{SegmentBytes: 2 << 10},
			Send: func(m *raftpb.Message) { c.queue = append(c.queue, proto.Clone(m).(*raftpb.Message)) }})
		if err != nil {
			t.Fatal(err)
		}
		c.nodes[slot] = nd
	}
	return c
}

// deliver steps every queued message at its receiver.
func (c *handCell) deliver() {
	for len(c.queue) > 0 {
		m := c.queue[0]
		c.queue = c.queue[1:]
		if nd := c.nodes[raftphb.Slot(m.GetTo())]; nd != nil {
			if err := nd.Step(m); err != nil {
				c.t.Fatal(err)
			}
		}
	}
}

// work writes and syncs each of nd's Readies until it has none.
func (c *handCell) work(nd *Node) {
	for {
		ok, err := nd.Write()
		if err != nil {
			c.t.Fatal(err)
		}
		if !ok {
			return
		}
		if err := nd.Sync(); err != nil {
			c.t.Fatal(err)
		}
	}
}

// elect ticks the cell until a member serves, and returns it.
func (c *handCell) elect() *Node {
	for range 1000 {
		for slot := uint64(1); slot <= 3; slot++ {
			nd := c.nodes[slot]
			nd.Tick()
			c.work(nd)
			for _, ev := range nd.Events() {
				if ev.Kind == EventServe {
					c.deliver()
					return nd
				}
			}
		}
		c.deliver()
	}
	c.t.Fatal("no member serves after 1000 ticks")
	return nil
}

// TestLeaderAppliesBeforeNextFsync: a batch that a majority holds is
// applied, and its proposer told, once the leader writes its next Ready,
// not after that Ready's fsync (applyDurable): a commit costs one fsync
// cycle of the leader, not two.
func TestLeaderAppliesBeforeNextFsync(t *testing.T) {
	c := newHandCell(t)
	lead := c.elect()
	var followers []*Node
	for _, nd := range c.nodes {
		if nd != lead {
			followers = append(followers, nd)
		}
	}
	sh := &firstsShell{}
	lead.Attach(sh)
	batch := func(v uint64) []msg.Record { return []msg.Record{{Pubend: "P1", HWM: tick.Tick(v)}} }

	lead.Append(batch(1)) // A
	a := lead.outs[0].first
	c.work(lead) // written, its appends sent, fsynced
	c.deliver()
	for _, f := range followers {
		c.work(f) // each holds A durably; its ack is queued
	}
	lead.Append(batch(2)) // B
	if ok, err := lead.Write(); !ok || err != nil {
		t.Fatalf("writing B: %v, %v", ok, err)
	}
	c.deliver()           // the acks of A reach the leader while B's fsync runs
	lead.Append(batch(3)) // C, proposed meanwhile
	if err := lead.Sync(); err != nil {
		t.Fatal(err)
	}
	if len(sh.firsts) != 0 {
		t.Fatalf("persisted %v before A's commit reached a Ready", sh.firsts)
	}
	// The next Ready carries C's entry (to fsync) and A's commit.
	if ok, err := lead.Write(); !ok || err != nil {
		t.Fatalf("writing C: %v, %v", ok, err)
	}
	if !lead.NeedsSync() {
		t.Fatal("the Ready with C's entry needs no fsync")
	}
	if !slices.Equal(sh.firsts, []uint64{a}) {
		t.Fatalf("after writing C's Ready, persisted %v, want [%d] (A, committed and in the leader's synced log)", sh.firsts, a)
	}
	if err := lead.Sync(); err != nil {
		t.Fatal(err)
	}
	if lead.flow.EarlyApplied == 0 {
		t.Fatal("Flow.EarlyApplied counts no early batch")
	}
}
