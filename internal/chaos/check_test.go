package chaos

import (
	"maps"
	"slices"
	"strings"
	"testing"

	"github.com/aerie-mq/aerie/client"
)

// TestCheckerBites feeds the checker deliveries that break each rule it
// enforces and requires the matching violation, and a clean history that
// must pass.
func TestCheckerBites(t *testing.T) {
	ev := func(tk uint64, seq int64, topic string, qty int64) client.Event {
		return client.Event{Pubend: "P1", Tick: tk, Topic: topic, Props: props(t, map[string]any{"seq": seq, "qty": qty})}
	}
	acked := map[pubKey]published{
		{"P1", 1}: {tick: 10, topic: "orders.eu", qty: 7},
		{"P1", 2}: {tick: 20, topic: "stock.x", qty: 1},
		{"P1", 3}: {tick: 30, topic: "orders.us", qty: 9},
	}
	orders := filters[1]
	cases := []struct {
		name    string
		f       filter
		durable bool
		feed    []client.Event
		wants   string // "" for no violation
	}{
		{"clean", orders, false, []client.Event{ev(10, 1, "orders.eu", 7), ev(30, 3, "orders.us", 9)}, ""},
		{"duplicate", orders, false, []client.Event{ev(10, 1, "orders.eu", 7), ev(10, 1, "orders.eu", 7), ev(30, 3, "orders.us", 9)}, "duplicate or out of order"},
		{"out of order", orders, false, []client.Event{ev(30, 3, "orders.us", 9), ev(10, 1, "orders.eu", 7)}, "duplicate or out of order"},
		{"filter", orders, false, []client.Event{ev(10, 1, "orders.eu", 7), ev(20, 2, "stock.x", 1), ev(30, 3, "orders.us", 9)}, "does not match"},
		{"phantom", orders, false, []client.Event{ev(10, 1, "orders.eu", 7), ev(25, 3, "orders.us", 9)}, "is not what was published"},
		{"lost", orders, false, []client.Event{ev(30, 3, "orders.us", 9)}, "never delivered"},
		{"lost inside a gap notice", orders, false, []client.Event{{Pubend: "P1", Gap: &client.Gap{Pubend: "P1", From: 5, To: 15}}, ev(30, 3, "orders.us", 9)}, ""},
		{"durable: clean, with progress notices", orders, true, []client.Event{ev(10, 1, "orders.eu", 7), {Progress: true, Checkpoint: "x"}, ev(30, 3, "orders.us", 9)}, ""},
		{"durable: lost", orders, true, []client.Event{ev(10, 1, "orders.eu", 7)}, "never delivered"},
		{"durable: a gap notice", orders, true, []client.Event{{Pubend: "P1", Gap: &client.Gap{Pubend: "P1", From: 5, To: 15}}, ev(30, 3, "orders.us", 9)}, "durable subscription got a gap notice"},
		{"gap reaching back", orders, false, []client.Event{ev(10, 1, "orders.eu", 7), {Pubend: "P1", Gap: &client.Gap{Pubend: "P1", From: 5, To: 15}}, ev(30, 3, "orders.us", 9)}, "reaches back"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c := &checker{acked: map[pubKey]published{}, report: func(string) {}}
			for _, k := range slices.SortedFunc(maps.Keys(acked), func(a, b pubKey) int { return int(a.seq - b.seq) }) {
				c.recordAck(k, acked[k])
			}
			w := &watch{where: "s1/orders", f: tc.f, start: map[string]uint64{"P1": 0}, last: map[string]uint64{"P1": 0}, got: map[pubKey]uint64{}, durable: tc.durable}
			c.subs = []*watch{w}
			for _, e := range tc.feed {
				c.receive(w, e)
			}
			c.converge(t.Context(), 0)
			got := strings.Join(c.violations, "\n")
			switch {
			case tc.wants == "" && got != "":
				t.Fatalf("violations on a clean history:\n%s", got)
			case tc.wants != "" && !strings.Contains(got, tc.wants):
				t.Fatalf("want a violation saying %q, got:\n%s", tc.wants, got)
			}
		})
	}
}

// TestMissingIncremental: missing, called while deliveries, gap notices and
// acknowledgements keep arriving, counts what is owed at each call, the
// same as a fresh count over everything would.
func TestMissingIncremental(t *testing.T) {
	c := &checker{acked: map[pubKey]published{}, report: func(string) {}}
	w := &watch{where: "s1/all", f: filters[0], start: map[string]uint64{"P1": 5}, last: map[string]uint64{"P1": 5}, got: map[pubKey]uint64{}}
	c.subs = []*watch{w}
	ev := func(tk uint64, seq int64) client.Event {
		return client.Event{Pubend: "P1", Tick: tk, Topic: "orders.eu", Props: props(t, map[string]any{"seq": seq, "qty": int64(1)})}
	}
	fresh := func() int { // the count from scratch
		n := 0
		for k := range c.acked {
			if c.owed(w, k) {
				n++
			}
		}
		return n
	}
	check := func(want int) {
		t.Helper()
		if n, _ := c.missing(); n != want || n != fresh() {
			t.Fatalf("missing = %d, from scratch %d, want %d", n, fresh(), want)
		}
	}
	c.recordAck(pubKey{"P1", 1}, published{tick: 5, topic: "orders.eu", qty: 1}) // at the start token: not owed
	c.recordAck(pubKey{"P1", 2}, published{tick: 10, topic: "orders.eu", qty: 1})
	c.recordAck(pubKey{"P1", 3}, published{tick: 20, topic: "orders.eu", qty: 1})
	check(2)
	c.receive(w, ev(10, 2))
	check(1)
	c.recordAck(pubKey{"P1", 4}, published{tick: 30, topic: "orders.eu", qty: 1})
	c.recordAck(pubKey{"P1", 5}, published{tick: 40, topic: "orders.eu", qty: 1})
	check(3)
	c.receive(w, client.Event{Pubend: "P1", Gap: &client.Gap{Pubend: "P1", From: 10, To: 30}})
	check(1)
	c.receive(w, ev(40, 5))
	check(0)
	if len(c.violations) != 0 {
		t.Fatalf("violations: %v", c.violations)
	}
}

// props is client.PropsOf for values known to be valid.
func props(t *testing.T, m map[string]any) client.Props {
	t.Helper()
	p, err := client.PropsOf(m)
	if err != nil {
		t.Fatal(err)
	}
	return p
}
