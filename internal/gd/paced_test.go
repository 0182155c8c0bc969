package gd_test

import (
	"regexp"
	"testing"

	"github.com/cockroachdb/datadriven"

	"github.com/aerie-mq/aerie/internal/gd"
)

// TestPacedWindowBites replays the paced catch-up story
// (testdata/durable_paced.txt) and counts, after every command, the
// catch-up events delivered to d1 that its client has not reported taken:
// never more than the window holds (three of the story's 40 000-byte
// events in 131 072 bytes). With the window ignored (gd.MutPastWindow) the
// first answer delivers all six at once, and the count says so.
func TestPacedWindowBites(t *testing.T) {
	deliver := regexp.MustCompile(`client Deliver\{d1 P1@(t[0-9.]+) [^ ]+ \(pub#\d+, 40000B\)\}`)
	most := func(mut gd.Mutation) int {
		h := &harness{mut: mut}
		var out []string // ticks delivered and not reported taken, in order
		peak := 0
		datadriven.RunTest(t, "testdata/durable_paced.txt", func(t *testing.T, td *datadriven.TestData) string {
			h.t, h.td = t, td
			h.out.Reset()
			h.run(td)
			for _, m := range deliver.FindAllStringSubmatch(relTicks(h.out.String()), -1) {
				out = append(out, m[1])
			}
			if td.Cmd == "taken" {
				var upto string
				td.ScanArgs(t, "token", &upto)
				lim := absTick(h, upto[len("P1:"):])
				for len(out) > 0 && absTick(h, out[0]) <= lim {
					out = out[1:]
				}
			}
			peak = max(peak, len(out))
			return td.Expected // the story's own test checks the output
		})
		return peak
	}
	if got := most(0); got > 3 {
		t.Fatalf("%d catch-up events out at once, want at most the window's 3", got)
	}
	if got := most(gd.MutPastWindow); got <= 3 {
		t.Fatalf("with the window ignored: at most %d events out at once; the count does not see the window", got)
	}
}
