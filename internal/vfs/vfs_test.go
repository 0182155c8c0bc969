package vfs

import (
	"errors"
	"io"
	"io/fs"
	"path/filepath"
	"slices"
	"testing"
)

// testConformance checks the behaviour both implementations must share.
func testConformance(t *testing.T, fsys FS, root string) {
	dir := filepath.Join(root, "a", "b")
	if err := fsys.MkdirAll(dir); err != nil {
		t.Fatalf("MkdirAll: %v", err)
	}
	if err := fsys.MkdirAll(dir); err != nil {
		t.Fatalf("MkdirAll on existing dir: %v", err)
	}
	name := filepath.Join(dir, "f.log")
	if _, err := fsys.Open(name); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("Open missing: got %v, want ErrNotExist", err)
	}
	if _, err := fsys.Stat(name); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("Stat missing: got %v, want ErrNotExist", err)
	}
	if _, err := fsys.Create(filepath.Join(root, "nodir", "x")); err == nil {
		t.Fatal("Create in a missing directory succeeded")
	}

	f, err := fsys.Create(name)
	if err != nil {
		t.Fatalf("Create: %v", err)
	}
	mustWrite(t, f, "hello ")
	mustWrite(t, f, "world")
	if err := f.Sync(); err != nil {
		t.Fatalf("Sync: %v", err)
	}
	if err := fsys.SyncDir(dir); err != nil {
		t.Fatalf("SyncDir: %v", err)
	}
	if got := readAll(t, f); got != "hello world" {
		t.Fatalf("content = %q", got)
	}
	// ReadAt past the end follows io.ReaderAt.
	buf := make([]byte, 4)
	if n, err := f.ReadAt(buf, 9); n != 2 || err != io.EOF {
		t.Fatalf("short ReadAt = %d, %v; want 2, EOF", n, err)
	}
	if err := f.Truncate(5); err != nil {
		t.Fatalf("Truncate: %v", err)
	}
	mustWrite(t, f, "!") // must append at the new end
	if got := readAll(t, f); got != "hello!" {
		t.Fatalf("after truncate+write content = %q", got)
	}
	if err := f.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	if _, err := f.Write([]byte("x")); !errors.Is(err, ErrClosed) {
		t.Fatalf("Write after Close: got %v, want ErrClosed", err)
	}

	// Open of an existing file appends.
	f, err = fsys.Open(name)
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	mustWrite(t, f, "?")
	if got := readAll(t, f); got != "hello!?" {
		t.Fatalf("after reopen content = %q", got)
	}
	f.Close()
	if size, err := fsys.Stat(name); err != nil || size != 7 {
		t.Fatalf("Stat = %d, %v; want 7", size, err)
	}

	// Create truncates an existing file.
	f, err = fsys.Create(name)
	if err != nil {
		t.Fatalf("Create existing: %v", err)
	}
	if size, _ := f.Size(); size != 0 {
		t.Fatalf("Create did not truncate: size %d", size)
	}
	f.Close()

	other := filepath.Join(dir, "e.log")
	if err := fsys.Rename(name, other); err != nil {
		t.Fatalf("Rename: %v", err)
	}
	g, _ := fsys.Create(filepath.Join(dir, "z.log"))
	g.Close()
	names, err := fsys.ReadDir(dir)
	if err != nil {
		t.Fatalf("ReadDir: %v", err)
	}
	if want := []string{"e.log", "z.log"}; !slices.Equal(names, want) {
		t.Fatalf("ReadDir = %v, want %v", names, want)
	}
	if err := fsys.Remove(other); err != nil {
		t.Fatalf("Remove: %v", err)
	}
	if err := fsys.Remove(other); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("Remove missing: got %v, want ErrNotExist", err)
	}
	names, _ = fsys.ReadDir(filepath.Join(root, "a"))
	if !slices.Equal(names, []string{"b"}) {
		t.Fatalf("ReadDir parent = %v, want [b]", names)
	}
}

func TestOSConformance(t *testing.T)  { testConformance(t, OS(), t.TempDir()) }
func TestMemConformance(t *testing.T) { testConformance(t, NewMem(), "data") }

func mustWrite(t *testing.T, f File, s string) {
	t.Helper()
	if n, err := f.Write([]byte(s)); err != nil || n != len(s) {
		t.Fatalf("Write(%q) = %d, %v", s, n, err)
	}
}

func readAll(t *testing.T, f File) string {
	t.Helper()
	size, err := f.Size()
	if err != nil {
		t.Fatalf("Size: %v", err)
	}
	buf := make([]byte, size)
	if _, err := f.ReadAt(buf, 0); err != nil && err != io.EOF {
		t.Fatalf("ReadAt: %v", err)
	}
	return string(buf)
}
