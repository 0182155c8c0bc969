package vfs

import (
	"errors"
	"io/fs"
	"math/rand/v2"
	"strings"
	"testing"
)

// newSynced returns a MemFS with dir/name created, its directory synced and
// content durable.
func newSynced(t *testing.T, content string) (*MemFS, File) {
	t.Helper()
	m := NewMem()
	if err := m.MkdirAll("d"); err != nil {
		t.Fatal(err)
	}
	f, err := m.Create("d/f")
	if err != nil {
		t.Fatal(err)
	}
	mustWrite(t, f, content)
	if err := f.Sync(); err != nil {
		t.Fatal(err)
	}
	if err := m.SyncDir("d"); err != nil {
		t.Fatal(err)
	}
	return m, f
}

func contentOf(t *testing.T, m *MemFS, name string) string {
	t.Helper()
	f, err := m.Open(name)
	if err != nil {
		t.Fatalf("Open %s: %v", name, err)
	}
	defer f.Close()
	return readAll(t, f)
}

func TestCrashKeepsSyncedBytes(t *testing.T) {
	for seed := range uint64(50) {
		m, _ := newSynced(t, "durable")
		m.Crash(rand.New(rand.NewPCG(seed, 0)))
		if got := contentOf(t, m, "d/f"); got != "durable" {
			t.Fatalf("seed %d: content %q, want %q", seed, got, "durable")
		}
	}
}

func TestCrashKeepsPrefixOfUnsynced(t *testing.T) {
	const synced, unsynced = "abc", "0123456789"
	var sawNone, sawAll, sawPartial bool
	for seed := range uint64(500) {
		m, f := newSynced(t, synced)
		mustWrite(t, f, unsynced[:4])
		mustWrite(t, f, unsynced[4:])
		m.Crash(rand.New(rand.NewPCG(seed, 1)))
		got := contentOf(t, m, "d/f")
		if !strings.HasPrefix(got, synced) || !strings.HasPrefix(synced+unsynced, got) {
			t.Fatalf("seed %d: content %q is not synced bytes + prefix of unsynced", seed, got)
		}
		switch len(got) - len(synced) {
		case 0:
			sawNone = true
		case len(unsynced):
			sawAll = true
		default:
			sawPartial = true
		}
	}
	if !sawNone || !sawAll || !sawPartial {
		t.Fatalf("outcomes: none=%v all=%v partial=%v; want all three", sawNone, sawAll, sawPartial)
	}
}

// TestWriteBackKeepsUnsyncedWhole: after WriteBack of a file, a crash
// keeps every byte written to it, and only to it.
func TestWriteBackKeepsUnsyncedWhole(t *testing.T) {
	const synced, unsynced = "abc", "0123456789"
	gTorn := false
	for seed := range uint64(50) {
		m, f := newSynced(t, synced)
		mustWrite(t, f, unsynced)
		g, err := m.Create("d/g")
		if err != nil {
			t.Fatal(err)
		}
		mustWrite(t, g, unsynced)
		if err := m.SyncDir("d"); err != nil {
			t.Fatal(err)
		}
		m.WriteBack(func(name string) bool { return name == "d/f" })
		m.Crash(rand.New(rand.NewPCG(seed, 2)))
		if got := contentOf(t, m, "d/f"); got != synced+unsynced {
			t.Fatalf("seed %d: content %q after a write-back, want %q", seed, got, synced+unsynced)
		}
		if got := contentOf(t, m, "d/g"); len(got) < len(unsynced) {
			gTorn = true
		}
	}
	if !gTorn {
		t.Fatalf("a file not written back was never torn")
	}
}

func TestCrashIsDeterministic(t *testing.T) {
	run := func() string {
		m, f := newSynced(t, "x")
		mustWrite(t, f, strings.Repeat("y", 100))
		g, _ := m.Create("d/g")
		mustWrite(t, g, strings.Repeat("z", 100))
		m.SyncDir("d")
		m.Crash(rand.New(rand.NewPCG(7, 7)))
		return m.String()
	}
	if a, b := run(), run(); a != b {
		t.Fatalf("same seed, different outcome:\n%s\nvs\n%s", a, b)
	}
}

func TestCrashInvalidatesHandles(t *testing.T) {
	m, f := newSynced(t, "abc")
	m.Crash(rand.New(rand.NewPCG(1, 1)))
	if _, err := f.Write([]byte("x")); !errors.Is(err, ErrCrashed) {
		t.Fatalf("Write after crash: got %v, want ErrCrashed", err)
	}
	if err := f.Sync(); !errors.Is(err, ErrCrashed) {
		t.Fatalf("Sync after crash: got %v, want ErrCrashed", err)
	}
	if _, err := f.ReadAt(make([]byte, 1), 0); !errors.Is(err, ErrCrashed) {
		t.Fatalf("ReadAt after crash: got %v, want ErrCrashed", err)
	}
	if err := f.Close(); err != nil {
		t.Fatalf("Close after crash: %v", err)
	}
}

func TestCrashNamespaceNeedsSyncDir(t *testing.T) {
	m, _ := newSynced(t, "abc")

	// Created and fsynced, but the directory was never synced: gone.
	g, _ := m.Create("d/new")
	mustWrite(t, g, "data")
	g.Sync()
	// Removed without SyncDir: comes back.
	m.Remove("d/f")
	m.Crash(rand.New(rand.NewPCG(1, 2)))
	if _, err := m.Stat("d/new"); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("unsynced create survived crash: %v", err)
	}
	if got := contentOf(t, m, "d/f"); got != "abc" {
		t.Fatalf("unsynced remove: content %q, want abc", got)
	}

	// Rename without SyncDir reverts; with SyncDir it sticks.
	m.Rename("d/f", "d/r")
	m.Crash(rand.New(rand.NewPCG(1, 3)))
	if _, err := m.Stat("d/r"); !errors.Is(err, fs.ErrNotExist) {
		t.Fatal("unsynced rename survived crash")
	}
	m.Rename("d/f", "d/r")
	m.SyncDir("d")
	m.Crash(rand.New(rand.NewPCG(1, 4)))
	if got := contentOf(t, m, "d/r"); got != "abc" {
		t.Fatalf("synced rename: content %q, want abc", got)
	}
	if _, err := m.Stat("d/f"); !errors.Is(err, fs.ErrNotExist) {
		t.Fatal("old name survived synced rename")
	}
}

func TestTruncateCutsSyncedContent(t *testing.T) {
	m, f := newSynced(t, "abcdef")
	if err := f.Truncate(2); err != nil {
		t.Fatal(err)
	}
	mustWrite(t, f, "XYZ") // unsynced
	m.Crash(rand.New(rand.NewPCG(3, 3)))
	got := contentOf(t, m, "d/f")
	if !strings.HasPrefix("abXYZ", got) || len(got) < 2 {
		t.Fatalf("content %q, want ab + prefix of XYZ", got)
	}
}

func TestInjectError(t *testing.T) {
	boom := errors.New("boom")
	m, f := newSynced(t, "abc")

	m.InjectError(OpSync, "d/f", boom)
	mustWrite(t, f, "def")
	if err := f.Sync(); !errors.Is(err, boom) {
		t.Fatalf("Sync: got %v, want boom", err)
	}
	// The failed sync made nothing durable: a crash that keeps no unsynced
	// bytes must roll back to "abc"; find such a seed.
	for seed := uint64(0); ; seed++ {
		m2, f2 := newSynced(t, "abc")
		m2.InjectError(OpSync, "", boom)
		mustWrite(t, f2, "def")
		if err := f2.Sync(); !errors.Is(err, boom) {
			t.Fatalf("Sync (any file): got %v, want boom", err)
		}
		m2.Crash(rand.New(rand.NewPCG(seed, 9)))
		if contentOf(t, m2, "d/f") == "abc" {
			break
		}
		if seed > 100 {
			t.Fatal("failed Sync always made data durable")
		}
	}

	// One-shot: the next Sync works.
	if err := f.Sync(); err != nil {
		t.Fatalf("second Sync: %v", err)
	}

	// Write fault writes nothing; a fault on another name does not fire.
	m.InjectError(OpWrite, "d/other", boom)
	mustWrite(t, f, "g")
	m.InjectError(OpWrite, "", boom)
	if n, err := f.Write([]byte("h")); n != 0 || !errors.Is(err, boom) {
		t.Fatalf("Write: got %d, %v; want 0, boom", n, err)
	}
	if got := readAll(t, f); got != "abcdefg" {
		t.Fatalf("content %q after failed write", got)
	}

	m.InjectError(OpSyncDir, "d", boom)
	if err := m.SyncDir("d"); !errors.Is(err, boom) {
		t.Fatalf("SyncDir: got %v, want boom", err)
	}
	if err := m.SyncDir("d"); err != nil {
		t.Fatalf("second SyncDir: %v", err)
	}
}

// TestKillKeepsEverythingWritten: a killed process loses no byte it wrote
// and no file it made, synced or not; its open handles fail.
func TestKillKeepsEverythingWritten(t *testing.T) {
	m, f := newSynced(t, "abc")
	mustWrite(t, f, "0123")
	g, err := m.Create("d/new") // never synced, nor its directory
	if err != nil {
		t.Fatal(err)
	}
	mustWrite(t, g, "xyz")
	m.Kill()
	if got := contentOf(t, m, "d/f"); got != "abc0123" {
		t.Fatalf("d/f: %q, want %q", got, "abc0123")
	}
	if got := contentOf(t, m, "d/new"); got != "xyz" {
		t.Fatalf("d/new: %q, want %q", got, "xyz")
	}
	if _, err := f.Write([]byte("z")); !errors.Is(err, ErrCrashed) {
		t.Fatalf("write on a handle from before the kill: %v, want ErrCrashed", err)
	}
	// What a kill kept counts as durable from then on (the simulator's
	// approximation of the kernel writing it out).
	m.Crash(rand.New(rand.NewPCG(1, 1)))
	if got := contentOf(t, m, "d/new"); got != "xyz" {
		t.Fatalf("d/new after a later power loss: %q", got)
	}
}
