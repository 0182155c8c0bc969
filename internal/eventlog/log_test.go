package eventlog

import (
	"bytes"
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/aerie-mq/aerie/internal/vfs"
)

func TestEmptyLog(t *testing.T) {
	m := vfs.NewMem()
	l, rec := mustOpen(t, m, Options{})
	if rec != (Recovery{}) {
		t.Fatalf("recovery on empty log: %+v", rec)
	}
	if l.NextIndex() != 0 || l.FirstIndex() != 0 || len(readLog(t, l)) != 0 {
		t.Fatal("empty log is not empty")
	}
	if err := l.Sync(); err != nil {
		t.Fatalf("Sync of nothing: %v", err)
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	if err := l.Close(); !errors.Is(err, ErrClosed) {
		t.Fatalf("second Close: %v", err)
	}
	if _, err := l.Append([]byte("x")); !errors.Is(err, ErrClosed) {
		t.Fatalf("Append after Close: %v", err)
	}
}

func TestRoundTrip(t *testing.T) {
	m := vfs.NewMem()
	l, _ := mustOpen(t, m, Options{})
	want := appendRecords(t, l, 0, 100)
	if err := l.Sync(); err != nil {
		t.Fatal(err)
	}
	if l.DurableIndex() != 100 {
		t.Fatalf("DurableIndex = %d, want 100", l.DurableIndex())
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}

	l, rec := mustOpen(t, m, Options{})
	if rec.TornTail {
		t.Fatalf("clean reopen reported a torn tail: %+v", rec)
	}
	equalRecords(t, readLog(t, l), want)
	// Indexes continue across reopen.
	want = append(want, appendRecords(t, l, 100, 10)...)
	if err := l.Close(); err != nil { // Close syncs
		t.Fatal(err)
	}
	l, _ = mustOpen(t, m, Options{})
	equalRecords(t, readLog(t, l), want)
}

func TestOSRoundTrip(t *testing.T) {
	fsys := vfs.OS()
	dir := t.TempDir()
	l, _, err := Open(fsys, dir, Options{SegmentBytes: 1 << 10})
	if err != nil {
		t.Fatal(err)
	}
	want := appendRecords(t, l, 0, 200)
	if err := l.Sync(); err != nil {
		t.Fatal(err)
	}
	l.Close()
	names := segmentNames(t, fsys, dir)
	if len(names) < 2 {
		t.Fatalf("expected several segments, got %v", names)
	}
	// Tear the tail by hand: half of one more frame.
	last := names[len(names)-1]
	f, err := fsys.Open(dir + "/" + last)
	if err != nil {
		t.Fatal(err)
	}
	f.Write(appendFrame(nil, []byte("torn record"))[:10])
	f.Close()

	l, rec, err := Open(fsys, dir, Options{SegmentBytes: 1 << 10})
	if err != nil {
		t.Fatal(err)
	}
	if !rec.TornTail || rec.TruncatedBytes != 10 || !strings.HasSuffix(rec.Segment, last) {
		t.Fatalf("recovery = %+v, want 10 torn bytes in %s", rec, last)
	}
	var got [][]byte
	l.Replay(0, func(_ uint64, p []byte) error { got = append(got, p); return nil })
	equalRecords(t, got, want)
	l.Close()
}

func TestReplay(t *testing.T) {
	m := vfs.NewMem()
	l, _ := mustOpen(t, m, Options{SegmentBytes: 256})
	want := appendRecords(t, l, 0, 30)
	l.Sync()
	want = append(want, appendRecords(t, l, 30, 5)...) // buffered only

	for _, from := range []uint64{0, 1, 7, 29, 30, 33, 35} {
		var got [][]byte
		next := from
		err := l.Replay(from, func(i uint64, p []byte) error {
			if i != next {
				t.Fatalf("from %d: index %d, want %d", from, i, next)
			}
			next++
			got = append(got, p)
			return nil
		})
		if err != nil {
			t.Fatalf("Replay(%d): %v", from, err)
		}
		equalRecords(t, got, want[from:])
	}
	if err := l.Replay(36, func(uint64, []byte) error { return nil }); !errors.Is(err, ErrOutOfRange) {
		t.Fatalf("Replay past end: %v", err)
	}
	stop := errors.New("stop")
	calls := 0
	err := l.Replay(0, func(uint64, []byte) error { calls++; return stop })
	if err != stop || calls != 1 {
		t.Fatalf("callback error: got %v after %d calls", err, calls)
	}
	// Payloads handed to fn are owned by it: mutating one changes nothing.
	l.Replay(32, func(_ uint64, p []byte) error { p[0] ^= 0xff; return nil })
	equalRecords(t, readLog(t, l), want)
}

func TestRecordLimits(t *testing.T) {
	m := vfs.NewMem()
	l, _ := mustOpen(t, m, Options{MaxRecordBytes: 100})
	if _, err := l.Append(make([]byte, 101)); !errors.Is(err, ErrRecordTooLarge) {
		t.Fatalf("oversized Append: %v", err)
	}
	if _, err := l.Append(nil); !errors.Is(err, ErrEmptyRecord) {
		t.Fatalf("empty Append: %v", err)
	}
	if i, err := l.Append(make([]byte, 100)); err != nil || i != 0 {
		t.Fatalf("Append at the limit: %d, %v", i, err)
	}
	// Refused appends consume no index and do not fail the log.
	if err := l.Sync(); err != nil {
		t.Fatal(err)
	}
	if l.NextIndex() != 1 {
		t.Fatalf("NextIndex = %d, want 1", l.NextIndex())
	}
	for _, o := range []Options{{SegmentBytes: -1}, {MaxRecordBytes: -1}, {MaxRecordBytes: 1 << 33}} {
		if _, _, err := Open(m, testDir, o); !errors.Is(err, ErrInvalidOptions) {
			t.Fatalf("Open(%+v): %v", o, err)
		}
	}
}

func TestSegmentRollingAndTruncateFront(t *testing.T) {
	m := vfs.NewMem()
	// Each frame is 8 + 64 bytes, so three fit in a 256-byte segment.
	opts := Options{SegmentBytes: 256}
	l, _ := mustOpen(t, m, opts)
	var want [][]byte
	for i := range 20 {
		p := bytes.Repeat([]byte{byte(i + 1)}, 64)
		if _, err := l.Append(p); err != nil {
			t.Fatal(err)
		}
		want = append(want, p)
		if i%4 == 3 { // roll both inside one Sync and across Syncs
			if err := l.Sync(); err != nil {
				t.Fatal(err)
			}
		}
	}
	if err := l.Sync(); err != nil {
		t.Fatal(err)
	}
	names := segmentNames(t, m, testDir)
	var wantNames []string
	for base := uint64(0); base < 20; base += 3 {
		wantNames = append(wantNames, segmentName(base))
	}
	if !slices.Equal(names, wantNames) {
		t.Fatalf("segments = %v, want %v", names, wantNames)
	}
	for _, n := range names {
		if size, _ := m.Stat(testDir + "/" + n); size > opts.SegmentBytes {
			t.Fatalf("segment %s has %d bytes, limit %d", n, size, opts.SegmentBytes)
		}
	}

	// Release everything below 7: segments [0,3) and [3,6) go, [6,9) stays.
	if err := l.TruncateFront(7); err != nil {
		t.Fatal(err)
	}
	if l.FirstIndex() != 6 {
		t.Fatalf("FirstIndex = %d, want 6", l.FirstIndex())
	}
	if err := l.Replay(5, func(uint64, []byte) error { return nil }); !errors.Is(err, ErrTruncated) {
		t.Fatalf("Replay below FirstIndex: %v", err)
	}
	equalRecords(t, readLog(t, l), want[6:])

	// The active segment survives any TruncateFront.
	if err := l.TruncateFront(1000); err != nil {
		t.Fatal(err)
	}
	if l.FirstIndex() != 18 {
		t.Fatalf("FirstIndex = %d, want 18", l.FirstIndex())
	}
	l.Close()
	l, _ = mustOpen(t, m, opts)
	if l.FirstIndex() != 18 || l.NextIndex() != 20 {
		t.Fatalf("after reopen: first %d next %d, want 18 20", l.FirstIndex(), l.NextIndex())
	}
	equalRecords(t, readLog(t, l), want[18:])

	// A record larger than a segment gets a segment of its own.
	if _, err := l.Append(make([]byte, 1000)); err != nil {
		t.Fatal(err)
	}
	l.Append([]byte("after"))
	if err := l.Sync(); err != nil {
		t.Fatal(err)
	}
	names = segmentNames(t, m, testDir)
	if want := []string{segmentName(18), segmentName(20), segmentName(21)}; !slices.Equal(names, want) {
		t.Fatalf("segments = %v, want %v", names, want)
	}
}

func TestIgnoresForeignFiles(t *testing.T) {
	m := vfs.NewMem()
	l, _ := mustOpen(t, m, Options{})
	want := appendRecords(t, l, 0, 3)
	l.Close()
	writeFile(t, m, testDir+"/README", []byte("not a segment"))
	writeFile(t, m, testDir+"/123.log", []byte("not a segment either"))
	l, _ = mustOpen(t, m, Options{})
	equalRecords(t, readLog(t, l), want)
}
