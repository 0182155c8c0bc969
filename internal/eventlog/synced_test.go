package eventlog

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/aerie-mq/aerie/internal/vfs"
)

// damagedAcked is the part of Open's error that says acknowledged records
// were damaged, not a torn tail.
const damagedAcked = "acknowledged records are damaged"

// syncedLog writes n records in Syncs of three and returns the records and
// the byte offset of each frame in the (only) segment.
func syncedLog(t *testing.T, l *Log, n int) ([][]byte, []int64) {
	t.Helper()
	var recs [][]byte
	for i := 0; i < n; i += 3 {
		recs = append(recs, appendRecords(t, l, i, min(3, n-i))...)
		if err := l.Sync(); err != nil {
			t.Fatal(err)
		}
	}
	return recs, frameOffsets(recs)
}

// TestFlippedSyncedLastRecordIsRefused: a byte flipped in the last record,
// which a Sync made durable, is corruption even though nothing valid
// follows it (what a torn write would also leave): Open refuses it naming
// the file and offset, and leaves the file as it was.
func TestFlippedSyncedLastRecordIsRefused(t *testing.T) {
	for _, end := range []string{"clean close", "kill"} {
		t.Run(end, func(t *testing.T) {
			m := vfs.NewMem()
			l, _ := mustOpen(t, m, Options{})
			recs, offs := syncedLog(t, l, 10)
			if end == "kill" {
				m.Kill() // the process dies; the kernel keeps what it was given
			} else if err := l.Close(); err != nil {
				t.Fatal(err)
			}
			data := readFile(t, m, segPath(0))
			last := offs[len(recs)-1]
			data[last+frameHeaderSize+2] ^= 0x04
			writeFile(t, m, segPath(0), data)

			_, _, err := Open(m, testDir, Options{})
			if !errors.Is(err, ErrCorrupt) {
				t.Fatalf("Open: %v, want ErrCorrupt", err)
			}
			for _, want := range []string{segPath(0), fmt.Sprintf("offset %d:", last), damagedAcked} {
				if !strings.Contains(err.Error(), want) {
					t.Fatalf("error %q does not say %q", err, want)
				}
			}
			if got := readFile(t, m, segPath(0)); string(got) != string(data) {
				t.Fatal("the refused segment was modified")
			}
		})
	}
}

// TestUnsyncedTornTailIsTruncated: past what was synced, a bad last frame
// is still a torn tail, truncated, also when the marks say exactly where
// the synced bytes end.
func TestUnsyncedTornTailIsTruncated(t *testing.T) {
	m := vfs.NewMem()
	l, _ := mustOpen(t, m, Options{})
	want, _ := syncedLog(t, l, 9)
	appendRecords(t, l, 9, 2)
	if err := l.Flush(); err != nil { // written, never fsynced
		t.Fatal(err)
	}
	m.Kill()
	data := readFile(t, m, segPath(0))
	synced := frameOffsets(append(want, record(9)))[9]
	torn := synced + frameHeaderSize + 5
	data[torn] ^= 0x01 // the first unsynced record: not whole on disk
	writeFile(t, m, segPath(0), data[:torn+1])

	l, rec := mustOpen(t, m, Options{})
	wantRec := Recovery{TornTail: true, TruncatedBytes: torn + 1 - synced, Segment: segPath(0), Offset: synced}
	if rec != wantRec {
		t.Fatalf("recovery %+v, want %+v", rec, wantRec)
	}
	equalRecords(t, readLog(t, l), want)
}

// TestSyncedBytesMissingIsRefused: a last segment shorter than what a Sync
// made durable has lost acknowledged records, even when it ends on a frame
// boundary; so has a log whose marked segment is gone.
func TestSyncedBytesMissingIsRefused(t *testing.T) {
	t.Run("shorter", func(t *testing.T) {
		m := vfs.NewMem()
		l, _ := mustOpen(t, m, Options{})
		recs, offs := syncedLog(t, l, 10)
		l.Close()
		data := readFile(t, m, segPath(0))
		writeFile(t, m, segPath(0), data[:offs[len(recs)-1]])
		_, _, err := Open(m, testDir, Options{})
		if !errors.Is(err, ErrCorrupt) || !strings.Contains(err.Error(), "acknowledged records are missing") {
			t.Fatalf("Open: %v, want ErrCorrupt saying acknowledged records are missing", err)
		}
	})
	t.Run("segment gone", func(t *testing.T) {
		m := vfs.NewMem()
		l, _ := mustOpen(t, m, Options{SegmentBytes: 100})
		syncedLog(t, l, 10)
		l.Close()
		names := segmentNames(t, m, testDir)
		gone := filepath.Join(testDir, names[len(names)-1])
		if err := m.Remove(gone); err != nil {
			t.Fatal(err)
		}
		_, _, err := Open(m, testDir, Options{SegmentBytes: 100})
		if !errors.Is(err, ErrCorrupt) || !strings.Contains(err.Error(), gone) {
			t.Fatalf("Open: %v, want ErrCorrupt naming %s", err, gone)
		}
	})
}

// TestMarksNeverRunAhead: after a power loss the surviving mark, if any,
// vouches for no byte that was not durable, however many Syncs switched
// mark files; and the records synced are all there.
func TestMarksNeverRunAhead(t *testing.T) {
	var sawMark bool
	for seed := range uint64(40) {
		m := vfs.NewMem()
		opts := Options{SegmentBytes: 4 << 10}
		l, _ := mustOpen(t, m, opts)
		rng := newRand(seed)
		n := 0
		// Enough Syncs to switch mark files more than once.
		syncs := 1 + rng.IntN(3*markFileBytes/markSize)
		for range syncs {
			appendRecords(t, l, n, 1)
			n++
			if err := l.Sync(); err != nil {
				t.Fatal(err)
			}
		}
		durable := l.segs[len(l.segs)-1]
		durableSize := l.activeSize
		appendRecords(t, l, n, 3)
		if err := l.Flush(); err != nil {
			t.Fatal(err)
		}
		m.Crash(rng)
		mark, _, found, err := readMark(m, testDir)
		if err != nil {
			t.Fatal(err)
		}
		if found && (mark.base > durable.base || mark.base == durable.base && mark.size > durableSize) {
			t.Fatalf("seed %d: mark %+v runs ahead of segment %d synced to %d", seed, mark, durable.base, durableSize)
		}
		sawMark = sawMark || found && mark.base == durable.base
		l, _ = mustOpen(t, m, opts)
		if got := readLog(t, l); len(got) < n {
			t.Fatalf("seed %d: %d records after the crash, %d were synced", seed, len(got), n)
		}
		l.Close()
	}
	if !sawMark {
		t.Fatal("no crash kept a mark of the last segment: the test does not test")
	}
}

// TestFreshLogDropsStaleMarks: a log created in a directory whose old log
// was removed (its segments, not its marks) does not inherit their marks.
func TestFreshLogDropsStaleMarks(t *testing.T) {
	m := vfs.NewMem()
	l, _ := mustOpen(t, m, Options{})
	syncedLog(t, l, 10)
	l.Close()
	l, _ = mustOpen(t, m, Options{}) // marks go to the other file now
	appendRecords(t, l, 10, 1)
	l.Close()
	if err := m.Remove(segPath(0)); err != nil {
		t.Fatal(err)
	}
	l, _ = mustOpen(t, m, Options{}) // empty again, from index 0
	want := appendRecords(t, l, 0, 1)
	l.Close()
	l, _ = mustOpen(t, m, Options{})
	equalRecords(t, readLog(t, l), want)
}

// TestOSFlippedSyncedRecordIsRefused is TestFlippedSyncedLastRecordIsRefused
// and TestUnsyncedTornTailIsTruncated on the real filesystem.
func TestOSFlippedSyncedRecordIsRefused(t *testing.T) {
	fsys := vfs.OS()
	dir := t.TempDir()
	l, _, err := Open(fsys, dir, Options{})
	if err != nil {
		t.Fatal(err)
	}
	recs, offs := syncedLog(t, l, 10)
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	seg := filepath.Join(dir, segmentName(0))
	good, err := os.ReadFile(seg)
	if err != nil {
		t.Fatal(err)
	}

	// Half a frame past the synced bytes: a torn tail.
	torn := append(append([]byte(nil), good...), appendFrame(nil, []byte("never synced"))[:10]...)
	if err := os.WriteFile(seg, torn, 0o644); err != nil {
		t.Fatal(err)
	}
	l, rec, err := Open(fsys, dir, Options{})
	if err != nil || !rec.TornTail || rec.Offset != int64(len(good)) {
		t.Fatalf("Open of a torn tail: %v, %+v", err, rec)
	}
	equalRecords(t, readLog(t, l), recs)
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}

	// A bit flipped in the last, synced record: refused.
	bad := append([]byte(nil), good...)
	last := offs[len(offs)-1]
	bad[last+frameHeaderSize] ^= 0x40
	if err := os.WriteFile(seg, bad, 0o644); err != nil {
		t.Fatal(err)
	}
	_, _, err = Open(fsys, dir, Options{})
	if !errors.Is(err, ErrCorrupt) || !strings.Contains(err.Error(), seg) ||
		!strings.Contains(err.Error(), fmt.Sprintf("offset %d:", last)) || !strings.Contains(err.Error(), damagedAcked) {
		t.Fatalf("Open: %v, want ErrCorrupt naming %s, offset %d and %q", err, seg, last, damagedAcked)
	}
	if got, _ := os.ReadFile(seg); string(got) != string(bad) {
		t.Fatal("the refused segment was modified")
	}
}

// TestSyncedLengthStopsAtTheLastSync: SyncedLength names the active
// segment and the bytes its last Sync made durable, not frames flushed
// after it (what a kill between a write and its fsync leaves).
func TestSyncedLengthStopsAtTheLastSync(t *testing.T) {
	m := vfs.NewMem()
	if _, _, ok, err := SyncedLength(m, testDir); ok || err != nil {
		t.Fatalf("SyncedLength of no log = ok %v, err %v; want neither", ok, err)
	}
	l, _ := mustOpen(t, m, Options{})
	syncedLog(t, l, 7)
	durable := l.activeSize
	appendRecords(t, l, 7, 2)
	if err := l.Flush(); err != nil {
		t.Fatal(err)
	}
	seg, size, ok, err := SyncedLength(m, testDir)
	if err != nil || !ok {
		t.Fatalf("SyncedLength: ok %v, err %v", ok, err)
	}
	if want := segmentName(l.segs[len(l.segs)-1].base); seg != want || size != durable {
		t.Fatalf("SyncedLength = %s, %d; want %s, %d (flushed to %d)", seg, size, want, durable, l.activeSize)
	}
	l.Close()
}
