package eventlog

import (
	"errors"
	"testing"

	"github.com/aerie-mq/aerie/internal/vfs"
)

// countingFS counts the bytes read through every file it opens.
type countingFS struct {
	vfs.FS
	read *int64
}

func (c countingFS) Open(name string) (vfs.File, error) {
	f, err := c.FS.Open(name)
	return countingFile{f, c.read}, err
}

func (c countingFS) Create(name string) (vfs.File, error) {
	f, err := c.FS.Create(name)
	return countingFile{f, c.read}, err
}

type countingFile struct {
	vfs.File
	read *int64
}

func (c countingFile) ReadAt(p []byte, off int64) (int, error) {
	n, err := c.File.ReadAt(p, off)
	*c.read += int64(n)
	return n, err
}

// TestReplayFromMiddleReadsLittle: Replay from an index deep inside a big
// segment starts at the nearest mark, so reading one record costs about
// markEvery bytes plus one read-ahead buffer, not the segment up to it. It
// holds for marks taken while appending and for marks rebuilt by Open.
func TestReplayFromMiddleReadsLittle(t *testing.T) {
	var read int64
	fsys := countingFS{vfs.NewMem(), &read}
	l, _ := mustOpen(t, fsys, Options{})
	const n = 40000 // about 1.6 MB, one segment
	want := appendRecords(t, l, 0, n)
	if err := l.Sync(); err != nil {
		t.Fatal(err)
	}
	stop := errors.New("stop")
	check := func(l *Log, label string) {
		t.Helper()
		for _, from := range []uint64{0, 1, n / 3, n / 2, n - 1} {
			read = 0
			var got []byte
			err := l.Replay(from, func(i uint64, p []byte) error {
				if i != from {
					t.Fatalf("%s: Replay(%d) started at %d", label, from, i)
				}
				got = p
				return stop
			})
			if !errors.Is(err, stop) {
				t.Fatalf("%s: Replay(%d): %v", label, from, err)
			}
			if string(got) != string(want[from]) {
				t.Fatalf("%s: Replay(%d) = %q, want %q", label, from, got, want[from])
			}
			if limit := int64(markEvery + 256<<10 + frameHeaderSize + 64); read > limit {
				t.Errorf("%s: Replay(%d) read %d bytes, want at most %d", label, from, read, limit)
			}
		}
	}
	check(l, "appended")
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	l, _ = mustOpen(t, fsys, Options{})
	defer l.Close()
	check(l, "reopened")
	// Every record is still there, in order, when read from the start.
	if got := readLog(t, l); len(got) != n {
		t.Fatalf("read %d records back, want %d", len(got), n)
	}
}
