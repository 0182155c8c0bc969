package ccexp

import (
	"image/png"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestCCE1Plot runs Gryphon CC §5 E1 (seed 1) with and without congestion
// control, draws it, and checks the picture and the curves behind it: every
// series has points, and with congestion control p1's rate limit dips below
// the publishers' offer after b1–s2 returns, s2 recovers within the
// oracle's bound, and without it s2 never does.
func TestCCE1Plot(t *testing.T) {
	cc, nocc, err := RunE1(1)
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "cc-e1.png")
	if err := PlotE1(cc, nocc, path); err != nil {
		t.Fatal(err)
	}
	checkPNG(t, path, 3)

	s := seriesE1(cc, nocc)
	for name, xys := range map[string]int{"limit": len(s.limit), "s1": len(s.s1), "s2": len(s.s2),
		"lag with congestion control": len(s.lagCC), "lag without": len(s.lagNoCC), "NACK window": len(s.window)} {
		if xys == 0 {
			t.Errorf("series %s is empty", name)
		}
	}
	lowest := E1Offered
	for _, p := range s.limit {
		if p.X >= E1BackAt.Seconds() && p.Y > 0 { // NaN (unlimited) compares false
			lowest = min(lowest, p.Y)
		}
	}
	if lowest >= E1Offered/2 {
		t.Errorf("p1's rate limit after b1–s2 returned went no lower than %.1f events/s (offered %.0f): no dip", lowest, E1Offered)
	}
	if rec, ok := e1Recovered(cc); !ok || rec > E1Bound {
		t.Errorf("with congestion control s2 recovered at %v (ok %v), bound %v", rec, ok, E1Bound)
	}
	if len(cc.Violations) > 0 {
		t.Errorf("with congestion control: %v", cc.Violations)
	}
	if _, ok := e1Recovered(nocc); ok {
		t.Error("without congestion control s2 recovered: E1 shows no collapse")
	}
	if len(nocc.Violations) == 0 {
		t.Error("without congestion control the oracle found nothing (CC2 should fail)")
	}
}

// TestCCE2Plot draws Gryphon CC §5 E2 (seed 1) and checks the picture and
// that the run measured its three phases.
func TestCCE2Plot(t *testing.T) {
	if testing.Short() {
		t.Skip("simulates 185 s of E2")
	}
	res, err := RunE2(1)
	if err != nil {
		t.Fatal(err)
	}
	if len(res.CCPhases) != 3 || len(res.Trace) == 0 {
		t.Fatalf("%d phases, %d trace rows", len(res.CCPhases), len(res.Trace))
	}
	path := filepath.Join(t.TempDir(), "cc_e2.png")
	if err := PlotE2(res, path); err != nil {
		t.Fatal(err)
	}
	checkPNG(t, path, 2)
}

// checkPNG requires a PNG of 9 inches by 3 per panel, at least 600 pixels
// wide, and more than a blank page's bytes.
func checkPNG(t *testing.T, path string, panels int) {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	cfg, err := png.DecodeConfig(f)
	if err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	if cfg.Width < 600 || cfg.Height*3 != cfg.Width*panels {
		t.Errorf("%s is %d×%d pixels, want 3:%d and at least 600 wide", path, cfg.Width, cfg.Height, panels)
	}
	if st, _ := f.Stat(); st.Size() < 20_000 {
		t.Errorf("%s is %d bytes: too small for %d panels of curves", path, st.Size(), panels)
	}
	if _, err := f.Seek(0, 0); err != nil {
		t.Fatal(err)
	}
	if _, err := png.Decode(f); err != nil {
		t.Errorf("%s does not decode: %v", path, err)
	}
}

// TestCollapseIBPlot runs Gryphon CC §2 Fig. 2 (seed 1) without and with
// congestion control, draws it with Fig. 3's queue, and checks the picture
// and the summary: the run without congestion control breaks CC2, the run
// with it does not.
func TestCollapseIBPlot(t *testing.T) {
	runs, err := RunCollapseIB(1)
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "cc-collapse-ib.png")
	if err := PlotCollapseIB(runs, path); err != nil {
		t.Fatal(err)
	}
	checkPNG(t, path, 3)
	sum := SummaryCollapse("cc-collapse-ib", runs)
	for _, want := range []string{"no congestion control", "oracle: CC2", "congestion control (Table 1)", "oracle: no violation", "last minute (60–120 s)"} {
		if !strings.Contains(sum, want) {
			t.Errorf("summary lacks %q:\n%s", want, sum)
		}
	}
}

// TestCollapsePBPlot runs Gryphon CC §2 Fig. 4 (seed 1) with b1's small
// and default caches, without and with congestion control, and checks the
// picture and that only the small cache without congestion control breaks
// CC2.
func TestCollapsePBPlot(t *testing.T) {
	if testing.Short() {
		t.Skip("simulates four runs of 250 s")
	}
	runs, err := RunCollapsePB(1)
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "cc-collapse-pb.png")
	if err := PlotCollapsePB(runs, path); err != nil {
		t.Fatal(err)
	}
	checkPNG(t, path, 4)
	for i, r := range runs {
		if bad := len(r.Res.Violations) > 0; bad != (i == 0) {
			t.Errorf("%s: violations %v", r.Name, r.Res.Violations)
		}
	}
	if sum := SummaryCollapse("cc-collapse-pb", runs); !strings.Contains(sum, "s2 not within 2 s of the present at the end") {
		t.Errorf("summary does not show s2's collapse:\n%s", sum)
	}
}
