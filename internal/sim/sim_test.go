package sim

import (
	"testing"
)

func runSeeds(t *testing.T, from, n uint64, mod func(*Options)) {
	t.Helper()
	for s := from; s < from+n; s++ {
		o := DefaultOptions(s)
		if mod != nil {
			mod(&o)
		}
		res, err := Run(o)
		if err != nil {
			t.Fatal(err)
		}
		if len(res.Violations) > 0 {
			t.Errorf("seed %d: %v\n%s\nreplay: go run ./cmd/aerie sim --seed %d", s, res.Violations[0], res.Plan, s)
		}
	}
}

func TestSimSmoke(t *testing.T) {
	runSeeds(t, 1, 5, nil)
}
