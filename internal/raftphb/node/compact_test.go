package node

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"strconv"
	"strings"
	"testing"

	"go.etcd.io/raft/v3/raftpb"

	"github.com/aerie-mq/aerie/internal/eventlog"
	"github.com/aerie-mq/aerie/internal/msg"
	"github.com/aerie-mq/aerie/internal/raftphb"
	"github.com/aerie-mq/aerie/internal/storage"
	"github.com/aerie-mq/aerie/internal/tick"
	"github.com/aerie-mq/aerie/internal/vfs"
)

// Raft log compaction in the cell harness (cell_test.go): members compact
// every few entries and keep a short tail, so that a member that was down
// or lost its disk needs a snapshot.

var smallCompaction = Compaction{Every: 8, Retain: 2}

// tally adds nd's counters to the cell's.
func (c *cell) tally(nd *Node) {
	st := nd.Stats()
	c.stats.Compactions += st.Compactions
	c.stats.SnapshotsSent += st.SnapshotsSent
	c.stats.SnapshotsInstalled += st.SnapshotsInstalled
	c.stats.MaxSnapshotBytes = max(c.stats.MaxSnapshotBytes, st.MaxSnapshotBytes)
	c.stats.Rejoins += st.Rejoins
	x, y := &c.stats.Transfers, st.Transfers
	x.Sent, x.Received, x.Abandoned = x.Sent+y.Sent, x.Received+y.Received, x.Abandoned+y.Abandoned
	x.ChunksSent, x.ChunksReceived, x.ChunksDropped = x.ChunksSent+y.ChunksSent, x.ChunksReceived+y.ChunksReceived, x.ChunksDropped+y.ChunksDropped
}

func (c *cell) statsReport() string {
	x := c.stats.Transfers
	return fmt.Sprintf("%d compactions, %d snapshots sent (largest %d bytes), %d installed, %d rejoins; "+
		"chunked transfers: %d sent, %d received, %d abandoned; chunks: %d sent, %d staged, %d dropped",
		c.stats.Compactions, c.stats.SnapshotsSent, c.stats.MaxSnapshotBytes, c.stats.SnapshotsInstalled, c.stats.Rejoins,
		x.Sent, x.Received, x.Abandoned, x.ChunksSent, x.ChunksReceived, x.ChunksDropped)
}

// TestCellSwarmCompacting is TestCellSwarm with frequent compaction: the
// same checks (every acked batch in every later leader's store and, at
// the end, in every member's), with members catching up by snapshot after
// crashes, partitions and message loss.
func TestCellSwarmCompacting(t *testing.T) {
	seeds := uint64(20)
	if s, err := strconv.ParseUint(os.Getenv("RAFTPHB_SEEDS"), 10, 64); err == nil {
		seeds = s
	}
	if testing.Short() {
		seeds = 8
	}
	for _, n := range []int{3, 5} {
		var sum Stats
		for seed := uint64(1); seed <= seeds; seed++ {
			c := newCell(t, n, seed, swarm)
			c.compaction = smallCompaction
			c.run(6000, 3000)
			if len(c.errs) > 0 {
				t.Fatalf("%d members, seed %d: %s\n%s; %s", n, seed, c.errs[0], c.report(), c.statsReport())
			}
			if len(c.acks) == 0 {
				t.Fatalf("%d members, seed %d: nothing acked (%s)", n, seed, c.report())
			}
			sum.Compactions += c.stats.Compactions
			sum.SnapshotsInstalled += c.stats.SnapshotsInstalled
			if seed == 1 {
				t.Logf("%d members, seed 1: %s; %s", n, c.report(), c.statsReport())
			}
		}
		t.Logf("%d members, %d seeds: %d compactions, %d snapshots installed", n, seeds, sum.Compactions, sum.SnapshotsInstalled)
		if sum.Compactions == 0 || sum.SnapshotsInstalled == 0 {
			t.Fatalf("%d members: %d compactions, %d snapshots installed: the swarm does not exercise compaction", n, sum.Compactions, sum.SnapshotsInstalled)
		}
	}
}

// TestCellSwarmCompactingBytes is TestCellSwarmCompacting with the byte
// bound alone (a count bound the runs never reach): the same checks, the
// log compacted and members caught up by snapshot, and at the end, with
// every member caught up, no member's entries above MaxBytes.
func TestCellSwarmCompactingBytes(t *testing.T) {
	seeds := uint64(12)
	if testing.Short() {
		seeds = 4
	}
	comp := Compaction{Every: 1 << 30, Retain: 2, MaxBytes: 4 << 10}
	var sum Stats
	for seed := uint64(1); seed <= seeds; seed++ {
		c := newCell(t, 3, seed, swarm)
		c.compaction = comp
		c.run(6000, 3000)
		if len(c.errs) > 0 {
			t.Fatalf("seed %d: %s\n%s; %s", seed, c.errs[0], c.report(), c.statsReport())
		}
		for _, m := range c.ms {
			if m.node == nil {
				continue
			}
			if b := m.node.Replica().LogBytes(); b > comp.MaxBytes {
				t.Errorf("seed %d: member %d keeps %d bytes of entries at the end, above the bound %d", seed, m.id, b, comp.MaxBytes)
			}
		}
		sum.Compactions += c.stats.Compactions
		sum.SnapshotsInstalled += c.stats.SnapshotsInstalled
	}
	t.Logf("%d seeds: %d compactions, %d snapshots installed", seeds, sum.Compactions, sum.SnapshotsInstalled)
	if sum.Compactions == 0 || sum.SnapshotsInstalled == 0 {
		t.Fatalf("%d compactions, %d snapshots installed: the byte bound is not exercised", sum.Compactions, sum.SnapshotsInstalled)
	}
}

// downFor runs a fault-free cell of 3 in which member 3 is down from 500 ms
// to back ms, while the others publish and compact past its log.
func downFor(t *testing.T, seed uint64, back int) *cell {
	c := newCell(t, 3, seed, faults{maxDelay: 4, diskMs: 2})
	c.compaction = smallCompaction
	m := c.member(3)
	var acksAtBack int
	c.at(500, func() { c.crash(m) })
	c.at(back, func() {
		acksAtBack = len(c.acks)
		c.restart(m)
	})
	c.run(6000, 3000)
	if len(c.errs) > 0 {
		t.Fatalf("seed %d: %s\n%s; %s", seed, c.errs[0], c.report(), c.statsReport())
	}
	if len(c.acks) <= acksAtBack {
		t.Fatalf("seed %d: no batch acked after member 3 came back", seed)
	}
	return c
}

// TestLaggingMemberCatchesUpBySnapshot: a member down while the others
// compact their logs past its end comes back, is sent a snapshot (the
// leader's store image), installs it and ends with every acked batch;
// the others keep publishing meanwhile.
func TestLaggingMemberCatchesUpBySnapshot(t *testing.T) {
	for seed := uint64(1); seed <= 10; seed++ {
		c := downFor(t, seed, 3000)
		if c.stats.SnapshotsInstalled == 0 {
			t.Fatalf("seed %d: no snapshot installed (%s)", seed, c.statsReport())
		}
	}
}

// TestRestartAfterCompaction: a member restarted after its log was
// compacted starts from the snapshot (its log's first index is past 1,
// not a replay from the start) and its store still holds every acked
// batch at the end.
func TestRestartAfterCompaction(t *testing.T) {
	for seed := uint64(1); seed <= 10; seed++ {
		c := downFor(t, seed, 600)
		opens := c.opened[3]
		if len(opens) != 2 || opens[1] <= 1 {
			t.Fatalf("seed %d: member 3 opened its Raft log at first indexes %v, want a compacted one on restart", seed, opens)
		}
	}
}

// TestCompactUnsyncedIsCaught: the mutation "compact past what the store
// has fsynced" loses committed records in a crash, which a restarting
// member must refuse (its store ends before its Raft log's snapshot).
func TestCompactUnsyncedIsCaught(t *testing.T) {
	caught := 0
	for seed := uint64(1); seed <= 10; seed++ {
		c := newCell(t, 3, seed, swarm)
		c.compaction = smallCompaction
		c.mut |= MutCompactUnsynced
		c.run(6000, 3000)
		for _, e := range c.errs {
			if strings.Contains(e, "the Raft log was compacted to") {
				caught++
				break
			}
		}
	}
	if caught == 0 {
		t.Fatal("compaction past the store's fsync was never caught in 10 seeds")
	}
	t.Logf("caught in %d of 10 seeds", caught)
}

// TestInstallReplacesTheStoreAtomically installs a leader's store image
// that starts past the member's store (the leader trimmed its front), so
// that the store is replaced by a new generation, with crashes after a
// successful install and after installs whose generation switch or Raft
// snapshot failed to sync: the member reopens with the old store and log,
// or with the new store (and the snapshot once it is durable), never
// with a store that lacks what its Raft log skips.
func TestInstallReplacesTheStoreAtomically(t *testing.T) {
	rec := func(hwm uint64) msg.Record { return msg.Record{Pubend: "P1", HWM: tick.Tick(hwm)} }
	enc := func(r msg.Record) []byte {
		b, err := msg.EncodeRecord(nil, r)
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	img := storage.Image{Snapshot: [][]byte{enc(rec(100))}, First: 20}
	for i := uint64(20); i < 30; i++ {
		img.Records = append(img.Records, enc(rec(100+i)))
	}
	snap := &raftpb.Snapshot{
		Metadata: &raftpb.SnapshotMetadata{Index: new(uint64(7)), Term: new(uint64(2)), ConfState: &raftpb.ConfState{Voters: []uint64{1, 2, 3}}},
		Data:     raftphb.EncodeSnapshot(25, img.Encode(nil)),
	}
	cases := []struct {
		name      string
		failSync  string // the file whose fsync fails during the install
		wantGen   uint64
		wantFirst uint64 // the Raft log's first index after the reopen
	}{
		{"installed", "", 1, 8},
		{"generation switch fails", "/data/pubends.gen.tmp", 0, 1},
		{"raft snapshot fails", "/data/raft/snapshot.tmp", 1, 1},
	}
	for seed, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			rng := rand.New(rand.NewPCG(uint64(seed), 1))
			fsys := vfs.NewMem()
			open := func() *Node {
				nd, err := Open(Config{Replica: raftphb.Config{ID: 2, Peers: []uint64{1, 2, 3}, Jitter: rng.IntN},
					FS: fsys, Dir: "/data", LogOptions: eventlog.Options{SegmentBytes: 2 << 10}, Send: func(*raftpb.Message) {}})
				if err != nil {
					t.Fatal(err)
				}
				return nd
			}
			nd := open()
			if _, err := nd.store.Append([]msg.Record{rec(1), rec(2), rec(3)}); err != nil {
				t.Fatal(err)
			}
			if err := nd.store.Sync(); err != nil {
				t.Fatal(err)
			}
			if c.failSync != "" {
				fsys.InjectError(vfs.OpSync, c.failSync, errors.New("injected fsync failure"))
			}
			err := nd.install(snap)
			if (err == nil) != (c.failSync == "") {
				t.Fatalf("install = %v", err)
			}
			fsys.Crash(rng)
			nd = open()
			defer nd.Close()
			if got := nd.Replica().Status().FirstIndex; got != c.wantFirst {
				t.Fatalf("reopened Raft log starts at %d, want %d", got, c.wantFirst)
			}
			if nd.storeGen != c.wantGen {
				t.Fatalf("reopened store generation %d, want %d", nd.storeGen, c.wantGen)
			}
			first, next := nd.store.Bounds()
			wantFirst, wantNext := uint64(0), uint64(3)
			if c.wantGen == 1 {
				wantFirst, wantNext = 20, 30
			}
			if first != wantFirst || next != wantNext {
				t.Fatalf("reopened store holds [%d, %d), want [%d, %d)", first, next, wantFirst, wantNext)
			}
			// The other generation is gone (removed, or a half-install
			// cleaned up at the reopen).
			other, _ := storePaths("/data", 1-c.wantGen)
			if names, _ := fsys.ReadDir(other); len(names) > 0 {
				t.Fatalf("%s still holds %v", other, names)
			}
		})
	}
}
