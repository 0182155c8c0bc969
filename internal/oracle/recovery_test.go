package oracle

import (
	"strings"
	"testing"

	"github.com/aerie-mq/aerie/internal/gd"
)

// TestRecoveryBound: I14 flags a stream of a pubend a broker does not host,
// with no downstream and no nack parked, whose cached payloads are past its
// budget after a step; nothing at a pubend, at a broker that forwards, or
// while a downstream's nack holds payloads brought back for it.
func TestRecoveryBound(t *testing.T) {
	o := New()
	ok := []gd.StreamState{
		{Pubend: "P1", Cached: 700, CacheBudget: 700},
		{Pubend: "P2", Hosted: true, Cached: 900, CacheBudget: 700},
		{Pubend: "P3", Cached: 900, CacheBudget: 700, Downstreams: 1},
		{Pubend: "P4", Cached: 900, CacheBudget: 700, ParkedNacks: 1},
	}
	o.CheckStreams("s1", 1, ok, gd.Stats{})
	if v := o.Violations(); len(v) != 0 {
		t.Fatalf("within the bound: %v", v)
	}
	o.CheckStreams("s1", 1, []gd.StreamState{{Pubend: "P1", Cached: 701, CacheBudget: 700}}, gd.Stats{})
	v := o.Violations()
	if len(v) != 1 || v[0].Invariant != "I14" || !strings.Contains(v[0].Detail, "s1 P1 holds 701 payload bytes after a step, past its budget of 700") {
		t.Fatalf("701 bytes of 700: %v", v)
	}
}
