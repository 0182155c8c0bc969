// Package zapexp holds the results of BenchmarkZapViewers (P2S, DEBS 2014
// §4, on aerie: docs/BENCHMARKS.md §10b) as CSV and draws them in the
// shape of P2S's Figs. 6 and 7: end-to-end latency and throughput against
// the number of publishers, one line per replication degree. `aerie
// experiment --case zap-plots --from FILE` reads such a file and draws
// both figures.
package zapexp

import (
	"encoding/csv"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"slices"
	"strconv"
	"strings"
)

// The sources of a row.
const (
	SourceAerie = "aerie" // measured by BenchmarkZapViewers
	SourceP2S   = "p2s"   // P2S's own figures, drawn dashed for reference
)

// Header is the CSV's header row. An empty cell is a figure not given.
var Header = []string{"source", "replicas", "publishers", "p50_ms", "p99_ms", "msgs_per_s", "vs_r1"}

// Point is one row: a replication degree at one number of publishers.
// Figures not given are NaN; Publishers is 0 only for a P2S figure that
// holds for every number of publishers (drawn across the axis).
type Point struct {
	Source     string
	Replicas   int
	Publishers int
	P50, P99   float64 // end-to-end latency, ms
	MsgsPerSec float64 // acknowledged events per second
	VsR1       float64 // MsgsPerSec ÷ R1's at the same publishers
}

// NaN is a figure not given.
var NaN = math.NaN()

// ReadFile reads a CSV file of points.
func ReadFile(path string) ([]Point, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	pts, err := ReadCSV(f)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return pts, nil
}

// ReadCSV reads points: Header first (its columns in any order), lines
// starting with '#' are comments.
func ReadCSV(r io.Reader) ([]Point, error) {
	cr := csv.NewReader(r)
	cr.Comment = '#'
	cr.TrimLeadingSpace = true
	head, err := cr.Read()
	if err == io.EOF {
		return nil, errors.New("zapexp: empty file, want a header")
	}
	if err != nil {
		return nil, fmt.Errorf("zapexp: %w", err)
	}
	col := map[string]int{}
	for i, h := range head {
		h = strings.TrimSpace(h)
		if !slices.Contains(Header, h) {
			return nil, fmt.Errorf("zapexp: unknown column %q (want %s)", h, strings.Join(Header, ","))
		}
		if _, dup := col[h]; dup {
			return nil, fmt.Errorf("zapexp: column %q twice", h)
		}
		col[h] = i
	}
	for _, h := range Header {
		if _, ok := col[h]; !ok {
			return nil, fmt.Errorf("zapexp: no column %q", h)
		}
	}
	var pts []Point
	seen := map[[3]string]bool{}
	for {
		row, err := cr.Read()
		if err == io.EOF {
			break
		}
		if err != nil {
			return nil, fmt.Errorf("zapexp: %w", err)
		}
		line, _ := cr.FieldPos(0)
		where := fmt.Sprintf("zapexp: line %d", line)
		get := func(h string) string { return strings.TrimSpace(row[col[h]]) }
		p := Point{Source: get("source")}
		if p.Source != SourceAerie && p.Source != SourceP2S {
			return nil, fmt.Errorf("%s: source %q, want %s or %s", where, p.Source, SourceAerie, SourceP2S)
		}
		if p.Replicas, err = strconv.Atoi(get("replicas")); err != nil || p.Replicas < 1 {
			return nil, fmt.Errorf("%s: replicas %q, want a whole number ≥ 1", where, get("replicas"))
		}
		if s := get("publishers"); s == "" && p.Source == SourceP2S {
			p.Publishers = 0
		} else if p.Publishers, err = strconv.Atoi(s); err != nil || p.Publishers < 1 {
			return nil, fmt.Errorf("%s: publishers %q, want a whole number ≥ 1", where, s)
		}
		for _, f := range []struct {
			h string
			v *float64
		}{{"p50_ms", &p.P50}, {"p99_ms", &p.P99}, {"msgs_per_s", &p.MsgsPerSec}, {"vs_r1", &p.VsR1}} {
			*f.v = NaN
			s := get(f.h)
			if s == "" {
				continue
			}
			v, err := strconv.ParseFloat(s, 64)
			if err != nil || v < 0 || math.IsNaN(v) || math.IsInf(v, 0) {
				return nil, fmt.Errorf("%s: %s %q, want a number ≥ 0 or nothing", where, f.h, s)
			}
			*f.v = v
		}
		if p.Publishers == 0 && (!math.IsNaN(p.P50) || !math.IsNaN(p.P99) || !math.IsNaN(p.MsgsPerSec)) {
			return nil, fmt.Errorf("%s: without publishers only vs_r1 can be given", where)
		}
		key := [3]string{p.Source, get("replicas"), strconv.Itoa(p.Publishers)}
		if seen[key] {
			return nil, fmt.Errorf("%s: %s R%d with %d publishers twice", where, p.Source, p.Replicas, p.Publishers)
		}
		seen[key] = true
		pts = append(pts, p)
	}
	if len(pts) == 0 {
		return nil, errors.New("zapexp: no rows")
	}
	return pts, nil
}

// WriteCSV writes points with Header, NaN as an empty cell.
func WriteCSV(w io.Writer, pts []Point) error {
	cw := csv.NewWriter(w)
	if err := cw.Write(Header); err != nil {
		return err
	}
	num := func(v float64) string {
		if math.IsNaN(v) {
			return ""
		}
		return strconv.FormatFloat(v, 'g', 6, 64)
	}
	for _, p := range pts {
		pubs := ""
		if p.Publishers > 0 {
			pubs = strconv.Itoa(p.Publishers)
		}
		if err := cw.Write([]string{p.Source, strconv.Itoa(p.Replicas), pubs, num(p.P50), num(p.P99), num(p.MsgsPerSec), num(p.VsR1)}); err != nil {
			return err
		}
	}
	cw.Flush()
	return cw.Error()
}

// Throughput is p's acknowledged events per second, or VsR1 × R1's at
// the same publishers from the same source when only the ratio is given
// (the §10b table gives R3–R7 as ratios); NaN when neither is known.
func Throughput(pts []Point, p Point) float64 {
	if !math.IsNaN(p.MsgsPerSec) {
		return p.MsgsPerSec
	}
	if r1 := find(pts, p.Source, 1, p.Publishers); r1 != nil && !math.IsNaN(p.VsR1) && !math.IsNaN(r1.MsgsPerSec) {
		return p.VsR1 * r1.MsgsPerSec
	}
	return NaN
}

// Ratio is p's throughput ÷ R1's at the same publishers from the same
// source: VsR1 when given, else computed from both absolute figures; NaN
// when neither is known.
func Ratio(pts []Point, p Point) float64 {
	if !math.IsNaN(p.VsR1) {
		return p.VsR1
	}
	if p.Replicas == 1 && !math.IsNaN(p.MsgsPerSec) {
		return 1
	}
	if r1 := find(pts, p.Source, 1, p.Publishers); r1 != nil && r1.MsgsPerSec > 0 && !math.IsNaN(p.MsgsPerSec) {
		return p.MsgsPerSec / r1.MsgsPerSec
	}
	return NaN
}

func find(pts []Point, source string, replicas, publishers int) *Point {
	for i := range pts {
		if p := &pts[i]; p.Source == source && p.Replicas == replicas && p.Publishers == publishers {
			return p
		}
	}
	return nil
}
