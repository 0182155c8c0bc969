package raftphb

import (
	"strings"
	"testing"
)

// TestEvenCellWarning: an even count is warned about, with the reason
// (the majority, the failures survived, the odd count that does as well);
// an odd one is not.
func TestEvenCellWarning(t *testing.T) {
	for _, k := range []int{1, 3, 5, 7} {
		if w := EvenCellWarning(k); w != "" {
			t.Errorf("EvenCellWarning(%d) = %q, want none", k, w)
		}
	}
	for k, want := range map[int][]string{
		2: {"of 2 members tolerates no more failures than one of 1", "a majority of 2 is 2", "survives 0 failure(s)", "every write waits for one more member", "cannot rejoin", "prefer 3 members"},
		4: {"of 4 members tolerates no more failures than one of 3", "a majority of 4 is 3", "survives 1 failure(s), like a cell of 3", "every write waits for one more member", "prefer 3 or 5 members"},
		6: {"a majority of 6 is 4", "survives 2 failure(s), like a cell of 5"},
	} {
		w := EvenCellWarning(k)
		for _, s := range want {
			if !strings.Contains(w, s) {
				t.Errorf("EvenCellWarning(%d) = %q, want it to say %q", k, w, s)
			}
		}
	}
}
