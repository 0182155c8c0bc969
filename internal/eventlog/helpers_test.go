package eventlog

import (
	"bytes"
	"fmt"
	"io"
	"math/rand/v2"
	"testing"

	"github.com/aerie-mq/aerie/internal/vfs"
)

const testDir = "log"

func mustOpen(t testing.TB, fsys vfs.FS, opts Options) (*Log, Recovery) {
	t.Helper()
	l, rec, err := Open(fsys, testDir, opts)
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	return l, rec
}

// record returns a deterministic, distinguishable payload for index i.
func record(i int) []byte {
	return []byte(fmt.Sprintf("record-%06d-%s", i, bytes.Repeat([]byte{byte('a' + i%26)}, i%37)))
}

func appendRecords(t testing.TB, l *Log, from, n int) [][]byte {
	t.Helper()
	var out [][]byte
	for i := from; i < from+n; i++ {
		p := record(i)
		idx, err := l.Append(p)
		if err != nil {
			t.Fatalf("Append %d: %v", i, err)
		}
		if idx != uint64(i) {
			t.Fatalf("Append returned index %d, want %d", idx, i)
		}
		out = append(out, p)
	}
	return out
}

// readLog returns the records [FirstIndex, NextIndex) via Replay.
func readLog(t testing.TB, l *Log) [][]byte {
	t.Helper()
	var out [][]byte
	want := l.FirstIndex()
	err := l.Replay(l.FirstIndex(), func(i uint64, p []byte) error {
		if i != want {
			return fmt.Errorf("replay gave index %d, want %d", i, want)
		}
		want++
		out = append(out, p)
		return nil
	})
	if err != nil {
		t.Fatalf("Replay: %v", err)
	}
	if want != l.NextIndex() {
		t.Fatalf("replay ended at %d, NextIndex is %d", want, l.NextIndex())
	}
	return out
}

func equalRecords(t testing.TB, got, want [][]byte) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("got %d records, want %d", len(got), len(want))
	}
	for i := range got {
		if !bytes.Equal(got[i], want[i]) {
			t.Fatalf("record %d = %q, want %q", i, got[i], want[i])
		}
	}
}

func readFile(t testing.TB, fsys vfs.FS, name string) []byte {
	t.Helper()
	f, err := fsys.Open(name)
	if err != nil {
		t.Fatalf("Open %s: %v", name, err)
	}
	defer f.Close()
	size, _ := f.Size()
	b := make([]byte, size)
	if _, err := f.ReadAt(b, 0); err != nil && err != io.EOF {
		t.Fatalf("ReadAt %s: %v", name, err)
	}
	return b
}

// writeFile replaces name's content durably (file and directory entry).
func writeFile(t testing.TB, fsys vfs.FS, name string, data []byte) {
	t.Helper()
	f, err := fsys.Create(name)
	if err != nil {
		t.Fatalf("Create %s: %v", name, err)
	}
	defer f.Close()
	if _, err := f.Write(data); err != nil {
		t.Fatal(err)
	}
	if err := f.Sync(); err != nil {
		t.Fatal(err)
	}
	if err := fsys.SyncDir(testDir); err != nil {
		t.Fatal(err)
	}
}

// segmentNames lists the segment files of dir, in index order (the log's
// mark files are left out).
func segmentNames(t testing.TB, fsys vfs.FS, dir string) []string {
	t.Helper()
	names, err := fsys.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var segs []string
	for _, n := range names {
		if _, ok := parseSegmentName(n); ok {
			segs = append(segs, n)
		}
	}
	return segs
}

func segPath(base uint64) string { return newSegment(testDir, base).path }

func newRand(seed uint64) *rand.Rand { return rand.New(rand.NewPCG(seed, 0xae21e)) }
