package member_test

import (
	"fmt"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/aerie-mq/aerie/internal/member"
)

// TestViewChangeScale measures how a view change grows with the cluster
// (docs/SCALE.md, "Scaling law: a view change vs the cluster's size"): N members seeded on the first three form
// one view over the simulated failure detector (sim_test.go: detection in
// 300–900 ms, messages of 1–20 ms); then one of them crashes, and the test
// measures, in simulated time, how long until every survivor has installed
// a view without it, and how many view-layer messages that took. The sizes
// are 10, 30 and 100, or AERIE_MEMBER_SCALE_SIZES (comma-separated).
//
// What must hold at every size: the view forms and the change completes,
// and a change costs a bounded number of messages per member (the elder
// announces the new view to each survivor; nothing is all-to-all).
func TestViewChangeScale(t *testing.T) {
	sizes := []int{10, 30, 100}
	if env := os.Getenv("AERIE_MEMBER_SCALE_SIZES"); env != "" {
		sizes = nil
		for _, f := range strings.Split(env, ",") {
			n, err := strconv.Atoi(strings.TrimSpace(f))
			if err != nil || n < 4 {
				t.Fatalf("AERIE_MEMBER_SCALE_SIZES: %q is not a size of at least 4", f)
			}
			sizes = append(sizes, n)
		}
	}
	t.Logf("| members | form the view (s) | crash → all survivors' views (s) | messages for the change | per survivor |")
	for _, n := range sizes {
		r := measureViewChange(t, n)
		t.Logf("| %d | %.2f | %.2f | %d | %.1f |", n, r.form.Seconds(), r.change.Seconds(), r.msgs, float64(r.msgs)/float64(n-1))
		if perMember := float64(r.msgs) / float64(n-1); perMember > 8 {
			t.Errorf("%d members: %d messages for one change, %.1f per survivor: the change is not linear in the cluster", n, r.msgs, perMember)
		}
	}
}

type viewChange struct {
	form, change time.Duration
	msgs         int
}

func measureViewChange(t *testing.T, n int) viewChange {
	t.Helper()
	w := newWorld(t, 1, defaultSim())
	brokers := make([]string, n)
	for i := range brokers {
		brokers[i] = fmt.Sprintf("m%04d", i)
	}
	for _, b := range brokers {
		w.start(b, brokers[:3]...)
	}
	form, ok := w.runUntilAll(2*time.Minute, func(x *simNode) bool {
		v, ok := x.m.View()
		return ok && len(v.Members) == n
	})
	if !ok {
		t.Fatalf("%d members: no common view of all after 2 minutes", n)
	}
	victim := w.cur[brokers[n/2]]
	sent0, began := w.sent, w.now
	w.crash(victim.id.Broker)
	if _, ok := w.runUntilAll(time.Minute, func(x *simNode) bool {
		v, ok := x.m.View()
		return ok && !v.Contains(victim.id) && len(v.Members) == n-1
	}); !ok {
		t.Fatalf("%d members: the survivors did not all drop the crashed member within a minute", n)
	}
	return viewChange{form: form, change: w.now.Sub(began), msgs: w.sent - sent0}
}

// runUntilAll runs in 10 ms steps until done holds for every running
// member, or limit passes; it returns the simulated time it took.
func (w *world) runUntilAll(limit time.Duration, done func(*simNode) bool) (time.Duration, bool) {
	began := w.now
	for w.now.Sub(began) <= limit {
		all := true
		for _, x := range w.cur {
			if x.up && !done(x) {
				all = false
				break
			}
		}
		if all {
			return w.now.Sub(began), true
		}
		w.runUntil(w.now.Add(10 * time.Millisecond))
	}
	return limit, false
}

var _ = member.View{}
