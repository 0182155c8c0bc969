package eventlog

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/aerie-mq/aerie/internal/vfs"
)

func TestCrashAfterSyncLosesNothing(t *testing.T) {
	for seed := range uint64(100) {
		m := vfs.NewMem()
		l, _ := mustOpen(t, m, Options{SegmentBytes: 512})
		want := appendRecords(t, l, 0, 50)
		if err := l.Sync(); err != nil {
			t.Fatal(err)
		}
		m.Crash(newRand(seed))
		l, rec := mustOpen(t, m, Options{SegmentBytes: 512})
		if rec.TornTail {
			t.Fatalf("seed %d: torn tail after a clean Sync: %+v", seed, rec)
		}
		equalRecords(t, readLog(t, l), want)
	}
}

func TestCrashWithUnsyncedAppendsKeepsPrefix(t *testing.T) {
	var sawTorn, sawAll, sawNone bool
	for seed := range uint64(300) {
		m := vfs.NewMem()
		l, _ := mustOpen(t, m, Options{})
		want := appendRecords(t, l, 0, 10)
		if err := l.Sync(); err != nil {
			t.Fatal(err)
		}
		want = append(want, appendRecords(t, l, 10, 10)...)
		// Push the second batch to the file without fsync, as a Sync that
		// crashed half-way would: make the fsync fail.
		m.InjectError(vfs.OpSync, "", errors.New("power cut"))
		if err := l.Sync(); err == nil {
			t.Fatal("Sync with injected error succeeded")
		}
		sizeBefore, _ := m.Stat(segPath(0))
		m.Crash(newRand(seed))
		sizeAfter, _ := m.Stat(segPath(0))

		l, rec := mustOpen(t, m, Options{})
		got := readLog(t, l)
		if len(got) < 10 {
			t.Fatalf("seed %d: lost synced records: %d left", seed, len(got))
		}
		equalRecords(t, got, want[:len(got)])

		var frames int64
		for _, p := range got {
			frames += int64(frameHeaderSize + len(p))
		}
		if torn := sizeAfter != frames; torn != rec.TornTail {
			t.Fatalf("seed %d: file %d bytes, frames %d, recovery %+v", seed, sizeAfter, frames, rec)
		}
		if rec.TornTail {
			sawTorn = true
			if rec.Offset != frames || rec.TruncatedBytes != sizeAfter-frames || rec.Segment != segPath(0) {
				t.Fatalf("seed %d: recovery %+v, want offset %d, %d bytes", seed, rec, frames, sizeAfter-frames)
			}
			if size, _ := m.Stat(segPath(0)); size != frames {
				t.Fatalf("seed %d: torn tail not truncated: size %d", seed, size)
			}
		}
		sawAll = sawAll || sizeAfter == sizeBefore
		sawNone = sawNone || sizeAfter == frames && len(got) == 10
		// The recovered log accepts appends at the right index.
		if i, err := l.Append([]byte("next")); err != nil || i != uint64(len(got)) {
			t.Fatalf("seed %d: Append after recovery = %d, %v", seed, i, err)
		}
	}
	if !sawTorn || !sawAll || !sawNone {
		t.Fatalf("outcomes: torn=%v all=%v none=%v; want all three", sawTorn, sawAll, sawNone)
	}
}

func TestTornTailOfGarbageIsTruncated(t *testing.T) {
	for name, tail := range map[string][]byte{
		"zeros":        make([]byte, 100),
		"short header": {1, 2, 3},
		"huge length":  {0xff, 0xff, 0xff, 0x7f, 1, 2, 3, 4, 5},
		"bad checksum": func() []byte { f := appendFrame(nil, []byte("last")); f[5] ^= 1; return f }(),
	} {
		t.Run(name, func(t *testing.T) {
			m := vfs.NewMem()
			l, _ := mustOpen(t, m, Options{})
			want := appendRecords(t, l, 0, 5)
			l.Close()
			good := readFile(t, m, segPath(0))
			writeFile(t, m, segPath(0), append(good, tail...))

			l, rec := mustOpen(t, m, Options{})
			wantRec := Recovery{TornTail: true, TruncatedBytes: int64(len(tail)), Segment: segPath(0), Offset: int64(len(good))}
			if rec != wantRec {
				t.Fatalf("recovery = %+v, want %+v", rec, wantRec)
			}
			equalRecords(t, readLog(t, l), want)
		})
	}
}

// frameOffsets returns the byte offset of each frame in a segment.
func frameOffsets(records [][]byte) []int64 {
	var offs []int64
	var off int64
	for _, p := range records {
		offs = append(offs, off)
		off += int64(frameHeaderSize + len(p))
	}
	return offs
}

func TestMidLogCorruptionIsRefused(t *testing.T) {
	for _, tc := range []struct {
		name   string
		record int // frame to damage
		at     int // byte within the frame
		bit    byte
	}{
		{"payload bit flip", 2, frameHeaderSize + 3, 0x10},
		{"checksum bit flip", 2, 5, 0x01},
		{"length low bit", 2, 0, 0x01},
		{"length high bit", 2, 3, 0x80},
		{"first record", 0, frameHeaderSize, 0x01},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m := vfs.NewMem()
			l, _ := mustOpen(t, m, Options{})
			recs := appendRecords(t, l, 0, 5)
			l.Close()
			data := readFile(t, m, segPath(0))
			off := frameOffsets(recs)[tc.record]
			data[off+int64(tc.at)] ^= tc.bit
			writeFile(t, m, segPath(0), data)

			_, _, err := Open(m, testDir, Options{})
			if !errors.Is(err, ErrCorrupt) {
				t.Fatalf("Open: %v, want ErrCorrupt", err)
			}
			msg := err.Error()
			if !strings.Contains(msg, segPath(0)) || !strings.Contains(msg, fmt.Sprintf("offset %d:", off)) {
				t.Fatalf("error %q does not name %s and offset %d", msg, segPath(0), off)
			}
			if size, _ := m.Stat(segPath(0)); size != int64(len(data)) {
				t.Fatalf("refused log was modified: size %d, was %d", size, len(data))
			}
		})
	}
}

func TestCorruptSealedSegmentIsRefused(t *testing.T) {
	opts := Options{SegmentBytes: 100}
	setup := func(t *testing.T) (*vfs.MemFS, []byte) {
		m := vfs.NewMem()
		l, _ := mustOpen(t, m, opts)
		appendRecords(t, l, 0, 20)
		l.Close()
		return m, readFile(t, m, segPath(0))
	}
	t.Run("bad checksum in last frame", func(t *testing.T) {
		m, data := setup(t)
		data[len(data)-1] ^= 1
		writeFile(t, m, segPath(0), data)
		if _, _, err := Open(m, testDir, opts); !errors.Is(err, ErrCorrupt) || !strings.Contains(err.Error(), segPath(0)) {
			t.Fatalf("Open: %v, want ErrCorrupt naming %s", err, segPath(0))
		}
	})
	t.Run("truncated", func(t *testing.T) {
		m, data := setup(t)
		writeFile(t, m, segPath(0), data[:len(data)-1])
		if _, _, err := Open(m, testDir, opts); !errors.Is(err, ErrCorrupt) {
			t.Fatalf("Open: %v, want ErrCorrupt", err)
		}
	})
	t.Run("missing segment", func(t *testing.T) {
		m, _ := setup(t)
		names := segmentNames(t, m, testDir)
		if len(names) < 3 {
			t.Fatalf("want at least 3 segments, got %v", names)
		}
		m.Remove(testDir + "/" + names[1])
		if _, _, err := Open(m, testDir, opts); !errors.Is(err, ErrCorrupt) {
			t.Fatalf("Open: %v, want ErrCorrupt", err)
		}
	})
}

func TestReplayDetectsLaterCorruption(t *testing.T) {
	m := vfs.NewMem()
	l, _ := mustOpen(t, m, Options{SegmentBytes: 100})
	appendRecords(t, l, 0, 20)
	l.Sync()
	data := readFile(t, m, segPath(0))
	data[frameHeaderSize] ^= 1
	writeFile(t, m, segPath(0), data)
	err := l.Replay(0, func(uint64, []byte) error { return nil })
	if !errors.Is(err, ErrCorrupt) || !strings.Contains(err.Error(), segPath(0)+": offset 0:") {
		t.Fatalf("Replay: %v, want ErrCorrupt at %s offset 0", err, segPath(0))
	}
}

// TestFlushWritesWithoutSync: flushed records are read back (across
// segment rolls) but not durable until a Sync; a crash keeps the synced
// records and a prefix of the flushed ones, and a Sync after a Flush makes
// them all durable.
func TestFlushWritesWithoutSync(t *testing.T) {
	var sawLoss bool
	for seed := range uint64(100) {
		m := vfs.NewMem()
		l, _ := mustOpen(t, m, Options{SegmentBytes: 512})
		want := appendRecords(t, l, 0, 10)
		if err := l.Sync(); err != nil {
			t.Fatal(err)
		}
		want = append(want, appendRecords(t, l, 10, 30)...)
		if err := l.Flush(); err != nil {
			t.Fatal(err)
		}
		if len(l.buf) != 0 || l.DurableIndex() != 10 {
			t.Fatalf("after Flush: %d bytes buffered, durable index %d; want 0 and 10", len(l.buf), l.DurableIndex())
		}
		want = append(want, appendRecords(t, l, 40, 5)...)
		equalRecords(t, readLog(t, l), want)
		if seed%2 == 1 {
			if err := l.Sync(); err != nil {
				t.Fatal(err)
			}
			if l.DurableIndex() != 45 {
				t.Fatalf("durable index %d after Sync, want 45", l.DurableIndex())
			}
		}
		m.Crash(newRand(seed))
		l, _ = mustOpen(t, m, Options{SegmentBytes: 512})
		got := readLog(t, l)
		if seed%2 == 1 && len(got) != 45 || len(got) < 10 {
			t.Fatalf("seed %d: %d records after the crash", seed, len(got))
		}
		equalRecords(t, got, want[:len(got)])
		sawLoss = sawLoss || len(got) < 45
	}
	if !sawLoss {
		t.Fatal("no crash lost a flushed, unsynced record: the test does not test")
	}
}
