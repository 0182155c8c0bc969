package eventlog

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/aerie-mq/aerie/internal/vfs"
)

// dropFS wraps a MemFS so that its files are CacheDroppers recording what
// they were asked to drop, and how much of the file was synced then.
type dropFS struct {
	vfs.FS
	drops *[]dropCall
}

type dropCall struct {
	name         string
	off, n       int64
	synced, size int64
}

type dropFile struct {
	vfs.File
	name   string
	synced int64
	drops  *[]dropCall
}

func (d dropFS) Create(name string) (vfs.File, error) {
	f, err := d.FS.Create(name)
	return &dropFile{File: f, name: name, drops: d.drops}, err
}

func (d dropFS) Open(name string) (vfs.File, error) {
	f, err := d.FS.Open(name)
	if err != nil {
		return nil, err
	}
	size, _ := f.Size()
	return &dropFile{File: f, name: name, synced: size, drops: d.drops}, nil
}

func (f *dropFile) Sync() error {
	err := f.File.Sync()
	if err == nil {
		f.synced, _ = f.File.Size()
	}
	return err
}

func (f *dropFile) DropCache(off, n int64) error {
	size, _ := f.File.Size()
	*f.drops = append(*f.drops, dropCall{f.name, off, n, f.synced, size})
	return nil
}

// TestDropSyncedDropsOnlySyncedWholePages: with DropSynced, every Sync
// drops the active segment's synced bytes from the page cache, in whole
// pages that follow one another without overlap, leaving the last, partial
// page; a sealed segment is dropped to its end; without it nothing is
// dropped. Every record still reads back.
func TestDropSyncedDropsOnlySyncedWholePages(t *testing.T) {
	for _, on := range []bool{false, true} {
		t.Run(fmt.Sprint("DropSynced=", on), func(t *testing.T) {
			var drops []dropCall
			fsys := dropFS{FS: vfs.NewMem(), drops: &drops}
			l, _ := mustOpen(t, fsys, Options{SegmentBytes: 16 << 10, DropSynced: on})
			var want [][]byte
			for b := 0; b < 40; b++ {
				want = append(want, appendRecords(t, l, len(want), 1+b%7*9)...)
				if err := l.Sync(); err != nil {
					t.Fatal(err)
				}
			}
			if !slices.EqualFunc(readLog(t, l), want, func(a, b []byte) bool { return string(a) == string(b) }) {
				t.Fatal("records read back differ from those appended")
			}
			if !on {
				if len(drops) != 0 {
					t.Fatalf("dropped %v without DropSynced", drops)
				}
				return
			}
			if len(drops) < 10 {
				t.Fatalf("only %d drops in 40 syncs over several segments", len(drops))
			}
			next := map[string]int64{}
			last := map[string]int{} // the index of each segment's last drop
			for i, d := range drops {
				last[d.name] = i
			}
			active := drops[len(drops)-1].name
			sealed := 0
			for i, d := range drops {
				if d.off != next[d.name] || d.n <= 0 {
					t.Fatalf("drop %+v does not follow the last one (%d)", d, next[d.name])
				}
				end := d.off + d.n
				if end > d.synced {
					t.Fatalf("drop %+v reaches past the synced bytes", d)
				}
				if end%pageSize != 0 {
					// Only a sealed segment's last page, which no Append
					// will write again, is dropped partly.
					if end != d.size || i != last[d.name] || d.name == active {
						t.Fatalf("drop %+v ends inside a page that later appends write to", d)
					}
					sealed++
				}
				next[d.name] = end
			}
			if sealed == 0 {
				t.Fatal("no sealed segment was dropped to its end")
			}
		})
	}
}

// TestDropSyncedKeepsFlushed: a log written with Flush and synced only
// now and then (a replicated PHB member's store) never drops bytes that
// are flushed but not synced: only a Flush that seals a segment (and
// fsyncs it) drops, that segment; each Sync drops the active segment's
// synced whole pages. Every record, flushed or synced, reads back.
func TestDropSyncedKeepsFlushed(t *testing.T) {
	var drops []dropCall
	fsys := dropFS{FS: vfs.NewMem(), drops: &drops}
	l, _ := mustOpen(t, fsys, Options{SegmentBytes: 16 << 10, DropSynced: true})
	var want [][]byte
	syncs, flushDrops := 0, 0
	for b := 0; b < 200; b++ {
		want = append(want, appendRecords(t, l, len(want), 1+b%5*7)...)
		before := len(drops)
		if b%23 == 22 {
			if err := l.Sync(); err != nil {
				t.Fatal(err)
			}
			syncs++
		} else {
			if err := l.Flush(); err != nil {
				t.Fatal(err)
			}
			for _, d := range drops[before:] {
				if d.name == l.activePath() {
					t.Fatalf("a Flush dropped %+v of the active segment, which it does not sync", d)
				}
				flushDrops++
			}
		}
		for _, d := range drops[before:] {
			if d.off+d.n > d.synced {
				t.Fatalf("drop %+v reaches past the synced bytes", d)
			}
		}
		if !slices.EqualFunc(readLog(t, l), want, func(a, b []byte) bool { return string(a) == string(b) }) {
			t.Fatalf("after batch %d the records read back differ from those appended", b)
		}
	}
	if syncs == 0 || flushDrops == 0 {
		t.Fatalf("%d syncs, %d segments sealed by a Flush and dropped: the test did not exercise both", syncs, flushDrops)
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
}

// TestDropSyncedOnDisk runs DropSynced on the OS filesystem: the advice
// is taken and the records read back from the disk.
func TestDropSyncedOnDisk(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "log")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	l, _, err := Open(vfs.OS(), dir, Options{SegmentBytes: 64 << 10, DropSynced: true})
	if err != nil {
		t.Fatal(err)
	}
	var want [][]byte
	for b := 0; b < 50; b++ {
		want = append(want, appendRecords(t, l, len(want), 50)...)
		if err := l.Sync(); err != nil {
			t.Fatal(err)
		}
	}
	got := readLog(t, l)
	if !slices.EqualFunc(got, want, func(a, b []byte) bool { return string(a) == string(b) }) {
		t.Fatalf("read back %d records, want %d, or they differ", len(got), len(want))
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
}

// TestAppendEncodedAsAppend: records encoded straight into the log's
// buffer are framed and read back as Append's are; a failed or empty
// encoding adds nothing.
func TestAppendEncodedAsAppend(t *testing.T) {
	fsys := vfs.NewMem()
	l, _ := mustOpen(t, fsys, Options{SegmentBytes: 4 << 10, MaxRecordBytes: 100})
	var want [][]byte
	bad := errors.New("cannot encode")
	for i := range 300 {
		p := record(i)
		switch i % 5 {
		case 0:
			if _, err := l.Append(p); err != nil {
				t.Fatal(err)
			}
		case 4:
			n := l.NextIndex()
			if _, err := l.AppendEncoded(func(dst []byte) ([]byte, error) { return append(dst, 1, 2), bad }); !errors.Is(err, bad) {
				t.Fatalf("a failed encoding gave %v", err)
			}
			if _, err := l.AppendEncoded(func(dst []byte) ([]byte, error) { return dst, nil }); !errors.Is(err, ErrEmptyRecord) {
				t.Fatalf("an empty encoding gave %v", err)
			}
			if _, err := l.AppendEncoded(func(dst []byte) ([]byte, error) { return append(dst, make([]byte, 101)...), nil }); !errors.Is(err, ErrRecordTooLarge) {
				t.Fatalf("a record past MaxRecordBytes gave %v", err)
			}
			if l.NextIndex() != n {
				t.Fatal("a refused encoding took an index")
			}
			continue
		default:
			idx, err := l.AppendEncoded(func(dst []byte) ([]byte, error) { return append(dst, p...), nil })
			if err != nil || idx != uint64(len(want)) {
				t.Fatalf("AppendEncoded: index %d, %v; want %d", idx, err, len(want))
			}
		}
		want = append(want, p)
		if i%17 == 0 {
			if err := l.Sync(); err != nil {
				t.Fatal(err)
			}
		}
	}
	if err := l.Sync(); err != nil {
		t.Fatal(err)
	}
	l.Close()
	l, rec := mustOpen(t, fsys, Options{SegmentBytes: 4 << 10, MaxRecordBytes: 100})
	if rec.TornTail {
		t.Fatalf("a clean log reopened with a torn tail: %+v", rec)
	}
	if got := readLog(t, l); !slices.EqualFunc(got, want, func(a, b []byte) bool { return string(a) == string(b) }) {
		t.Fatalf("read back %d records, want %d, or they differ", len(got), len(want))
	}
}
