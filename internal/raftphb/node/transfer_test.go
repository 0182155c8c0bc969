package node

import (
	"encoding/binary"
	"errors"
	"hash/crc32"
	"os"
	"slices"
	"strconv"
	"strings"
	"testing"

	"go.etcd.io/raft/v3/raftpb"
	"google.golang.org/protobuf/proto"

	"github.com/aerie-mq/aerie/internal/eventlog"
	"github.com/aerie-mq/aerie/internal/msg"
	"github.com/aerie-mq/aerie/internal/raftphb"
	"github.com/aerie-mq/aerie/internal/vfs"
	"github.com/aerie-mq/aerie/internal/wire"
)

// Chunked snapshot transfers (transfer.go) in the cell harness: chunks far
// smaller than the store images, so that every snapshot is many chunks.

// chunkedCompaction compacts often and cuts snapshots into 64-byte
// chunks: the harness's images (a few KiB) are tens to hundreds of them.
var chunkedCompaction = Compaction{Every: 8, Retain: 2, ChunkBytes: 64, ChunkWindow: 3}

// sendChunk carries a chunk message through the wire codec to its member,
// in order between two members (a TCP link), lost like any message.
func (c *cell) sendChunk(from *member, inc int, to uint64, m msg.Msg) {
	if from.inc != inc || (c.chunkHook != nil && !c.chunkHook(from, m)) || c.rng.Float64() < c.f.loss {
		return
	}
	frame, err := wire.AppendFrame(nil, m)
	if err != nil {
		c.failf("member %d: encode %v: %v", from.id, m, err)
		return
	}
	dst := c.member(to)
	if c.chunkAt == nil {
		c.chunkAt = map[[2]uint64]int{}
	}
	key := [2]uint64{from.id, dst.id}
	at := max(c.now+1+c.rng.IntN(max(1, c.f.maxDelay)), c.chunkAt[key])
	c.chunkAt[key] = at
	fromID := from.id
	c.at(at-c.now, func() {
		if c.cut[fromID] != c.cut[dst.id] || dst.node == nil {
			return
		}
		got, err := wire.Decode(frame[4:])
		if err != nil {
			c.failf("member %d: decode a chunk message: %v", dst.id, err)
			return
		}
		switch v := got.(type) {
		case msg.RaftChunk:
			err = dst.node.StepChunk(v)
		case msg.RaftChunkAck:
			err = dst.node.StepChunkAck(v)
		}
		if errors.Is(err, ErrChunkBad) {
			c.failf("member %d: %v", dst.id, err)
		}
		c.work(dst)
	})
}

// transferred checks that the run moved snapshots in many chunks.
func (c *cell) transferred(t *testing.T, what string) {
	t.Helper()
	x := c.stats.Transfers
	if x.Received == 0 || x.ChunksReceived < 10*x.Received {
		t.Fatalf("%s: %s: no snapshot of many chunks received", what, c.statsReport())
	}
}

// TestCellSwarmChunked is the compacting swarm (crashes, leader crashes,
// partitions, loss, delay, failed fsyncs, wiped disks) with every
// snapshot cut into many chunks: the checker's rules hold, and snapshots
// do arrive.
func TestCellSwarmChunked(t *testing.T) {
	seeds := uint64(10)
	if s, err := strconv.ParseUint(os.Getenv("RAFTPHB_SEEDS"), 10, 64); err == nil {
		seeds = s
	}
	if testing.Short() {
		seeds = 4
	}
	f := swarm
	f.wipes = true
	for _, n := range []int{3, 5} {
		var sum Stats
		for seed := uint64(1); seed <= seeds; seed++ {
			c := newCell(t, n, seed, f)
			c.compaction = chunkedCompaction
			c.run(6000, 4000)
			if len(c.errs) > 0 {
				t.Fatalf("%d members, seed %d: %s\n%s; %s", n, seed, c.errs[0], c.report(), c.statsReport())
			}
			if len(c.acks) == 0 {
				t.Fatalf("%d members, seed %d: nothing acked (%s)", n, seed, c.report())
			}
			sum.Transfers.Received += c.stats.Transfers.Received
			sum.Transfers.ChunksReceived += c.stats.Transfers.ChunksReceived
			sum.Transfers.Abandoned += c.stats.Transfers.Abandoned
			sum.SnapshotsInstalled += c.stats.SnapshotsInstalled
			sum.Rejoins += c.stats.Rejoins
			if seed == 1 {
				t.Logf("%d members, seed 1: %s; %s", n, c.report(), c.statsReport())
			}
		}
		t.Logf("%d members, %d seeds: %d chunked snapshots received (%d chunks), %d abandoned, %d installed, %d rejoins",
			n, seeds, sum.Transfers.Received, sum.Transfers.ChunksReceived, sum.Transfers.Abandoned, sum.SnapshotsInstalled, sum.Rejoins)
		c := &cell{stats: sum}
		c.transferred(t, strconv.Itoa(n)+" members")
		if sum.Rejoins == 0 {
			t.Fatalf("%d members: no wiped member rejoined", n)
		}
	}
}

// TestLaggingMemberCatchesUpByChunks: a member down while the others
// compact comes back and catches up from a snapshot of many chunks,
// while the others keep publishing (downFor checks both, and every acked
// batch in every store at the end).
func TestLaggingMemberCatchesUpByChunks(t *testing.T) {
	for seed := uint64(1); seed <= 5; seed++ {
		c := newCell(t, 3, seed, faults{maxDelay: 4, diskMs: 2})
		c.compaction = chunkedCompaction
		m := c.member(3)
		acksAtBack := 0
		c.at(500, func() { c.crash(m) })
		c.at(3000, func() { acksAtBack = len(c.acks); c.restart(m) })
		c.run(6000, 3000)
		if len(c.errs) > 0 {
			t.Fatalf("seed %d: %s\n%s; %s", seed, c.errs[0], c.report(), c.statsReport())
		}
		if len(c.acks) <= acksAtBack {
			t.Fatalf("seed %d: no batch acked after member 3 came back", seed)
		}
		c.transferred(t, "seed "+strconv.Itoa(int(seed)))
	}
}

// TestWipedMemberRejoinsByChunks: a follower loses its disk after the
// cell's store has grown to many chunks; it rejoins as a new member,
// catches up from the chunked image, is promoted, and at the end holds
// every acked batch; publishing goes on meanwhile. Chunks are lost now
// and then on the way.
func TestWipedMemberRejoinsByChunks(t *testing.T) {
	for _, n := range []int{3, 5} {
		for seed := uint64(1); seed <= 5; seed++ {
			c := newCell(t, n, seed, faults{maxDelay: 4, diskMs: 2})
			c.compaction = chunkedCompaction
			dropped := 0
			c.chunkHook = func(_ *member, m msg.Msg) bool {
				if _, ok := m.(msg.RaftChunk); ok && c.rng.IntN(20) == 0 {
					dropped++
					return false
				}
				return true
			}
			var w *member
			acksAtWipe := 0
			c.at(2000, func() {
				w = c.follower()
				acksAtWipe = len(c.acks)
				c.wipe(w)
				c.at(100, func() { c.restart(w) })
			})
			c.at(5000, func() {
				if got, want := c.voters(), c.currentVoters(); !slices.Equal(got, want) || raftphb.Gen(w.node.ID()) == 0 {
					for _, m := range c.ms {
						if m.node != nil {
							c.tally(m.node)
						}
					}
					c.failf("3 s after the wipe the leader's voters are %v, want %v with member %d of a later generation\n%s", got, want, w.id, c.states())
				}
				if len(c.acks) == acksAtWipe {
					c.failf("nothing acked while member %d rejoined", w.id)
				}
			})
			c.run(6000, 2000)
			if len(c.errs) > 0 {
				t.Fatalf("%d members, seed %d: %s\n%s; %s\n%s", n, seed, c.errs[0], c.report(), c.statsReport(), strings.Join(c.rejoinLog, "\n"))
			}
			if c.stats.Rejoins == 0 || dropped == 0 {
				t.Fatalf("%d members, seed %d: %d rejoins, %d chunks dropped", n, seed, c.stats.Rejoins, dropped)
			}
			c.transferred(t, strconv.Itoa(n)+" members, seed "+strconv.Itoa(int(seed)))
		}
	}
}

// TestNoSnapshotAfterSnapshot: with nothing lost, a wiped member that
// rejoins from a chunked transfer catches up from the log once it has
// installed it: the leader's compaction waits for it (the hold), though
// the cell commits on during the transfer and the member's admission made
// the leader compact right up to its applied index. Any later transfer to
// it (this harness reorders messages, so the member may fall behind
// again) starts only after it caught up past the previous one.
func TestNoSnapshotAfterSnapshot(t *testing.T) {
	for _, n := range []int{3, 5} {
		for seed := uint64(1); seed <= 5; seed++ {
			c := newCell(t, n, seed, faults{maxDelay: 4, diskMs: 2})
			c.compaction = chunkedCompaction
			var w *member
			var last uint64 // the previous transfer's snapshot index
			c.chunkHook = func(from *member, m msg.Msg) bool {
				ch, ok := m.(msg.RaftChunk)
				if !ok || ch.Offset != 0 || w == nil || raftphb.Slot(ch.To) != w.id {
					return true
				}
				if match := from.node.rep.Match(ch.To); last != 0 && match <= last {
					c.failf("member %d is sent a snapshot at %d while it holds %d, not past the previous one at %d", ch.To, ch.Index, match, last)
				}
				last = ch.Index
				return true
			}
			c.at(2000, func() {
				w = c.follower()
				c.wipe(w)
				c.at(100, func() { c.restart(w) })
			})
			c.run(6000, 2000)
			if len(c.errs) > 0 {
				t.Fatalf("%d members, seed %d: %s\n%s; %s", n, seed, c.errs[0], c.report(), c.statsReport())
			}
			if c.stats.Rejoins != 1 || last == 0 {
				t.Fatalf("%d members, seed %d: %d rejoins, no transfer (%s)", n, seed, c.stats.Rejoins, c.statsReport())
			}
		}
	}
}

// TestLeaderCrashMidTransfer: the leader crashes halfway through sending
// a snapshot of many chunks. The receiver installs nothing of it (its
// store and Raft log stay as they were), removes its staged bytes after
// four election timeouts of silence, and catches up from the next
// leader's transfer.
func TestLeaderCrashMidTransfer(t *testing.T) {
	for seed := uint64(1); seed <= 5; seed++ {
		c := newCell(t, 3, seed, faults{maxDelay: 4, diskMs: 2})
		c.compaction = chunkedCompaction
		m := c.member(3)
		var crashed *member
		chunks := 0
		var before uint64
		c.chunkHook = func(from *member, cm msg.Msg) bool {
			ch, ok := cm.(msg.RaftChunk)
			if !ok || crashed != nil || ch.To != m.node.ID() {
				return true
			}
			if chunks++; chunks < 8 {
				return true
			}
			// The eighth chunk never leaves: its sender crashes.
			crashed = from
			_, before = m.node.store.Bounds()
			c.crash(from)
			c.at(300, func() { c.restart(from) })
			c.at(2*tickMs*10, func() { // two election timeouts later
				if _, err := m.fs.Stat("/data/" + stagingFile); err != nil {
					c.failf("no staged transfer while it is abandoned: %v", err)
				}
				if _, next := m.node.store.Bounds(); next != before || m.node.snapshotsInstalled != 0 {
					c.failf("member 3 installed part of a transfer: store at %d (was %d), %d installed", next, before, m.node.snapshotsInstalled)
				}
			})
			return false
		}
		c.at(500, func() { c.crash(m) })
		c.at(2500, func() { c.restart(m) })
		c.run(6000, 3000)
		if len(c.errs) > 0 {
			t.Fatalf("seed %d: %s\n%s; %s", seed, c.errs[0], c.report(), c.statsReport())
		}
		if crashed == nil || c.stats.Transfers.Abandoned == 0 {
			t.Fatalf("seed %d: no transfer cut short (%s)", seed, c.statsReport())
		}
		if _, err := m.fs.Stat("/data/" + stagingFile); err == nil {
			t.Fatalf("seed %d: the staging file is left over", seed)
		}
		c.transferred(t, "seed "+strconv.Itoa(int(seed)))
	}
}

// chunkNode opens a lone member 2 of a cell of 3 that records the acks it
// sends.
func chunkNode(t *testing.T) (*Node, *[]msg.Msg, *vfs.MemFS) {
	t.Helper()
	fsys := vfs.NewMem()
	var sent []msg.Msg
	nd, err := Open(Config{
		Replica: raftphb.Config{ID: 2, Peers: []uint64{1, 2, 3}, Jitter: func(int) int { return 0 }}, FS: fsys, Dir: "/data",
		LogOptions: eventlog.Options{SegmentBytes: 2 << 10},
		Send:       func(*raftpb.Message) {},
		SendChunk:  func(_ uint64, m msg.Msg) { sent = append(sent, m) },
		Compaction: Compaction{ChunkBytes: 8, MaxSnapshotBytes: 1 << 10},
	})
	if err != nil {
		t.Fatal(err)
	}
	return nd, &sent, fsys
}

func chunk(from, seq uint64, off uint64, last bool, data []byte) msg.RaftChunk {
	return msg.RaftChunk{From: from, To: 2, Seq: seq, Term: 5, Index: 40, Offset: off, Last: last,
		CRC: crc32.Checksum(data, castagnoli), Data: data}
}

// TestBadChunksAreDropped: chunks that cannot be right, or that belong to
// no transfer under way, are dropped with a counter and an error; none
// crashes the member or installs anything.
func TestBadChunksAreDropped(t *testing.T) {
	nd, sent, fsys := chunkNode(t)
	good := []byte("12345678")
	bad := chunk(1, 1, 0, false, good)
	bad.CRC ^= 1
	for _, c := range []struct {
		name string
		c    msg.RaftChunk
		want error
	}{
		{"unknown transfer", chunk(1, 1, 8, false, good), ErrChunkStale},
		{"checksum", bad, ErrChunkBad},
		{"absurd size", chunk(1, 1, 0, false, make([]byte, 1025)), ErrChunkBad},
		{"for another member", func() msg.RaftChunk { c := chunk(1, 1, 0, false, good); c.To = 3; return c }(), ErrChunkStale},
	} {
		if err := nd.StepChunk(c.c); !errors.Is(err, c.want) {
			t.Errorf("%s: %v, want %v", c.name, err, c.want)
		}
	}
	if _, err := fsys.Stat("/data/" + stagingFile); err == nil || nd.xfer.in != nil || len(*sent) != 0 {
		t.Fatalf("a dropped chunk left a transfer (%v) or was answered: %v", err, *sent)
	}
	// A transfer under way: a chunk out of order is dropped and answered
	// with where the member stands; one that changes the snapshot too.
	if err := nd.StepChunk(chunk(1, 1, 0, false, good)); err != nil {
		t.Fatal(err)
	}
	if err := nd.StepChunk(chunk(1, 1, 16, false, good)); !errors.Is(err, ErrChunkStale) {
		t.Fatalf("out of order: %v", err)
	}
	if got := (*sent)[len(*sent)-1].(msg.RaftChunkAck); got.Next != 8 {
		t.Fatalf("ack after a gap: %v, want next 8", got)
	}
	other := chunk(1, 1, 8, false, good)
	other.Index = 41
	if err := nd.StepChunk(other); !errors.Is(err, ErrChunkBad) {
		t.Fatalf("changed snapshot: %v", err)
	}
	// Completed, it is not a transfer: refused, nothing installed, the
	// staged bytes gone.
	if err := nd.StepChunk(chunk(1, 1, 8, false, good)); err != nil {
		t.Fatal(err)
	}
	if err := nd.StepChunk(chunk(1, 1, 16, true, good)); !errors.Is(err, ErrChunkBad) {
		t.Fatalf("a whole transfer of garbage: %v", err)
	}
	if _, err := fsys.Stat("/data/" + stagingFile); err == nil || nd.xfer.in != nil || nd.snapshotsInstalled != 0 {
		t.Fatalf("garbage left staged (%v) or installed (%d)", err, nd.snapshotsInstalled)
	}
	// A whole transfer of a MsgSnap of another term is refused too.
	hdr, _ := proto.Marshal(&raftpb.Message{Type: raftpb.MsgSnap.Enum(), From: new(uint64(1)), To: new(uint64(2)), Term: new(uint64(6)),
		Snapshot: &raftpb.Snapshot{Data: raftphb.EncodeSnapshot(9, nil), Metadata: &raftpb.SnapshotMetadata{Index: new(uint64(40)), Term: new(uint64(5))}}})
	raw := append(binary.AppendUvarint(nil, uint64(len(hdr))), hdr...)
	for off := 0; off < len(raw); off += 8 {
		last := off+8 >= len(raw)
		err := nd.StepChunk(chunk(1, 2, uint64(off), last, raw[off:min(off+8, len(raw))]))
		if (err != nil) != last || (last && !errors.Is(err, ErrChunkBad)) {
			t.Fatalf("chunk at %d of %d: %v", off, len(raw), err)
		}
	}
	st := nd.Stats().Transfers
	if st.ChunksDropped != 8 || st.Received != 0 || nd.snapshotsInstalled != 0 {
		t.Fatalf("stats %+v, %d installed", st, nd.snapshotsInstalled)
	}
}

// TestStagingRemovedOnOpen: a crash in the middle of a transfer, or
// between its end and its install, leaves staged bytes, which the next
// start removes.
func TestStagingRemovedOnOpen(t *testing.T) {
	nd, _, fsys := chunkNode(t)
	if err := nd.StepChunk(chunk(1, 1, 0, false, []byte("12345678"))); err != nil {
		t.Fatal(err)
	}
	if _, err := fsys.Stat("/data/" + stagingFile); err != nil {
		t.Fatalf("nothing staged: %v", err)
	}
	// And a whole one, stepped but not installed yet.
	ready := nd.readyPath(40, 12)
	if f, err := fsys.Create(ready); err != nil {
		t.Fatal(err)
	} else {
		f.Close()
	}
	if err := nd.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := Open(nd.cfg); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"/data/" + stagingFile, ready} {
		if _, err := fsys.Stat(name); err == nil {
			t.Fatalf("%s survived a restart", name)
		}
	}
}

// FuzzStagedTransfer hands a member arbitrary bytes as a whole transfer,
// cut into chunks: it never panics, drops what is not a snapshot for it
// (ErrChunkBad), leaves nothing staged, and never installs garbage.
func FuzzStagedTransfer(f *testing.F) {
	hdr, _ := proto.Marshal(&raftpb.Message{Type: raftpb.MsgSnap.Enum(), From: new(uint64(1)), To: new(uint64(2)), Term: new(uint64(5)),
		Snapshot: &raftpb.Snapshot{Data: raftphb.EncodeSnapshot(9, nil), Metadata: &raftpb.SnapshotMetadata{Index: new(uint64(40)), Term: new(uint64(5))}}})
	f.Add(append(binary.AppendUvarint(nil, uint64(len(hdr))), hdr...), uint8(8))
	f.Add([]byte{0}, uint8(1))
	f.Add([]byte{0xff, 0xff, 0xff, 0xff, 0x0f, 1, 2}, uint8(3))
	f.Fuzz(func(t *testing.T, raw []byte, size uint8) {
		if len(raw) == 0 || size == 0 {
			return
		}
		nd, _, fsys := chunkNode(t)
		var err error
		for off := 0; off < len(raw); off += int(size) {
			end := min(off+int(size), len(raw))
			err = nd.StepChunk(chunk(1, 1, uint64(off), end == len(raw), raw[off:end]))
			// Bad, or stale once a transfer past the size limit was
			// abandoned.
			if end < len(raw) && err != nil && !errors.Is(err, ErrChunkBad) && !errors.Is(err, ErrChunkStale) {
				t.Fatalf("chunk at %d: %v", off, err)
			}
		}
		if _, serr := fsys.Stat("/data/" + stagingFile); serr == nil || nd.xfer.in != nil {
			t.Fatal("a whole transfer left staged bytes")
		}
		if err != nil && !errors.Is(err, ErrChunkBad) && !errors.Is(err, ErrChunkStale) {
			// Stepped: the replica's own answer to a snapshot it
			// refuses (this lone member has no history).
			t.Logf("stepped: %v", err)
		}
		if ok, werr := nd.Write(); werr != nil && ok {
			// A snapshot that decoded as one for this member reaches the
			// install path, which checks the image itself.
			t.Logf("install refused: %v", werr)
		}
	})
}
