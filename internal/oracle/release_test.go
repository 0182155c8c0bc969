package oracle

import (
	"strings"
	"testing"
	"time"

	"github.com/aerie-mq/aerie/internal/gd"
	"github.com/aerie-mq/aerie/internal/tick"
)

// TestCheckRelease feeds pubend states by hand: each broken rule of the
// release protocol (Gryphon DS, DSN 2003 §3; docs/CONCEPTS.md I10) is reported, and
// the allowed moves are not.
func TestCheckRelease(t *testing.T) {
	const now = tick.Tick(100_000 << tick.SubTickBits)
	sec := tick.FromMillis(1000)
	base := gd.ReleaseState{Pubend: "P1", Hosted: true, Final: 10, AckPrefix: 50, Released: 10, Delivered: 40, Now: now, MaxRetain: time.Second}
	for _, c := range []struct {
		name string
		next func(gd.ReleaseState) gd.ReleaseState
		want string // "" for no violation
	}{
		{"L up to T_r", func(s gd.ReleaseState) gd.ReleaseState { s.Released, s.Final = 20, 20; return s }, ""},
		{"L above T_r, not old enough", func(s gd.ReleaseState) gd.ReleaseState { s.Final = 20; s.Now = 20 + sec; return s }, "only t <= T_r"},
		{"L up to T_d, old enough", func(s gd.ReleaseState) gd.ReleaseState { s.Final = 40; return s }, ""},
		{"early release off", func(s gd.ReleaseState) gd.ReleaseState { s.Final = 40; s.MaxRetain = 0; return s }, "only t <= T_r"},
		{"L above T_d", func(s gd.ReleaseState) gd.ReleaseState { s.Final = 45; return s }, "above T_d"},
		{"T_r above T_d", func(s gd.ReleaseState) gd.ReleaseState { s.Released = 41; return s }, "T_r <= T_d"},
		{"T_d above the ack prefix", func(s gd.ReleaseState) gd.ReleaseState { s.Delivered = 51; return s }, "above its ack prefix"},
		{"T_r moves back", func(s gd.ReleaseState) gd.ReleaseState { s.Released = 9; return s }, "moved back"},
		{"a downstream out of order", func(s gd.ReleaseState) gd.ReleaseState {
			s.Downstream = []gd.DownRelease{{Cell: "b1", AckPrefix: 5, Released: 6, Delivered: 6}}
			return s
		}, "out of order"},
	} {
		o := New()
		o.CheckRelease("p1", 1, []gd.ReleaseState{base})
		o.CheckRelease("p1", 1, []gd.ReleaseState{c.next(base)})
		vs := o.Violations()
		switch {
		case c.want == "" && len(vs) > 0:
			t.Errorf("%s: %v", c.name, vs[0])
		case c.want != "" && (len(vs) == 0 || !strings.Contains(vs[0].Detail, c.want)):
			t.Errorf("%s: got %v, want a violation saying %q", c.name, vs, c.want)
		}
	}
	// A restarted pubend's restored L prefix was decided before: the rule
	// applies only to moves within one incarnation.
	o := New()
	o.CheckRelease("p1", 2, []gd.ReleaseState{{Pubend: "P1", Hosted: true, Final: 30, AckPrefix: 30, Released: 30, Delivered: 30, Now: now}})
	if vs := o.Violations(); len(vs) > 0 {
		t.Errorf("restored release point: %v", vs[0])
	}
}
