package sim

import "testing"

// TestGroupsSwarm runs swarm seeds with a consumer group (Options.Groups):
// no violation of the group's invariants (groups.go, G1–G4) nor any
// other, and the runs exercise what they are for: events shared, and
// events given again after a member left holding them.
func TestGroupsSwarm(t *testing.T) {
	given, regiven, acked, repeats := 0, 0, 0, 0
	var opts []Options
	// 45 and 62 caught a catch-up whose window filled with events the
	// dispatcher held already, never reported taken (shell reportGroups).
	for _, s := range []uint64{1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 45, 62} {
		o := DefaultOptions(s)
		o.Groups = true
		opts = append(opts, o)
	}
	for _, o := range opts {
		res, err := Run(o)
		if err != nil {
			t.Fatal(err)
		}
		if len(res.Violations) > 0 {
			t.Fatalf("seed %d: %v\n%s\nreplay: %s", o.Seed, res.Violations[0], res.Plan, replayCmd(o)+" --groups")
		}
		given, regiven, acked, repeats = given+res.GroupGiven, regiven+res.GroupRegiven, acked+res.GroupAcked, repeats+res.GroupRepeats
	}
	t.Logf("%d seeds: %d events given to members, %d given again after a member left, %d acknowledged, %d given again after a crash of the home", len(opts), given, regiven, acked, repeats)
	if acked == 0 || regiven == 0 {
		t.Fatalf("the groups barely ran: %d acknowledged, %d given again", acked, regiven)
	}
}
