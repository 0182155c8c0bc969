package raftlog

import (
	"math/rand/v2"
	"syscall"
	"testing"

	"go.etcd.io/raft/v3/raftpb"

	"github.com/aerie-mq/aerie/internal/eventlog"
	"github.com/aerie-mq/aerie/internal/vfs"
)

// lastEntry is the index of the last entry Open restored.
func lastEntry(t *testing.T, fs *vfs.MemFS) uint64 {
	t.Helper()
	l, st, _, err := Open(fs, "/raft", eventlog.Options{SegmentBytes: 256})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	if len(st.Entries) == 0 {
		return 0
	}
	return st.Entries[len(st.Entries)-1].GetIndex()
}

// fullAfter opens a log on a fresh disk, makes entries 1–k durable,
// writes k+1, fills the disk, and returns the log, whose fsync of k+1
// failed.
func fullAfter(t *testing.T, k uint64) (*vfs.MemFS, *Log) {
	t.Helper()
	fs := vfs.NewMem()
	if err := fs.MkdirAll("/raft"); err != nil {
		t.Fatal(err)
	}
	l, _, _, err := Open(fs, "/raft", eventlog.Options{SegmentBytes: 256})
	if err != nil {
		t.Fatal(err)
	}
	for i := uint64(1); i <= k; i++ {
		if err := l.Append([]*raftpb.Entry{entry(1, i, "durable")}, &raftpb.HardState{Term: new(uint64(1)), Commit: new(i)}); err != nil {
			t.Fatal(err)
		}
		if err := l.Sync(); err != nil {
			t.Fatal(err)
		}
	}
	if err := l.Append([]*raftpb.Entry{entry(1, k+1, "never durable")}, nil); err != nil {
		t.Fatal(err)
	}
	// Written whole to the page cache before the disk filled: its
	// fsync fails, not its write.
	if err := l.l.Flush(); err != nil {
		t.Fatal(err)
	}
	fs.SetFull(syscall.ENOSPC)
	if err := l.Sync(); err == nil {
		t.Fatal("Sync on a full disk succeeded")
	}
	return fs, l
}

// TestCloseCutsFailedLog: a member that stops after a failed fsync on a
// full disk closes its Raft log, which cuts what that fsync did not make
// durable. A restart without a power loss (the page cache keeps what the
// failed fsync left there) must not find the entry, which a later power
// loss would take back (vfs.MemFS.SetFull: pages of a failed write-back
// marked clean).
func TestCloseCutsFailedLog(t *testing.T) {
	fs, l := fullAfter(t, 5)
	if err := l.Close(); err != nil {
		t.Fatalf("close: %v", err)
	}
	fs.Kill()
	fs.SetFull(nil)
	if got := lastEntry(t, fs); got != 5 {
		t.Fatalf("after a restart the log ends at entry %d, want 5 (the last synced)", got)
	}
	fs.CrashWith(func(string) *rand.Rand { return rand.New(rand.NewPCG(1, 2)) })
	if got := lastEntry(t, fs); got != 5 {
		t.Fatalf("after a power loss the log ends at entry %d, want 5", got)
	}
}

// TestReopenResumes: a log whose fsync failed on a full disk is reopened
// in place, cut to its synced entries; the entry is appended again and,
// once room returns, made durable: it survives a power loss.
func TestReopenResumes(t *testing.T) {
	fs, l := fullAfter(t, 7)
	if err := l.Reopen(); err != nil {
		t.Fatalf("reopen on a full disk: %v", err)
	}
	again := func() error {
		if err := l.Append([]*raftpb.Entry{entry(1, 8, "durable at last")}, &raftpb.HardState{Term: new(uint64(1)), Commit: new(uint64(8))}); err != nil {
			t.Fatal(err)
		}
		return l.Sync()
	}
	if err := again(); err == nil {
		t.Fatal("Sync on a full disk succeeded")
	}
	fs.SetFull(nil)
	if err := l.Reopen(); err != nil {
		t.Fatalf("reopen: %v", err)
	}
	if err := again(); err != nil {
		t.Fatalf("sync once room returned: %v", err)
	}
	fs.CrashWith(func(string) *rand.Rand { return rand.New(rand.NewPCG(3, 4)) })
	if got := lastEntry(t, fs); got != 8 {
		t.Fatalf("after a power loss the log ends at entry %d, want 8", got)
	}
}
