package gd

import (
	"testing"

	"github.com/aerie-mq/aerie/internal/tick"
)

// TestRetainedBytesOver: past the bound, the oldest events go until the rest
// fit, never past the tick the caller allows; releases drop them from the
// count.
func TestRetainedBytesOver(t *testing.T) {
	var r retainedBytes
	for i := 1; i <= 10; i++ {
		r.push(tick.Tick(10*i), 100) // ticks 10…100, 100 B each
	}
	for _, c := range []struct {
		limit int64
		bound tick.Tick
		want  tick.Tick
	}{
		{0, 1000, 0},    // no bound
		{1000, 1000, 0}, // fits exactly
		{999, 1000, 10}, // one event must go
		{450, 1000, 60}, // six must go for 400 B to stay
		{450, 35, 30},   // only up to what every SHB delivered
		{450, 5, 0},     // nothing delivered: nothing may go
	} {
		if got := r.over(c.limit, c.bound, 0); got != c.want {
			t.Errorf("over(%d, %d) = %d, want %d", c.limit, c.bound, got, c.want)
		}
	}
	if got := r.over(999, 1000, MutReleaseOneMore); got != 20 {
		t.Errorf("under MutReleaseOneMore: %d, want 20", got)
	}
	r.release(60)
	if r.bytes != 400 || r.over(450, 1000, 0) != 0 {
		t.Errorf("after releasing up to 60: %d bytes, over %d", r.bytes, r.over(450, 1000, 0))
	}
	r.release(1000)
	if r.bytes != 0 || len(r.fifo) != 0 {
		t.Errorf("after releasing all: %d bytes, %d entries", r.bytes, len(r.fifo))
	}
}
