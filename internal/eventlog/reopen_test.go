package eventlog

import (
	"errors"
	"math/rand/v2"
	"syscall"
	"testing"

	"github.com/aerie-mq/aerie/internal/vfs"
)

// TestReopenAfterDiskFull: a log whose writes or fsyncs failed on a full
// disk is reopened in place once room returns. It keeps exactly what the
// last successful Sync made durable, whatever the failed writes left in
// the files (a short write, a roll to a new segment, pages a failed fsync
// marked clean), takes the failed records again, and a power loss after
// its next Sync keeps them all.
func TestReopenAfterDiskFull(t *testing.T) {
	for _, tc := range []struct {
		name string
		n    int  // records appended while full: 10 roll, 1 does not
		dir  bool // the failure is the directory's fsync after a roll
	}{{"in the active segment", 1, false}, {"across a roll", 10, false}, {"a segment made by a roll", 10, true}} {
		t.Run(tc.name, func(t *testing.T) {
			m := vfs.NewMem()
			l, _ := mustOpen(t, m, Options{SegmentBytes: 200})
			want := appendRecords(t, l, 0, 3)
			if err := l.Sync(); err != nil {
				t.Fatal(err)
			}
			if tc.dir {
				m.InjectError(vfs.OpSyncDir, "", syscall.ENOSPC)
			} else {
				m.SetFull(syscall.ENOSPC)
			}
			segs := len(l.Segments())
			failed := appendRecords(t, l, 3, tc.n)
			if err := l.Sync(); !errors.Is(err, syscall.ENOSPC) || !errors.Is(err, ErrFailed) {
				t.Fatalf("Sync on a full disk: %v, want ErrFailed wrapping ENOSPC", err)
			}
			if tc.dir && len(l.Segments()) == segs {
				t.Fatal("no segment was made before the failure")
			}
			m.SetFull(nil)
			nl, _, err := l.Reopen()
			if err != nil {
				t.Fatalf("Reopen: %v", err)
			}
			if nl.NextIndex() != 3 || nl.DurableIndex() != 3 {
				t.Fatalf("reopened log: next %d, durable %d, want 3", nl.NextIndex(), nl.DurableIndex())
			}
			equalRecords(t, readLog(t, nl), want)
			for i, p := range failed {
				if idx, err := nl.Append(p); err != nil || idx != uint64(3+i) {
					t.Fatalf("Append again: %d, %v", idx, err)
				}
			}
			if err := nl.Sync(); err != nil {
				t.Fatalf("Sync after Reopen: %v", err)
			}
			want = append(want, failed...)
			m.Crash(rand.New(rand.NewPCG(1, 2)))
			l2, _ := mustOpen(t, m, Options{SegmentBytes: 200})
			equalRecords(t, readLog(t, l2), want)
		})
	}
}

// TestReopenKeepsSyncedOnly: records written to the file whose fsync then
// failed on a full disk are in the file, and Open's own fsync would
// report them durable, but a power loss drops them (vfs.MemFS.SetFull
// models pages marked clean after a failed write-back). Reopen never
// reports them: it cuts the file back to the last successful Sync.
func TestReopenKeepsSyncedOnly(t *testing.T) {
	for _, reopen := range []bool{false, true} {
		m := vfs.NewMem()
		l, _ := mustOpen(t, m, Options{})
		want := appendRecords(t, l, 0, 2)
		if err := l.Sync(); err != nil {
			t.Fatal(err)
		}
		appendRecords(t, l, 2, 1)
		if err := l.Flush(); err != nil {
			t.Fatal(err)
		}
		m.SetFull(syscall.ENOSPC)
		if err := l.Sync(); !errors.Is(err, syscall.ENOSPC) {
			t.Fatalf("Sync on a full disk: %v", err)
		}
		m.SetFull(nil)
		var nl *Log
		if reopen {
			var err error
			if nl, _, err = l.Reopen(); err != nil {
				t.Fatal(err)
			}
		} else {
			l.Close()
			nl, _ = mustOpen(t, m, Options{})
		}
		m.Crash(rand.New(rand.NewPCG(3, 4)))
		l2, _ := mustOpen(t, m, Options{})
		got := readLog(t, l2)
		switch {
		case reopen && (nl.NextIndex() != 2 || len(got) != 2):
			t.Fatalf("Reopen reported %d records, %d after a power loss; want 2 and 2", nl.NextIndex(), len(got))
		case !reopen && (nl.NextIndex() != 3 || len(got) != 2):
			// The hazard Reopen's cut avoids, shown on the model: if
			// this changes, the model no longer tests the cut.
			t.Fatalf("plain Open reported %d records, %d after a power loss; the model wants 3 and 2", nl.NextIndex(), len(got))
		}
		equalRecords(t, got, want)
	}
}
