package zapexp

import (
	"bytes"
	"image"
	"image/color"
	"image/png"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"gonum.org/v1/plot/vg/vgimg"

	"github.com/aerie-mq/aerie/internal/lab/plotpng"
)

// small is a §10b-shaped file: R1 absolute, R3 as a ratio, P2S's figures
// with and without publishers.
const small = `# a comment
source,replicas,publishers,p50_ms,p99_ms,msgs_per_s,vs_r1
aerie,1,1,1.5,2.5,100000,
aerie,1,4,2.0,6.0,200000,
aerie,3,1,2.5,4.5,,0.5
aerie,3,4,3.0,9.0,,0.25
# P2S
p2s,1,1,2.0,,,
p2s,3,,,,,0.9
`

func TestReadCSV(t *testing.T) {
	pts, err := ReadCSV(strings.NewReader(small))
	if err != nil {
		t.Fatal(err)
	}
	if len(pts) != 6 {
		t.Fatalf("%d points, want 6: %+v", len(pts), pts)
	}
	r3 := pts[3]
	if r3.Source != SourceAerie || r3.Replicas != 3 || r3.Publishers != 4 || r3.P50 != 3 || r3.P99 != 9 || !math.IsNaN(r3.MsgsPerSec) || r3.VsR1 != 0.25 {
		t.Errorf("row 4: %+v", r3)
	}
	if got := Throughput(pts, r3); got != 50000 {
		t.Errorf("R3 at 4 publishers: %v msgs/s, want 0.25 × 200000", got)
	}
	if got := Ratio(pts, pts[1]); got != 1 {
		t.Errorf("R1's ratio %v, want 1", got)
	}
	if p := pts[5]; p.Source != SourceP2S || p.Publishers != 0 || p.VsR1 != 0.9 || !math.IsNaN(p.P50) {
		t.Errorf("P2S across: %+v", p)
	}
	if got := Throughput(pts, pts[5]); !math.IsNaN(got) {
		t.Errorf("P2S R3 without an R1 figure: %v msgs/s, want none", got)
	}

	// Written and read again: the same figures.
	var buf bytes.Buffer
	if err := WriteCSV(&buf, pts); err != nil {
		t.Fatal(err)
	}
	again, err := ReadCSV(&buf)
	if err != nil {
		t.Fatalf("%v\n%s", err, buf.String())
	}
	for i := range pts {
		a, b := pts[i], again[i]
		same := func(x, y float64) bool { return x == y || (math.IsNaN(x) && math.IsNaN(y)) }
		if a.Source != b.Source || a.Replicas != b.Replicas || a.Publishers != b.Publishers ||
			!same(a.P50, b.P50) || !same(a.P99, b.P99) || !same(a.MsgsPerSec, b.MsgsPerSec) || !same(a.VsR1, b.VsR1) {
			t.Errorf("row %d: wrote %+v, read %+v", i, a, b)
		}
	}
}

func TestReadCSVRejects(t *testing.T) {
	const head = "source,replicas,publishers,p50_ms,p99_ms,msgs_per_s,vs_r1\n"
	for name, in := range map[string]string{
		"empty":            "",
		"header only":      head,
		"missing column":   "source,replicas,publishers,p50_ms,p99_ms,msgs_per_s\naerie,1,1,1,2,3\n",
		"unknown column":   "source,replicas,publishers,p50_ms,p99_ms,msgs_per_s,vs_r1,p90_ms\naerie,1,1,1,2,3,,\n",
		"unknown source":   head + "nats,1,1,1,2,3,\n",
		"no replicas":      head + "aerie,0,1,1,2,3,\n",
		"our row, no pubs": head + "aerie,1,,1,2,3,\n",
		"P2S across, p50":  head + "p2s,1,,1,,,\n",
		"not a number":     head + "aerie,1,1,1.5ms,2,3,\n",
		"negative":         head + "aerie,1,1,-1,2,3,\n",
		"twice":            head + "aerie,1,1,1,2,3,\naerie,1,1,1,2,3,\n",
		"short row":        head + "aerie,1,1,1,2\n",
	} {
		if pts, err := ReadCSV(strings.NewReader(in)); err == nil {
			t.Errorf("%s: read %+v, want an error", name, pts)
		}
	}
}

// TestPlot draws both figures from small: two panels each, plotpng.Width
// wide, with R3's colour on it (its line and glyphs; R1's black is also
// the text's) and no colour of a degree the data lacks.
func TestPlot(t *testing.T) {
	pts, err := ReadCSV(strings.NewReader(small))
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	lat, thr, err := Plot(pts, dir)
	if err != nil {
		t.Fatal(err)
	}
	if lat != filepath.Join(dir, LatencyFile) || thr != filepath.Join(dir, ThroughputFile) {
		t.Errorf("paths %s, %s", lat, thr)
	}
	dpi := float64(vgimg.DefaultDPI)
	wantW := int(math.Round(plotpng.Width.Dots(dpi)))
	wantH := int(math.Round((2 * PanelHeight).Dots(dpi)))
	for _, path := range []string{lat, thr} {
		img := decode(t, path)
		if b := img.Bounds(); b.Dx() != wantW || b.Dy() != wantH {
			t.Errorf("%s: %d×%d pixels, want %d×%d (two panels)", filepath.Base(path), b.Dx(), b.Dy(), wantW, wantH)
		}
		if c, _ := degree(3); count(img, c) < 500 {
			t.Errorf("%s: %d pixels of R3's colour: its line is missing", filepath.Base(path), count(img, c))
		}
		for _, r := range []int{5, 7} {
			if c, _ := degree(r); count(img, c) > 0 {
				t.Errorf("%s: R%d's colour drawn, but there is no R%d in the data", filepath.Base(path), r, r)
			}
		}
	}
}

func TestPlotNothing(t *testing.T) {
	pts := []Point{{Source: SourceAerie, Replicas: 3, Publishers: 1, P50: NaN, P99: NaN, MsgsPerSec: NaN, VsR1: NaN}}
	if _, _, err := Plot(pts, t.TempDir()); err == nil {
		t.Error("drew a point without figures")
	}
}

// TestDocsCSV: the file behind docs/BENCHMARKS.md §10b's plots reads, with
// every degree at every number of publishers.
func TestDocsCSV(t *testing.T) {
	pts, err := ReadFile(filepath.Join("..", "..", "..", "docs", "plots", "zap-p2s.csv"))
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range []int{1, 3, 5, 7} {
		for _, p := range []int{1, 3, 6, 12, 24} {
			pt := find(pts, SourceAerie, r, p)
			if pt == nil || math.IsNaN(pt.P50) || math.IsNaN(pt.P99) || math.IsNaN(Throughput(pts, *pt)) {
				t.Errorf("R%d at %d publishers: %+v", r, p, pt)
			}
		}
	}
}

func decode(t *testing.T, path string) image.Image {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	img, err := png.Decode(f)
	if err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	return img
}

// count is the number of pixels of exactly colour c.
func count(img image.Image, c color.Color) int {
	r0, g0, b0, _ := c.RGBA()
	n := 0
	b := img.Bounds()
	for y := b.Min.Y; y < b.Max.Y; y++ {
		for x := b.Min.X; x < b.Max.X; x++ {
			r, g, bl, a := img.At(x, y).RGBA()
			if a == 0xffff && r == r0 && g == g0 && bl == b0 {
				n++
			}
		}
	}
	return n
}

// TestPlotWithoutR1: a run of R3 alone (-bench BenchmarkZapViewers/R3)
// has no ratios; Fig. 7 is its absolute panel alone.
func TestPlotWithoutR1(t *testing.T) {
	pts := []Point{
		{Source: SourceAerie, Replicas: 3, Publishers: 1, P50: 2, P99: 4, MsgsPerSec: 50000, VsR1: NaN},
		{Source: SourceAerie, Replicas: 3, Publishers: 3, P50: 3, P99: 5, MsgsPerSec: 80000, VsR1: NaN},
	}
	_, thr, err := Plot(pts, t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	want := int(math.Round(PanelHeight.Dots(float64(vgimg.DefaultDPI))))
	if h := decode(t, thr).Bounds().Dy(); h != want {
		t.Errorf("Fig. 7 without R1 is %d pixels high, want one panel, %d", h, want)
	}
}
