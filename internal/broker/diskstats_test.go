package broker

import (
	"slices"
	"testing"
	"time"
)

// TestDiskStats: group commits land in cumulative buckets, as Prometheus
// reads them, with the +Inf bucket only in the count.
func TestDiskStats(t *testing.T) {
	s := newDiskStats()
	s.commit(1, 200*time.Microsecond)
	s.commit(3, 3*time.Millisecond)
	s.commit(5000, 2*time.Second)
	b := s.batch.snapshot()
	if b.Count != 3 || b.Sum != 5004 || !slices.Equal(b.Counts, []uint64{1, 1, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2}) {
		t.Errorf("batch: %+v", b)
	}
	f := s.fsync.snapshot()
	if f.Count != 3 || f.Counts[1] != 1 || f.Counts[5] != 2 || f.Counts[len(f.Counts)-1] != 2 {
		t.Errorf("fsync: %+v", f)
	}
}
