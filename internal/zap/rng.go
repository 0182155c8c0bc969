package zap

import (
	"math"
	"sort"
)

// Source is a stream of uniformly random 64-bit values, seeded by the
// caller (math/rand/v2's PCG is one): the model draws nothing else, so a
// seed fixes the whole event stream.
type Source interface{ Uint64() uint64 }

type rng struct{ src Source }

// float returns a uniform value in [0, 1).
func (r rng) float() float64 { return float64(r.src.Uint64()>>11) / (1 << 53) }

// intn returns a uniform value in [0, n).
func (r rng) intn(n int) int { return int(r.src.Uint64() % uint64(n)) }

func (r rng) chance(p float64) bool { return r.float() < p }

// exp draws an exponential value with the given mean.
func (r rng) exp(mean float64) float64 { return -mean * math.Log(1-r.float()) }

// pareto draws a Pareto value with scale xm and shape alpha.
func (r rng) pareto(xm, alpha float64) float64 { return xm / math.Pow(1-r.float(), 1/alpha) }

// zipf is a Zipf law over 0..n-1: P(k) ∝ 1/(k+1)^s.
type zipf struct{ cdf []float64 }

func newZipf(n int, s float64) zipf {
	cdf := make([]float64, n)
	sum := 0.0
	for k := range n {
		sum += 1 / math.Pow(float64(k+1), s)
		cdf[k] = sum
	}
	for k := range cdf {
		cdf[k] /= sum
	}
	return zipf{cdf}
}

func (z zipf) draw(r rng) int {
	u := r.float()
	k := sort.SearchFloat64s(z.cdf, u)
	return min(k, len(z.cdf)-1)
}
