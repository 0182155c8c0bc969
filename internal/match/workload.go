package match

import "fmt"

// Rand is the randomness the workload draws from (a *math/rand/v2.Rand):
// the caller's, so that this package stays pure.
type Rand interface{ IntN(n int) int }

// The selector mix of the matching benchmark (docs/BENCHMARKS.md §5), shared
// with the simulator's scale topology so that both exercise the same
// subscriptions: orders by region and product, price bands, a few LIKEs,
// and a pattern that is mostly "orders.>".

var (
	workloadRegions   = []string{"EU", "US", "APAC", "LATAM"}
	workloadTopics    = []string{"orders.eu.new", "orders.us.new", "orders.eu.cancel", "trades.eu"}
	workloadCustomers = []string{"acme-1", "bigcorp", "acme-2", "shop"}
)

// WorkloadSubscription draws one subscription of the benchmark's mix: a
// topic pattern and a selector (never empty).
func WorkloadSubscription(r Rand) (pattern, selector string) {
	reg := workloadRegions[r.IntN(len(workloadRegions))]
	prod := r.IntN(1000)
	lo := 10 * r.IntN(100)
	switch k := r.IntN(1000); {
	case k < 800:
		selector = fmt.Sprintf("region = '%s' AND product = 'p%d'", reg, prod)
	case k < 900:
		selector = fmt.Sprintf("product = 'p%d' AND price BETWEEN %d AND %d", prod, lo, lo+10)
	case k < 950:
		selector = fmt.Sprintf("price BETWEEN %d AND %d", lo, lo+10)
	case k < 990:
		selector = fmt.Sprintf("region = '%s' AND product = 'p%d' AND customer LIKE 'acme%%'", reg, prod)
	case k < 999:
		selector = fmt.Sprintf("product = 'p%d' AND qty > %d", prod, r.IntN(100))
	default:
		selector = "customer LIKE '%corp'"
	}
	pattern = "orders.>"
	switch k := r.IntN(100); {
	case k < 5:
		pattern = "orders.eu.*"
	case k < 10:
		pattern = "trades.>"
	}
	return pattern, selector
}

// WorkloadEvent draws one event of the benchmark's mix: a topic and the
// properties the subscriptions' selectors read.
func WorkloadEvent(r Rand) (topic string, props map[string]any) {
	props = map[string]any{
		"region":   workloadRegions[r.IntN(len(workloadRegions))],
		"product":  fmt.Sprintf("p%d", r.IntN(1000)),
		"qty":      int64(r.IntN(120)),
		"customer": workloadCustomers[r.IntN(len(workloadCustomers))],
	}
	if r.IntN(2) == 0 {
		props["price"] = float64(r.IntN(100000)) / 100
	} else {
		props["price"] = int64(r.IntN(1000))
	}
	return workloadTopics[r.IntN(len(workloadTopics))], props
}
