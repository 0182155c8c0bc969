package main

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/aerie-mq/aerie/client"
)

// TestTotalOrderAcrossSHBs: two PHBs publish concurrently through one IB
// to two SHBs; a subscriber in uniform total order at each SHB receives
// every event of both pubends exactly once, and the two receive them in
// the same sequence, sorted by (tick, pubend) (docs/CONCEPTS.md I4), while a
// per-pubend subscriber alongside gets the same events in its own order.
func TestTotalOrderAcrossSHBs(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs processes")
	}
	f := newProcFixture(t)
	ids := []string{"p1", "p2", "b1", "s1", "s2"}
	clients := map[string]string{}
	cfg := ""
	for _, id := range ids {
		cfg += fmt.Sprintf("[[broker]]\nid = %q\nlisten = %q\n", id, f.addr())
		if id != "b1" {
			clients[id] = f.addr()
			cfg += fmt.Sprintf("clients = %q\n", clients[id])
		}
		if id == "p1" || id == "p2" {
			cfg += fmt.Sprintf("data = \"data/%s\"\npubends = [\"P%s\"]\n", id, id[1:])
		}
		cfg += "\n"
	}
	for _, l := range [][2]string{{"p1", "b1"}, {"p2", "b1"}, {"b1", "s1"}, {"b1", "s2"}} {
		cfg += fmt.Sprintf("[[link]]\nup = %q\ndown = %q\n", l[0], l[1])
	}
	f.writeConfig(cfg)
	for _, id := range ids {
		f.start(id)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()

	const each = 400
	type got struct {
		keys []string
		err  error
	}
	collect := func(node string, total bool) <-chan got {
		c := f.dial(ctx, clients[node], "sub-"+node+fmt.Sprint(total))
		subscribe := c.SubscribeSelector
		if total {
			subscribe = c.SubscribeTotalOrder
		}
		sub, err := subscribe(ctx, "t.>", "")
		if err != nil {
			t.Fatalf("subscribe at %s: %v", node, err)
		}
		out := make(chan got, 1)
		go func() {
			var g got
			for ev := range sub.Events() {
				g.keys = append(g.keys, fmt.Sprintf("%s@%d", ev.Pubend, ev.Tick))
				if len(g.keys) == 2*each {
					break
				}
			}
			g.err = sub.Err()
			out <- g
		}()
		return out
	}
	total1, total2, plain := collect("s1", true), collect("s2", true), collect("s2", false)

	publish := func(node string) <-chan error {
		done := make(chan error, 1)
		c := f.dial(ctx, clients[node], "pub-"+node)
		go func() {
			var chans []<-chan client.Result
			for i := 1; i <= each; i++ {
				ch, err := c.PublishAsync(client.Message{Topic: "t." + node, Props: map[string]any{"i": int64(i)}})
				if err != nil {
					done <- err
					return
				}
				chans = append(chans, ch)
			}
			for _, ch := range chans {
				if r := <-ch; r.Err != nil {
					done <- r.Err
					return
				}
			}
			done <- nil
		}()
		return done
	}
	d1, d2 := publish("p1"), publish("p2")
	for _, d := range []<-chan error{d1, d2} {
		if err := <-d; err != nil {
			t.Fatalf("publish: %v", err)
		}
	}
	wait := func(name string, ch <-chan got) []string {
		select {
		case g := <-ch:
			if len(g.keys) != 2*each {
				t.Fatalf("%s: %d events, want %d (ended: %v)", name, len(g.keys), 2*each, g.err)
			}
			return g.keys
		case <-ctx.Done():
			t.Fatalf("%s: not every event arrived", name)
			return nil
		}
	}
	a, b, p := wait("total order at s1", total1), wait("total order at s2", total2), wait("per pubend at s2", plain)
	if !slices.Equal(a, b) {
		for i := range a {
			if a[i] != b[i] {
				t.Fatalf("the total-order subscribers differ at event %d: %s at s1, %s at s2", i, a[i], b[i])
			}
		}
	}
	sorted := slices.Clone(p)
	slices.SortFunc(sorted, func(x, y string) int { return compareKey(t, x, y) })
	if !slices.Equal(a, sorted) {
		t.Fatalf("the total order is not the per-pubend subscriber's events sorted by (tick, pubend)")
	}
	if slices.Equal(a, p) {
		t.Logf("the per-pubend subscriber happened to receive the same order")
	}
}

// compareKey orders "pubend@tick" keys by tick, then pubend.
func compareKey(t *testing.T, x, y string) int {
	split := func(k string) (string, uint64) {
		p, tk, _ := strings.Cut(k, "@")
		n, err := strconv.ParseUint(tk, 10, 64)
		if err != nil {
			t.Fatalf("bad key %q", k)
		}
		return p, n
	}
	px, tx := split(x)
	py, ty := split(y)
	if c := cmp.Compare(tx, ty); c != 0 {
		return c
	}
	return strings.Compare(px, py)
}
