package eventlog

import (
	"errors"
	"testing"

	"github.com/aerie-mq/aerie/internal/vfs"
)

func TestSyncFailureIsFailStop(t *testing.T) {
	for _, tc := range []struct {
		name string
		op   vfs.Op
	}{
		{"fsync", vfs.OpSync},
		{"write", vfs.OpWrite},
		{"dir sync during roll", vfs.OpSyncDir},
	} {
		t.Run(tc.name, func(t *testing.T) {
			boom := errors.New("disk on fire")
			m := vfs.NewMem()
			l, _ := mustOpen(t, m, Options{SegmentBytes: 200})
			appendRecords(t, l, 0, 3)
			if err := l.Sync(); err != nil {
				t.Fatal(err)
			}
			m.InjectError(tc.op, "", boom)
			appendRecords(t, l, 3, 10) // enough to roll
			err := l.Sync()
			if !errors.Is(err, boom) || !errors.Is(err, ErrFailed) {
				t.Fatalf("Sync: %v, want ErrFailed wrapping the injected error", err)
			}
			if l.DurableIndex() != 3 {
				t.Fatalf("DurableIndex = %d after failed Sync, want 3", l.DurableIndex())
			}
			// The fault was one-shot; the log must still refuse to go on.
			if _, err := l.Append([]byte("x")); !errors.Is(err, ErrFailed) {
				t.Fatalf("Append after failed Sync: %v", err)
			}
			if err := l.Sync(); !errors.Is(err, ErrFailed) {
				t.Fatalf("second Sync: %v", err)
			}
			// What the last successful Sync made durable is read back,
			// nothing after it.
			var n uint64
			if err := l.Replay(0, func(i uint64, p []byte) error {
				if i != n || string(p) != string(record(int(i))) {
					t.Fatalf("Replay gave %d %q, want %d", i, p, n)
				}
				n++
				return nil
			}); err != nil || n != 3 {
				t.Fatalf("Replay of a failed log: %d records, %v; want the 3 durable ones", n, err)
			}
			if err := l.Replay(4, func(uint64, []byte) error { return nil }); !errors.Is(err, ErrOutOfRange) || !errors.Is(err, ErrFailed) {
				t.Fatalf("Replay past the durable records of a failed log: %v", err)
			}
			if err := l.Close(); err != nil {
				t.Fatalf("Close of failed log: %v", err)
			}
			// Reopening recovers at least the durable records.
			l, _ = mustOpen(t, m, Options{SegmentBytes: 200})
			if got := readLog(t, l); len(got) < 3 {
				t.Fatalf("reopened log has %d records, want >= 3", len(got))
			}
		})
	}
}
