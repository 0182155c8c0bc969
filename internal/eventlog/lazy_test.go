package eventlog

import (
	"errors"
	"strings"
	"testing"

	"github.com/aerie-mq/aerie/internal/vfs"
)

// TestLazyOpenReadsOnlyTheLastSegment: with LazySealed, Open reads the last
// segment and none of the sealed ones, whatever the log holds; the records
// are all there, and a sealed segment gets its marks as it is read, so a
// second read from its middle starts near what it wants.
func TestLazyOpenReadsOnlyTheLastSegment(t *testing.T) {
	var read int64
	fsys := countingFS{vfs.NewMem(), &read}
	opts := Options{SegmentBytes: 1 << 20, LazySealed: true}
	l, _ := mustOpen(t, fsys, opts)
	const n = 100000 // about 4 MB: four sealed segments and an active one
	want := appendRecords(t, l, 0, n)
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	segs := segmentNames(t, fsys, testDir)
	if len(segs) < 4 {
		t.Fatalf("%d segments, want at least 4", len(segs))
	}
	read = 0
	l, _ = mustOpen(t, fsys, opts)
	defer l.Close()
	info := l.Segments()
	last := info[len(info)-1]
	if read > last.Size+4<<10 { // and the synced marks
		t.Fatalf("Open read %d bytes; the last segment has %d", read, last.Size)
	}
	equalRecords(t, readLog(t, l), want)
	mid := (info[1].Base + info[1].Next) / 2
	read = 0
	stop := errors.New("stop")
	if err := l.Replay(mid, func(uint64, []byte) error { return stop }); !errors.Is(err, stop) {
		t.Fatal(err)
	}
	if limit := int64(markEvery + 256<<10 + 2*frameHeaderSize); read > limit {
		t.Fatalf("a read from the middle of a sealed segment read %d bytes, want at most %d", read, limit)
	}
}

// TestLazyOpenFindsDamageWhenRead: damage in a sealed segment is not seen
// by a lazy Open; reading the segment (Replay, Verify) refuses it, naming
// the file, as an Open that reads everything does.
func TestLazyOpenFindsDamageWhenRead(t *testing.T) {
	fsys := vfs.NewMem()
	l, _ := mustOpen(t, fsys, Options{SegmentBytes: 4 << 10})
	appendRecords(t, l, 0, 2000)
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	segs := segmentNames(t, fsys, testDir)
	name := testDir + "/" + segs[1]
	b := readFile(t, fsys, name)
	b[len(b)/2] ^= 0x10
	writeFile(t, fsys, name, b)
	if _, _, err := Open(fsys, testDir, Options{SegmentBytes: 4 << 10}); !errors.Is(err, ErrCorrupt) {
		t.Fatalf("Open: %v, want ErrCorrupt", err)
	}
	l, _ = mustOpen(t, fsys, Options{SegmentBytes: 4 << 10, LazySealed: true})
	defer l.Close()
	err := l.Replay(l.FirstIndex(), func(uint64, []byte) error { return nil })
	if !errors.Is(err, ErrCorrupt) || !strings.Contains(err.Error(), segs[1]) {
		t.Fatalf("Replay: %v, want ErrCorrupt naming %s", err, segs[1])
	}
	info := l.Segments()
	if err := l.Verify(info[0].Base); err != nil {
		t.Fatalf("Verify of an undamaged segment: %v", err)
	}
	if err := l.Verify(info[1].Base); !errors.Is(err, ErrCorrupt) {
		t.Fatalf("Verify of the damaged segment: %v, want ErrCorrupt", err)
	}
}
