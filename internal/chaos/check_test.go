package chaos

import (
	"strings"
	"testing"

	"github.com/aerie-mq/aerie/client"
)

// TestCheckerBites feeds the checker deliveries that break each rule it
// enforces and requires the matching violation, and a clean history that
// must pass.
func TestCheckerBites(t *testing.T) {
	ev := func(tk uint64, seq int64, topic string, qty int64) client.Event {
		return client.Event{Pubend: "P1", Tick: tk, Topic: topic, Props: map[string]any{"seq": seq, "qty": qty}}
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
			c := &checker{acked: acked, report: func(string) {}}
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
