package node

// A member that finds its Raft log corrupt at start rejoins its cell as a
// new member (corrupt.go): tests in the in-memory cell of cell_test.go.

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"path"
	"slices"
	"strings"
	"testing"

	"go.etcd.io/raft/v3/raftpb"

	"github.com/aerie-mq/aerie/internal/eventlog"
	"github.com/aerie-mq/aerie/internal/raftphb"
	"github.com/aerie-mq/aerie/internal/vfs"
)

func readMem(t testing.TB, fsys vfs.FS, name string) []byte {
	t.Helper()
	f, err := fsys.Open(name)
	if err != nil {
		t.Fatalf("open %s: %v", name, err)
	}
	defer f.Close()
	size, _ := f.Size()
	b := make([]byte, size)
	if _, err := f.ReadAt(b, 0); err != nil && err != io.EOF {
		t.Fatalf("read %s: %v", name, err)
	}
	return b
}

// writeMem replaces name's content durably.
func writeMem(t testing.TB, fsys vfs.FS, name string, data []byte) {
	t.Helper()
	f, err := fsys.Create(name)
	if err != nil {
		t.Fatalf("create %s: %v", name, err)
	}
	defer f.Close()
	if _, err := f.Write(data); err != nil {
		t.Fatal(err)
	}
	if err := f.Sync(); err != nil {
		t.Fatal(err)
	}
	if err := fsys.SyncDir(path.Dir(name)); err != nil {
		t.Fatal(err)
	}
}

// segments returns the paths of the segments of member m's Raft log
// (generation 0), in order.
func segments(t testing.TB, m *member) []string { return segmentsIn(t, m, "/data/raft") }

func segmentsIn(t testing.TB, m *member, dir string) []string {
	t.Helper()
	names, err := m.fs.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, n := range names {
		if strings.HasSuffix(n, ".log") {
			out = append(out, path.Join(dir, n))
		}
	}
	return out
}

// corruptMiddle crashes m and flips a byte in the middle of its Raft
// log: in a segment in the middle of the log, with valid frames after it
// (never a torn tail). It returns the segment and its damaged content.
func (c *cell) corruptMiddle(m *member) (string, []byte) { return c.corruptMiddleOf(m, "/data/raft") }

// corruptMiddleOf is corruptMiddle for the log in dir (/data/pubends: the
// store).
func (c *cell) corruptMiddleOf(m *member, dir string) (string, []byte) {
	c.crash(m)
	segs := segmentsIn(c.t, m, dir)
	seg := segs[len(segs)/2]
	data := readMem(c.t, m.fs, seg)
	if len(segs) == 1 {
		data[len(data)/3] ^= 0x20 // frames follow it
	} else {
		data[len(data)/2] ^= 0x20
	}
	writeMem(c.t, m.fs, seg, data)
	c.rejoinLog = append(c.rejoinLog, fmt.Sprintf("t=%dms: member %d: a byte of %s flipped", c.now, m.id, seg))
	return seg, data
}

// corruptLastOf kills m (kill -9: its disk keeps what it wrote) and flips
// a byte in the last record of the last segment of the log in dir: a
// record it synced, with nothing after it, which only the log's synced
// marks tell from a torn write.
func (c *cell) corruptLastOf(m *member, dir string) (string, []byte) {
	c.kill(m)
	segs := segmentsIn(c.t, m, dir)
	seg := segs[len(segs)-1]
	data := readMem(c.t, m.fs, seg)
	last := -1
	for off := 0; off+8 <= len(data); off += 8 + int(binary.LittleEndian.Uint32(data[off:])) {
		last = off
	}
	if last < 0 {
		c.t.Fatalf("%s holds no record", seg)
	}
	data[last+8] ^= 0x20
	writeMem(c.t, m.fs, seg, data)
	c.rejoinLog = append(c.rejoinLog, fmt.Sprintf("t=%dms: member %d: a byte of the last record of %s flipped", c.now, m.id, seg))
	return seg, data
}

// asideDir returns the directory m's corrupt state was moved to ("" if
// none).
func asideDir(t testing.TB, m *member) string {
	names, err := m.fs.ReadDir("/data")
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range names {
		if strings.HasPrefix(n, corruptPrefix) {
			return path.Join("/data", n)
		}
	}
	return ""
}

// noGrantsBefore fails the cell when member w grants a vote or pre-vote
// while its current id is a voter of no member's configuration.
func (c *cell) noGrantsBefore(w **member) {
	c.sendHook = func(from *member, m *raftpb.Message) {
		if *w == nil || from != *w || m.GetReject() {
			return
		}
		if t := m.GetType(); t != raftpb.MessageType_MsgVoteResp && t != raftpb.MessageType_MsgPreVoteResp {
			return
		}
		if raftphb.Gen(m.GetFrom()) > 0 {
			for _, o := range c.ms {
				if o.node != nil && slices.Contains(o.node.Replica().Status().Conf.GetVoters(), m.GetFrom()) {
					return
				}
			}
		}
		c.failf("member %d (Raft id %d) granted a %s to %d before its promotion", (*w).id, m.GetFrom(), m.GetType(), m.GetTo())
	}
}

// TestCorruptMemberRejoins: a member (a follower in odd seeds, the leader
// in even ones) is stopped, a byte in the middle of its Raft log is
// flipped, and it starts again. It finds the log corrupt, moves its state
// aside (the damaged segment kept as it was), and rejoins as generation 1
// of its slot: it grants no vote before its promotion, catches up from a
// snapshot (the leader's store image) and is a voter 2 s later, while the
// cell keeps acking. Then the leader (another original member) is lost,
// and the cell elects one that holds every acked batch — with the
// rejoined member's vote in a cell of 3 —, and at the end every store
// holds every acked batch. Without the corrupt path, Open refuses the log
// and the member never comes back (the cell's start fails the run).
func TestCorruptMemberRejoins(t *testing.T) {
	testCorruptRejoins(t, "raft", []int{3, 5}, 6, (*cell).corruptMiddleOf)
}

// TestCorruptStoreRejoins: the same with a byte flipped in the middle of
// the member's pubend store, which holds the committed batches below its
// Raft log's snapshot: the whole state is lost as well.
func TestCorruptStoreRejoins(t *testing.T) {
	testCorruptRejoins(t, "pubends", []int{3}, 4, (*cell).corruptMiddleOf)
}

// TestCorruptLastRecordRejoins: the same with a byte flipped in the last
// record of the member's Raft log after a kill -9, a record it synced:
// not a torn tail (the log's synced marks say so), so the member rejoins.
func TestCorruptLastRecordRejoins(t *testing.T) {
	testCorruptRejoins(t, "raft", []int{3}, 4, (*cell).corruptLastOf)
}

func testCorruptRejoins(t *testing.T, what string, sizes []int, seeds uint64, damage func(*cell, *member, string) (string, []byte)) {
	for _, n := range sizes {
		for seed := uint64(1); seed <= seeds; seed++ {
			c := newCell(t, n, seed, faults{maxDelay: 4, diskMs: 2})
			c.corruptOK = true
			var w, gone *member
			c.noGrantsBefore(&w)
			var seg string
			var damaged []byte
			var acksAtCorrupt, acksAtLoss int
			c.at(1000, func() {
				w = c.leaderInEvenSeeds(seed)
				acksAtCorrupt = len(c.acks)
				seg, damaged = damage(c, w, path.Join("/data", what))
				c.at(100, func() {
					c.restart(w)
					if w.node == nil {
						c.failf("member %d did not start", w.id)
						return
					}
					cr := w.node.Corruption()
					if cr == nil || !errors.Is(cr.Err, eventlog.ErrCorrupt) || cr.Gen != 1 || cr.From != w.id || raftphb.Gen(w.node.ID()) != 1 {
						c.failf("member %d restarted with corruption %v, id %d: want it found and the member at generation 1", w.id, cr, w.node.ID())
						return
					}
					if st := w.node.Replica().Status(); !st.Joining || len(st.Conf.GetVoters()) > 0 {
						c.failf("member %d restarted joining %v with voters %v: want no configuration", w.id, st.Joining, st.Conf.GetVoters())
					}
					dir := asideDir(t, w)
					if dir != path.Join("/data", cr.Aside) || !strings.HasPrefix(cr.Aside, "raft.corrupt-") {
						c.failf("aside directory %q, corruption says %q", dir, cr.Aside)
						return
					}
					if got := readMem(t, w.fs, path.Join(dir, what, path.Base(seg))); !bytes.Equal(got, damaged) {
						c.failf("the damaged segment was not kept as it was in %s", dir)
					}
					if names, _ := w.fs.ReadDir("/data/raft"); len(names) > 0 {
						c.failf("/data/raft still holds %v", names)
					}
				})
			})
			c.at(3000, func() {
				if got, want := c.voters(), c.currentVoters(); !slices.Equal(got, want) || raftphb.Gen(w.node.ID()) != 1 {
					c.failf("2 s after the corruption the leader's voters are %v, want %v with member %d at generation 1", got, want, w.id)
					return
				}
				if st := w.node.Stats(); st.SnapshotsInstalled == 0 {
					c.failf("member %d caught up without a snapshot", w.id)
				}
				if len(c.acks) == acksAtCorrupt {
					c.failf("nothing acked while member %d rejoined", w.id)
				}
				acksAtLoss = len(c.acks)
				gone = c.crashAnother(w)
			})
			c.at(5000, func() {
				if c.ackedSince(acksAtLoss, gone) == 0 {
					c.failf("no batch acked after member %d was lost", gone.id)
				}
				c.restart(gone)
			})
			c.run(6000, 2000)
			if len(c.errs) > 0 {
				t.Fatalf("%d members, seed %d: %s\n%s; %s\n%s\n%s", n, seed, c.errs[0], c.report(), c.statsReport(), strings.Join(c.rejoinLog, "\n"), c.states())
			}
			if got, want := c.voters(), c.currentVoters(); !slices.Equal(got, want) {
				t.Fatalf("%d members, seed %d: voters %v at the end, want %v", n, seed, got, want)
			}
			if seed == 1 {
				t.Logf("%d members, seed 1: %s\n%s", n, c.report(), strings.Join(c.rejoinLog, "\n"))
			}
		}
	}
}

// TestTornTailIsTruncated: a Raft log whose last frame a crash cut short
// (half a frame; or a whole frame whose checksum does not match, which a
// torn write can leave as well), past what it synced, with no valid frame
// after it, is repaired by truncation: the member keeps its id, moves
// nothing aside, and the cell goes on with it as a voter.
func TestTornTailIsTruncated(t *testing.T) {
	for _, whole := range []bool{false, true} {
		for seed := uint64(1); seed <= 4; seed++ {
			c := newCell(t, 3, seed, faults{maxDelay: 4, diskMs: 2})
			var w *member
			var size int64
			c.at(1000, func() {
				w = c.follower()
				c.crash(w)
				segs := segments(t, w)
				last := segs[len(segs)-1]
				data := readMem(t, w.fs, last)
				size = int64(len(data))
				// A frame header announcing 40 bytes, and then 11 of them
				// (or all 40, with a checksum that does not match).
				tail := []byte{40, 0, 0, 0, 1, 2, 3, 4}
				n := 11
				if whole {
					n = 40
				}
				tail = append(tail, bytes.Repeat([]byte{0xab}, n)...)
				writeMem(t, w.fs, last, append(data, tail...))
				c.at(100, func() {
					c.restart(w)
					if w.node == nil || w.node.Corruption() != nil || w.node.ID() != w.id {
						c.failf("member %d after a torn tail: node %v, want it up under its id %d", w.id, w.node != nil, w.id)
						return
					}
					if got, _ := w.fs.Stat(last); got > size {
						c.failf("the torn tail of %s was not truncated: %d bytes, was %d", last, got, size)
					}
					if rec := w.node.Recovery(); !rec.TornTail || rec.TruncatedBytes == 0 {
						c.failf("a truncated torn tail not reported (the broker logs it): %+v", rec)
					}
					if d := asideDir(t, w); d != "" {
						c.failf("a torn tail moved the state aside to %s", d)
					}
				})
			})
			c.run(4000, 2000)
			if len(c.errs) > 0 {
				t.Fatalf("whole frame %v, seed %d: %s\n%s", whole, seed, c.errs[0], c.report())
			}
			if got, want := c.voters(), []uint64{1, 2, 3}; !slices.Equal(got, want) || c.stats.Rejoins != 0 {
				t.Fatalf("whole frame %v, seed %d: voters %v, %d rejoins; want %v, none", whole, seed, got, c.stats.Rejoins, want)
			}
		}
	}
}

// runUnchecked runs the cell for ms without healing it or checking its end
// (a cell that cannot serve any more).
func (c *cell) runUnchecked(ms int) {
	for _, m := range c.ms {
		c.start(m)
	}
	c.tickAll(ms)
	c.loop(ms)
}

// majorityCorrupt runs a cell of n whose members all crash at 1 s (a power
// cut), after which a majority (the leader and the next members in slot
// order) finds its Raft log corrupt and starts again at once, the others
// 800 ms later; with the mutation corruptBlank or not. It reports whether
// some member served after the cut, a corrupt member granted a vote, and
// how many batches were acked after it.
func majorityCorrupt(t *testing.T, n int, seed uint64, blank bool) (c *cell, bad []*member, served, granted bool, acked int) {
	c = newCell(t, n, seed, faults{maxDelay: 4, diskMs: 2})
	// The mutation restarts the corrupt members blank under their old ids;
	// with it, blank members also vote at once (UnsafeBlankBootstrap),
	// else they would await their cell (raftphb/newcell.go), which now
	// guards that case too (TestWipedMajorityStops).
	c.corruptOK, c.mutBlankBootstrap = true, blank
	if blank {
		c.mut |= MutCorruptBlank
	}
	c.sendHook = func(from *member, m *raftpb.Message) {
		if slices.Contains(bad, from) && !m.GetReject() &&
			(m.GetType() == raftpb.MessageType_MsgVoteResp || m.GetType() == raftpb.MessageType_MsgPreVoteResp) {
			granted = true
		}
	}
	acks := 0
	c.at(1000, func() {
		l := c.leader()
		bad = c.majorityFrom(l)
		// A power cut takes the whole cell down; the corrupt members
		// come back first, the others 800 ms later.
		for _, m := range c.ms {
			if slices.Contains(bad, m) {
				c.corruptMiddle(m)
			} else {
				c.crash(m)
				c.at(900, func() { c.restart(m) })
			}
		}
		c.at(100, func() {
			for _, m := range bad {
				c.restart(m)
			}
		})
		acks = len(c.acks)
	})
	c.noteServesAfter(1000, &served)
	c.runUnchecked(6000)
	return c, bad, served, granted, len(c.acks) - acks
}

// TestCorruptMajorityStops: after a power cut, a majority of the cell (2
// of 3, 3 of 5) finds its Raft log corrupt, and starts before the others.
// Each moves its state aside and waits to be
// admitted, and none grants a vote; the members with their logs are no
// majority, so no leader is elected, nothing is acked, and no new cell
// forms without the committed log: the cell stays stopped (for an
// operator). TestCorruptBlankIsCaught: restarting the corrupt members
// under their ids with blank logs (as a wiped disk before it notices)
// instead would elect a leader without the acknowledged batches.
func TestCorruptMajorityStops(t *testing.T) {
	for _, n := range []int{3, 5} {
		for seed := uint64(1); seed <= 4; seed++ {
			c, bad, served, granted, acked := majorityCorrupt(t, n, seed, false)
			if len(c.errs) > 0 {
				t.Fatalf("%d members, seed %d: %s\n%s\n%s", n, seed, c.errs[0], c.report(), c.states())
			}
			if served || granted || acked > 0 {
				t.Fatalf("%d members, seed %d: with a majority corrupt, served %v, a corrupt member granted a vote %v, %d batches acked\n%s",
					n, seed, served, granted, acked, c.states())
			}
			for _, m := range bad {
				if st := m.node.Replica().Status(); !st.Joining || raftphb.Gen(st.ID) == 0 || m.node.Corruption() == nil {
					t.Fatalf("%d members, seed %d: corrupt member %d is %d, joining %v\n%s", n, seed, m.id, st.ID, st.Joining, c.states())
				}
			}
		}
	}
}

// TestCorruptBlankIsCaught: the mutation corruptBlank (a corrupt member
// restarts under its old id with a blank log) lets a corrupt majority
// elect a leader of its own and ack batches: a new cell without the
// committed log. TestCorruptMajorityStops must catch it.
func TestCorruptBlankIsCaught(t *testing.T) {
	caught := 0
	for _, n := range []int{3, 5} {
		for seed := uint64(1); seed <= 4; seed++ {
			_, _, served, granted, acked := majorityCorrupt(t, n, seed, true)
			if served || granted || acked > 0 {
				caught++
			}
		}
	}
	if caught == 0 {
		t.Fatal("the mutation corruptBlank was never caught")
	}
	t.Logf("the mutation corruptBlank caught in %d of 8 runs", caught)
}

// TestCorruptMoveResumes: a crash in the middle of moving a corrupt state
// aside (a directory sync fails, then the power goes) leaves part of it
// in place; the next start finishes the move before it reads anything,
// and the member comes up at the generation the marker recorded.
func TestCorruptMoveResumes(t *testing.T) {
	c := newCell(t, 3, 1, faults{maxDelay: 4, diskMs: 2})
	c.corruptOK = true
	var w *member
	c.at(1000, func() {
		w = c.follower()
		seg, damaged := c.corruptMiddle(w)
		w.fs.InjectError(vfs.OpSyncDir, "/data/raft", errors.New("injected"))
		c.start(w)
		if w.node != nil {
			c.failf("member %d started although its move aside failed", w.id)
			return
		}
		if _, err := w.fs.Stat(path.Join("/data", corruptMarker)); err != nil {
			c.failf("no marker after a failed move: %v", err)
		}
		w.fs.Crash(c.rng)
		c.restart(w)
		if w.node == nil {
			c.failf("member %d did not start after the crash", w.id)
			return
		}
		if cr := w.node.Corruption(); cr == nil || raftphb.Gen(w.node.ID()) != 1 {
			c.failf("member %d: corruption %v, id %d after the crash", w.id, cr, w.node.ID())
			return
		}
		if _, err := w.fs.Stat(path.Join("/data", corruptMarker)); err == nil {
			c.failf("the marker is still there")
		}
		dir := asideDir(t, w)
		if got := readMem(t, w.fs, path.Join(dir, "raft", path.Base(seg))); !bytes.Equal(got, damaged) {
			c.failf("the damaged segment is not in %s", dir)
		}
		if names, _ := w.fs.ReadDir("/data/raft"); len(names) > 0 {
			c.failf("/data/raft still holds %v", names)
		}
		if names, _ := w.fs.ReadDir(path.Join(dir, "pubends")); len(names) == 0 {
			c.failf("the store was not moved to %s", dir)
		}
		if first, next := w.node.StoreBounds(); first != 0 || next != 0 {
			c.failf("member %d starts with a store of [%d, %d), want an empty one", w.id, first, next)
		}
	})
	c.run(4000, 2000)
	if len(c.errs) > 0 {
		t.Fatalf("%s\n%s\n%s", c.errs[0], c.report(), strings.Join(c.rejoinLog, "\n"))
	}
	if got, want := c.voters(), c.currentVoters(); !slices.Equal(got, want) || raftphb.Gen(w.node.ID()) != 1 {
		t.Fatalf("voters %v at the end, want %v with member %d at generation 1", got, want, w.id)
	}
}
