package raftphb

// Golden interaction tests in the style of etcd raft's (and
// internal/gd/interaction_test.go): a cell of replicas in memory, each with
// a "disk" holding exactly what it persisted, and per-link FIFO queues that
// deliver only when a command says so. `go test ./internal/raftphb -run
// TestInteraction -rewrite` regenerates the expected outputs.
//
// Commands:
//
//	cell n=N [seed=S]     replicas 1..N (election ticks 10, heartbeat 1)
//	campaign ID           the replica starts an election now
//	peerdown ID from=S    the replica's link to the member of slot S
//	                      closed (Replica.PeerDown): prints whether it
//	                      campaigns
//	tick ID... [n=K]      K ticks (default 1) to each named replica
//	propose ID hwm=T,T..  a batch of HWM records of pubend P1
//	process ID...         carry out one Ready of each named replica:
//	                      persist, print, queue its messages, Advance
//	deliver [A->B]        deliver every queued message (or those of one link)
//	drop A->B             discard the messages queued on a link
//	isolate ID / heal     while isolated, messages to and from ID are lost
//	                      when delivered
//	stabilize             process and deliver until nothing is left
//	crash ID              the replica loses its memory and its queued
//	                      messages; restart rebuilds it from its disk
//	restart ID
//	wipe ID               crash ID, empty its disk and restart it
//	peers ID... slots=(S,S) the named replicas' cell becomes these slots
//	                      (SetPeers: a member added or removed)
//	conf ID...            the replica's Raft configuration
//	status                every replica's view
//	log ID                the pubend log the replica applied

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/cockroachdb/datadriven"
	"go.etcd.io/raft/v3"
	"go.etcd.io/raft/v3/raftpb"
	"google.golang.org/protobuf/proto"

	"github.com/aerie-mq/aerie/internal/msg"
	"github.com/aerie-mq/aerie/internal/tick"
)

func TestInteraction(t *testing.T) {
	datadriven.Walk(t, "testdata", func(t *testing.T, path string) {
		if !strings.HasSuffix(path, ".txt") {
			return
		}
		var h *harness
		datadriven.RunTest(t, path, func(t *testing.T, d *datadriven.TestData) string {
			if d.Cmd != "cell" && h == nil {
				t.Fatalf("%s: no cell yet", d.Pos)
			}
			var b strings.Builder
			if err := h.run(t, d, &b); err != nil {
				fmt.Fprintf(&b, "error: %v\n", err)
			}
			if d.Cmd == "cell" {
				h = cellHarness
			}
			return b.String()
		})
	})
}

var cellHarness *harness

type disk struct {
	hs   *raftpb.HardState
	ents []*raftpb.Entry
}

func (d *disk) save(rd Ready) {
	if len(rd.Entries) > 0 {
		first := rd.Entries[0].GetIndex()
		d.ents = d.ents[:min(uint64(len(d.ents)), first-1)]
		for _, e := range rd.Entries {
			d.ents = append(d.ents, proto.Clone(e).(*raftpb.Entry))
		}
	}
	if rd.HardState != nil {
		d.hs = proto.Clone(rd.HardState).(*raftpb.HardState)
	}
}

type harness struct {
	n     int
	rng   *rand.Rand
	reps  map[uint64]*Replica
	disks map[uint64]*disk
	logs  map[uint64][]msg.Record
	queue map[[2]uint64][]*raftpb.Message
	cut   uint64 // the isolated replica
}

func (h *harness) cfg(id uint64) Config {
	peers := make([]uint64, h.n)
	for i := range peers {
		peers[i] = uint64(i + 1)
	}
	return Config{ID: id, Peers: peers, Jitter: h.rng.IntN}
}

func (h *harness) start(id uint64) error {
	d := h.disks[id]
	r, err := New(h.cfg(id), Restored{HardState: d.hs, Entries: d.ents})
	if err != nil {
		return err
	}
	h.reps[id] = r
	h.logs[id] = nil
	return nil
}

func ids(d *datadriven.TestData) []uint64 {
	var out []uint64
	for _, a := range d.CmdArgs {
		if a.Key == "n" || len(a.Vals) > 0 {
			continue
		}
		id, err := strconv.ParseUint(a.Key, 10, 64)
		if err == nil {
			out = append(out, id)
		}
	}
	return out
}

// uints returns the values of argument key, as numbers.
func uints(d *datadriven.TestData, key string) ([]uint64, error) {
	var out []uint64
	for _, a := range d.CmdArgs {
		if a.Key != key {
			continue
		}
		for _, v := range a.Vals {
			x, err := strconv.ParseUint(v, 10, 64)
			if err != nil {
				return nil, fmt.Errorf("%s=%s: %w", key, v, err)
			}
			out = append(out, x)
		}
	}
	return out, nil
}

func link(s string) ([2]uint64, error) {
	a, b, ok := strings.Cut(s, "->")
	if !ok {
		return [2]uint64{}, fmt.Errorf("link %q: want A->B", s)
	}
	x, err1 := strconv.ParseUint(a, 10, 64)
	y, err2 := strconv.ParseUint(b, 10, 64)
	if err1 != nil || err2 != nil {
		return [2]uint64{}, fmt.Errorf("link %q: want A->B", s)
	}
	return [2]uint64{x, y}, nil
}

func (h *harness) run(t *testing.T, d *datadriven.TestData, b *strings.Builder) error {
	switch d.Cmd {
	case "cell":
		n, seed := 3, uint64(1)
		d.MaybeScanArgs(t, "n", &n)
		d.MaybeScanArgs(t, "seed", &seed)
		cellHarness = &harness{n: n, rng: rand.New(rand.NewPCG(seed, seed)), reps: map[uint64]*Replica{},
			disks: map[uint64]*disk{}, logs: map[uint64][]msg.Record{}, queue: map[[2]uint64][]*raftpb.Message{}}
		for id := uint64(1); id <= uint64(n); id++ {
			cellHarness.disks[id] = &disk{}
			if err := cellHarness.start(id); err != nil {
				return err
			}
		}
		return nil
	case "campaign":
		for _, id := range ids(d) {
			h.reps[id].Campaign()
		}
	case "peerdown":
		var from uint64
		d.ScanArgs(t, "from", &from)
		for _, id := range ids(d) {
			if h.reps[id].PeerDown(from) {
				fmt.Fprintf(b, "%d: campaigns\n", id)
			} else {
				fmt.Fprintf(b, "%d: no campaign\n", id)
			}
		}
	case "tick":
		k := 1
		d.MaybeScanArgs(t, "n", &k)
		for range k {
			for _, id := range ids(d) {
				h.reps[id].Tick()
			}
		}
	case "propose":
		id := ids(d)[0]
		hwms, err := uints(d, "hwm")
		if err != nil {
			return err
		}
		var recs []msg.Record
		for _, x := range hwms {
			recs = append(recs, msg.Record{Pubend: "P1", HWM: tick.Tick(x)})
		}
		first, err := h.reps[id].Propose(recs)
		if err != nil {
			return err
		}
		fmt.Fprintf(b, "%d: proposed at %d\n", id, first)
	case "process":
		for _, id := range ids(d) {
			h.process(id, b)
		}
	case "deliver":
		if len(d.CmdArgs) == 1 {
			l, err := link(d.CmdArgs[0].Key)
			if err != nil {
				return err
			}
			h.deliver(l, b)
			return nil
		}
		h.deliverAll(b)
	case "drop":
		l, err := link(d.CmdArgs[0].Key)
		if err != nil {
			return err
		}
		fmt.Fprintf(b, "dropped %d\n", len(h.queue[l]))
		delete(h.queue, l)
	case "stabilize":
		for {
			busy := false
			for _, id := range h.sorted() {
				if r := h.reps[id]; r != nil && r.HasReady() {
					h.process(id, b)
					busy = true
				}
			}
			if len(h.queue) > 0 {
				h.deliverAll(b)
				busy = true
			}
			if !busy {
				return nil
			}
		}
	case "isolate":
		h.cut = ids(d)[0]
	case "heal":
		h.cut = 0
	case "crash":
		for _, id := range ids(d) {
			h.reps[id] = nil
			for l := range h.queue {
				if l[0] == id || l[1] == id {
					delete(h.queue, l)
				}
			}
		}
	case "wipe":
		for _, id := range ids(d) {
			h.reps[id] = nil
			for l := range h.queue {
				if l[0] == id || l[1] == id {
					delete(h.queue, l)
				}
			}
			h.disks[id] = &disk{}
			if err := h.start(id); err != nil {
				return err
			}
		}
	case "restart":
		for _, id := range ids(d) {
			if err := h.start(id); err != nil {
				return err
			}
		}
	case "peers":
		slots, err := uints(d, "slots")
		if err != nil {
			return err
		}
		for _, id := range ids(d) {
			if err := h.reps[id].SetPeers(slots); err != nil {
				return err
			}
		}
	case "conf":
		for _, id := range ids(d) {
			c := h.reps[id].Status().Conf
			fmt.Fprintf(b, "%d: voters=%v learners=%v\n", id, c.GetVoters(), c.GetLearners())
		}
	case "status":
		for _, id := range h.sorted() {
			r := h.reps[id]
			if r == nil {
				fmt.Fprintf(b, "%d: down\n", id)
				continue
			}
			s := r.Status()
			awaiting := ""
			if missing, ok := r.Awaiting(); ok && r.lost == nil {
				awaiting = fmt.Sprintf(" awaiting=%v", missing)
			}
			lost := ""
			if r.lost != nil {
				lost = fmt.Sprintf(" lost(rejoin as %d)", MemberID(Slot(r.lost.ID), r.lost.Gen))
			}
			fmt.Fprintf(b, "%d: %v term=%d lead=%d serving=%v applied=%d next=%d%s%s\n", id, s.State, s.Term, s.Lead, s.Serving, s.Applied, s.Next, awaiting, lost)
		}
	case "log":
		for _, id := range ids(d) {
			fmt.Fprintf(b, "%d:", id)
			for i, r := range h.logs[id] {
				fmt.Fprintf(b, " %d:hwm%d", i, r.HWM)
			}
			b.WriteString("\n")
		}
	default:
		return fmt.Errorf("unknown command %q", d.Cmd)
	}
	return nil
}

func (h *harness) sorted() []uint64 {
	out := make([]uint64, 0, len(h.reps))
	for id := range h.reps {
		out = append(out, id)
	}
	slices.Sort(out)
	return out
}

func fmtBatch(data []byte) string {
	if len(data) == 0 {
		return "(empty: the leader's first entry of its term)"
	}
	if s := DescribeState(data); s != "" {
		return s
	}
	first, recs, err := DecodeBatch(data)
	if err != nil {
		return "?" + err.Error()
	}
	var s []string
	for _, r := range recs {
		s = append(s, fmt.Sprintf("hwm%d", r.HWM))
	}
	return fmt.Sprintf("@%d[%s]", first, strings.Join(s, " "))
}

func (h *harness) process(id uint64, b *strings.Builder) {
	r := h.reps[id]
	if r == nil || !r.HasReady() {
		return
	}
	rd := r.Ready()
	fmt.Fprintf(b, "> %d handling Ready\n", id)
	if rd.HardState != nil {
		fmt.Fprintf(b, "  HardState %s\n", raft.DescribeHardState(rd.HardState))
	}
	for _, e := range rd.Entries {
		fmt.Fprintf(b, "  persist %s\n", raft.DescribeEntry(e, fmtBatch))
	}
	h.disks[id].save(rd)
	for _, ba := range rd.Apply {
		var s []string
		recs, err := ba.Records()
		if err != nil {
			fmt.Fprintf(b, "  ERROR: %v\n", err)
		}
		for _, r := range recs {
			s = append(s, fmt.Sprintf("hwm%d", r.HWM))
		}
		mine := ""
		if ba.Mine {
			mine = " mine: ack"
		}
		fmt.Fprintf(b, "  apply entry %d/%d at %d [%s]%s\n", ba.Term, ba.Index, ba.First, strings.Join(s, " "), mine)
		if uint64(len(h.logs[id])) != ba.First {
			fmt.Fprintf(b, "  ERROR: applied log ends at %d\n", len(h.logs[id]))
		}
		h.logs[id] = append(h.logs[id], recs...)
	}
	if rd.Lost != nil {
		fmt.Fprintf(b, "  LOST leadership of term %d, failing %v\n", rd.Lost.Term, rd.Lost.Pending)
	}
	if rd.Serve != nil {
		fmt.Fprintf(b, "  SERVE term %d from entry %d, pubend log next %d\n", rd.Serve.Term, rd.Serve.Index, rd.Serve.Next)
	}
	for _, m := range rd.Messages {
		l := [2]uint64{m.GetFrom(), m.GetTo()}
		h.queue[l] = append(h.queue[l], proto.Clone(m).(*raftpb.Message))
	}
	r.Advance()
}

func (h *harness) deliver(l [2]uint64, b *strings.Builder) {
	ms := h.queue[l]
	delete(h.queue, l)
	if h.cut != 0 && (l[0] == h.cut || l[1] == h.cut) {
		fmt.Fprintf(b, "%d->%d: %d messages lost\n", l[0], l[1], len(ms))
		return
	}
	for _, m := range ms {
		fmt.Fprintf(b, "%s\n", raft.DescribeMessage(m, fmtBatch))
		if r := h.reps[l[1]]; r != nil {
			if err := r.Step(m); err != nil {
				fmt.Fprintf(b, "  step: %v\n", err)
			}
		}
	}
}

func (h *harness) deliverAll(b *strings.Builder) {
	links := make([][2]uint64, 0, len(h.queue))
	for l := range h.queue {
		links = append(links, l)
	}
	slices.SortFunc(links, func(x, y [2]uint64) int {
		if x[0] != y[0] {
			return int(x[0]) - int(y[0])
		}
		return int(x[1]) - int(y[1])
	})
	for _, l := range links {
		h.deliver(l, b)
	}
}
