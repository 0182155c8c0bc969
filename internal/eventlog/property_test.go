package eventlog

import (
	"bytes"
	"errors"
	"testing"

	"github.com/aerie-mq/aerie/internal/vfs"
)

var errInjected = errors.New("injected fault")

// TestPropertyCrashes runs random appends, syncs, truncations, injected
// faults and crashes, and checks after every reopen that
//   - every record appended before the last successful Sync survived, and
//   - the log is a prefix of what was appended (no reordering, no
//     invention, no holes).
func TestPropertyCrashes(t *testing.T) {
	seeds := uint64(1000)
	if testing.Short() {
		seeds = 30
	}
	var st propertyStats
	for seed := range seeds {
		runProperty(t, seed, &st)
	}
	// Guard against a generator that silently stops exercising the
	// interesting paths.
	if st.tornTails == 0 || st.failedSyncs == 0 || st.truncatedSegments == 0 || st.maxSegments < 3 || st.lostUnsynced == 0 {
		t.Fatalf("weak coverage: %+v", st)
	}
	t.Logf("%+v", st)
}

type propertyStats struct {
	crashes, tornTails, failedSyncs, truncatedSegments, lostUnsynced int
	maxSegments                                                      int
}

func runProperty(t *testing.T, seed uint64, st *propertyStats) {
	rng := newRand(seed)
	m := vfs.NewMem()
	opts := Options{SegmentBytes: 64 + rng.Int64N(1024), MaxRecordBytes: 300}
	var (
		model   [][]byte // model[i] is the payload of index i
		durable uint64   // records below this index must survive a crash
		crashes int
	)
	fatalf := func(format string, args ...any) {
		t.Helper()
		t.Fatalf("seed %d, crash %d: "+format, append([]any{seed, crashes}, args...)...)
	}

	// reopen opens the log, retrying when an injected fault hits Open, and
	// checks the recovered log against the model.
	reopen := func() *Log {
		t.Helper()
		for attempt := 0; ; attempt++ {
			l, rec, err := Open(m, testDir, opts)
			if errors.Is(err, errInjected) && attempt < 10 {
				m.Crash(rng)
				continue
			}
			if err != nil {
				fatalf("Open: %v\n%s", err, m)
			}
			next := l.NextIndex()
			if next < durable || next > uint64(len(model)) {
				fatalf("reopened with NextIndex %d; durable %d, appended %d", next, durable, len(model))
			}
			if l.FirstIndex() > durable {
				fatalf("FirstIndex %d beyond durable index %d", l.FirstIndex(), durable)
			}
			i := l.FirstIndex()
			err = l.Replay(i, func(idx uint64, p []byte) error {
				if idx != i || !bytes.Equal(p, model[idx]) {
					fatalf("record %d (want index %d) = %q, appended %q", idx, i, p, model[i])
				}
				i++
				return nil
			})
			if err != nil || i != next {
				fatalf("Replay: %v, ended at %d, want %d", err, i, next)
			}
			if rec.TornTail {
				st.tornTails++
			}
			if next < uint64(len(model)) {
				st.lostUnsynced++
			}
			st.maxSegments = max(st.maxSegments, len(l.segs))
			model, durable = model[:next], next
			return l
		}
	}

	l := reopen()
	for range 300 {
		switch r := rng.IntN(100); {
		case r < 50:
			p := make([]byte, 1+rng.IntN(opts.MaxRecordBytes))
			for i := range p {
				p[i] = byte(rng.Uint32())
			}
			idx, err := l.Append(p)
			if errors.Is(err, ErrFailed) {
				continue // fail-stopped by an earlier fault; wait for a crash
			}
			if err != nil || idx != uint64(len(model)) {
				fatalf("Append = %d, %v; want index %d", idx, err, len(model))
			}
			model = append(model, p)
		case r < 70:
			err := l.Sync()
			switch {
			case err == nil:
				durable = uint64(len(model))
				if l.DurableIndex() != durable {
					fatalf("DurableIndex %d after Sync, want %d", l.DurableIndex(), durable)
				}
			case !errors.Is(err, ErrFailed):
				fatalf("Sync: %v, want ErrFailed", err)
			default:
				st.failedSyncs++
			}
		case r < 76:
			op := []vfs.Op{vfs.OpWrite, vfs.OpSync, vfs.OpSyncDir}[rng.IntN(3)]
			m.InjectError(op, "", errInjected)
		case r < 80:
			before := len(l.segs)
			err := l.TruncateFront(rng.Uint64N(uint64(len(model)) + 1))
			st.truncatedSegments += before - len(l.segs)
			if err != nil && !errors.Is(err, errInjected) && !errors.Is(err, ErrFailed) {
				fatalf("TruncateFront: %v", err)
			}
		case r < 85:
			if err := l.Close(); err != nil && !errors.Is(err, ErrFailed) && !errors.Is(err, errInjected) {
				fatalf("Close: %v", err)
			}
			if l.err == nil {
				durable = uint64(len(model)) // a clean Close syncs
			}
			l = reopen()
		default:
			m.Crash(rng)
			crashes++
			st.crashes++
			l = reopen()
		}
	}
}
