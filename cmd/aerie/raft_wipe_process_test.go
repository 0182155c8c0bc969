package main

import (
	"bytes"
	"context"
	"encoding/binary"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/aerie-mq/aerie/client"
	"github.com/aerie-mq/aerie/internal/broker"
	"github.com/aerie-mq/aerie/internal/eventlog"
	"github.com/aerie-mq/aerie/internal/vfs"
)

// TestKill9ReplicatedPHBWipedMember runs a replicated PHB cell of three
// `aerie broker` processes feeding an SHB, as TestKill9ReplicatedPHBLeader
// does. Mid-stream a follower is killed with SIGKILL, its data directory
// deleted (a replaced disk) and the broker started again: it rejoins the
// cell as a new member (the next generation of its Raft id, a learner
// caught up from the leader's snapshot, then a voter) while publishing
// goes on. Then the leader, another original member, is killed: the
// rejoined member's vote elects a new leader, and the subscriber gets
// every acknowledged event exactly once, in order.
func TestKill9ReplicatedPHBWipedMember(t *testing.T) {
	testWipedMember(t, func(*testing.T, broker.RaftStatus) {})
}

// TestKill9ReplicatedPHBWipedMemberChunked is the same with the members'
// snapshots cut into 1 KiB chunks (AERIE_RAFT_SNAPSHOT_CHUNK): the
// leader's store image, some 500 events, is many of them, and the wiped
// member catches up from a chunked transfer.
func TestKill9ReplicatedPHBWipedMemberChunked(t *testing.T) {
	t.Setenv(snapshotChunkEnv, "1024")
	testWipedMember(t, func(t *testing.T, st broker.RaftStatus) {
		if st.TransfersReceived == 0 {
			t.Fatalf("the rejoined member received no chunked snapshot: %+v", st)
		}
	})
}

// TestKill9ReplicatedPHBCorruptMember is the same with the follower's Raft
// log damaged instead of deleted: a byte flipped in the first record of a
// segment while the broker is down, with valid records after it. It finds
// the log corrupt at start,
// logs so at error level, moves its Raft state aside (the damaged file
// kept as it was, in DATA/raft.corrupt-<unix time>) and rejoins as a new
// member; the rest of the scenario is the wiped member's.
func TestKill9ReplicatedPHBCorruptMember(t *testing.T) {
	var seg string
	var damaged []byte
	testLostMember(t, func(t *testing.T, data string) {
		segs, err := filepath.Glob(filepath.Join(data, "raft", "*.log"))
		if err != nil || len(segs) == 0 {
			t.Fatalf("no Raft log segment in %s (%v)", data, err)
		}
		// The first record of the first segment, valid records after it
		// (TestKill9ReplicatedPHBCorruptLastRecord damages the last).
		seg = segs[0]
		if damaged, err = os.ReadFile(seg); err != nil {
			t.Fatal(err)
		}
		const header = 8 // eventlog frame: uint32 length, uint32 CRC-32C
		n := int(binary.LittleEndian.Uint32(damaged))
		if len(damaged) < 2*header || header+n >= len(damaged) {
			t.Fatalf("%s holds %d bytes, its first record %d: want a record after the first", seg, len(damaged), n)
		}
		damaged[header+n/2] ^= 0x20
		if err := os.WriteFile(seg, damaged, 0o644); err != nil {
			t.Fatal(err)
		}
	}, "corrupted a byte in the first record of its Raft log", "Raft state is lost", func(t *testing.T, data string, _ broker.RaftStatus) {
		kept, _ := filepath.Glob(filepath.Join(data, "raft.corrupt-*", "raft", filepath.Base(seg)))
		if len(kept) != 1 {
			t.Fatalf("the damaged segment %s is not in %s", filepath.Base(seg), filepath.Join(data, "raft.corrupt-*", "raft"))
		}
		if b, err := os.ReadFile(kept[0]); err != nil || !bytes.Equal(b, damaged) {
			t.Fatalf("%s is not the damaged segment as it was (%v)", kept[0], err)
		}
	})
}

// TestKill9ReplicatedPHBCorruptLastRecord is the same with a byte flipped
// in the last fsynced record of the follower's Raft log, with nothing after
// it: what a torn write also leaves, but the log's synced marks say the
// record was made durable, so the member finds its log corrupt and rejoins
// rather than truncate an acknowledged entry. A kill can land between a
// write and its fsync, leaving frames past the synced length (a genuine
// torn tail if the machine had lost power): the damage first cuts the
// segment at the synced length, as a power loss there would, so that the
// last record is always one the member acknowledged.
func TestKill9ReplicatedPHBCorruptLastRecord(t *testing.T) {
	testLostMember(t, func(t *testing.T, data string) {
		dir := filepath.Join(data, "raft")
		name, synced, ok, err := eventlog.SyncedLength(vfs.OS(), dir)
		if err != nil || !ok {
			t.Fatalf("no synced mark in %s (%v)", dir, err)
		}
		seg := filepath.Join(dir, name)
		b, err := os.ReadFile(seg)
		if err != nil {
			t.Fatal(err)
		}
		if int64(len(b)) < synced {
			t.Fatalf("%s holds %d bytes, less than the %d its synced mark vouches for", seg, len(b), synced)
		}
		b = b[:synced]
		const header = 8 // eventlog frame: uint32 length, uint32 CRC-32C
		last := -1
		for off := 0; off+header <= len(b); off += header + int(binary.LittleEndian.Uint32(b[off:])) {
			last = off
		}
		if last < 0 || last+header >= len(b) {
			t.Fatalf("%s holds no whole record in its first %d bytes", seg, synced)
		}
		b[last+header] ^= 0x20
		if err := os.WriteFile(seg, b, 0o644); err != nil {
			t.Fatal(err)
		}
	}, "corrupted a byte in the last fsynced record of its Raft log", "Raft state is lost", func(*testing.T, string, broker.RaftStatus) {})
}

// testWipedMember runs the wiped-member scenario; rejoined checks the
// rejoined member's status once it is a voter.
func testWipedMember(t *testing.T, rejoined func(*testing.T, broker.RaftStatus)) {
	testLostMember(t, func(t *testing.T, data string) {
		if err := os.RemoveAll(data); err != nil {
			t.Fatal(err)
		}
	}, "deleted its data directory", "rejoins the cell as a new member", func(t *testing.T, _ string, st broker.RaftStatus) { rejoined(t, st) })
}

// testLostMember runs the scenario with damage done to the follower's
// data directory while it is down (what says what it did); its log must
// then hold logged, and rejoined checks the rejoined member once it is a
// voter.
func testLostMember(t *testing.T, damage func(t *testing.T, data string), what, logged string, rejoined func(*testing.T, string, broker.RaftStatus)) {
	if testing.Short() {
		t.Skip("builds and runs processes")
	}
	f := newProcFixture(t)
	cell := startReplicatedCell(f, "")
	ids, clients, https := cell.ids, cell.clients, cell.https
	ctx, cancel := context.WithTimeout(context.Background(), 120*time.Second)
	defer cancel()
	leader := waitLeader(t, ctx, https, "")

	sub, err := f.dial(ctx, cell.shbClients, "sub").Subscribe(ctx, ">")
	if err != nil {
		t.Fatal(err)
	}
	const total = 1500
	got := collectSeqs(sub, total)

	pub := f.dial(ctx, strings.Join([]string{clients["p1"], clients["p2"], clients["p3"]}, ","), "pub")
	var acks []<-chan client.Result
	wiped := ""
	for i := 1; i <= total; i++ {
		ch, err := pub.PublishAsync(client.Message{Topic: "orders.eu", Props: map[string]any{"seq": int64(i)}})
		if err != nil {
			t.Fatal(err)
		}
		acks = append(acks, ch)
		switch i {
		case 500:
			waitAcked(t, ctx, acks)
			for _, id := range ids {
				if id != leader {
					wiped = id
					break
				}
			}
			f.kill(wiped)
			damage(t, filepath.Join(f.dir, "data", wiped))
			f.start(wiped)
			t.Logf("killed %s, %s and started it again", wiped, what)
		case 1000:
			st := waitRejoined(t, ctx, https[wiped])
			t.Logf("%s rejoined as Raft member %d; voters %v; %d snapshots installed, %d chunked", wiped, st.ID, st.Voters,
				st.SnapshotsInstalled, st.TransfersReceived)
			rejoined(t, filepath.Join(f.dir, "data", wiped), st)
			waitAcked(t, ctx, acks)
			leader = waitLeader(t, ctx, https, wiped)
			f.kill(leader)
			t.Logf("killed the leader %s", leader)
		}
	}
	waitAcked(t, ctx, acks)
	got.wait(t, ctx, total)
	got.inOrder(t)
	if log, err := os.ReadFile(f.logPath(wiped)); err != nil || !strings.Contains(string(log), logged) {
		t.Fatalf("%s's log does not say %q (%v)", wiped, logged, err)
	}
}

// waitRejoined polls a member's /status until it is a voter under a Raft
// id of a later generation than the first (a rejoined member, promoted).
func waitRejoined(t *testing.T, ctx context.Context, addr string) broker.RaftStatus {
	t.Helper()
	tk := time.NewTicker(20 * time.Millisecond)
	defer tk.Stop()
	for {
		if st, ok := tryStatus(ctx, addr); ok && st.Raft != nil {
			if r := st.Raft; r.ID > 255 && slices.Contains(r.Voters, r.ID) {
				return *r
			}
		}
		select {
		case <-ctx.Done():
			t.Fatalf("%s never rejoined as a voter: %v", addr, ctx.Err())
		case <-tk.C:
		}
	}
}
