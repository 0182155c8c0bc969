package client

import (
	"encoding/json"
	"maps"
	"slices"
	"testing"
)

// TestPropsReadInPlace: each typed accessor answers for its own kind only,
// a walk goes in name order, and Map, String and JSON show what was
// published, with ints converted as Publish converts them.
func TestPropsReadInPlace(t *testing.T) {
	p, err := PropsOf(map[string]any{"qty": 3, "price": 2.5, "urgent": true, "region": "EU"})
	if err != nil {
		t.Fatal(err)
	}
	if p.Len() != 4 {
		t.Errorf("Len = %d, want 4", p.Len())
	}
	if v, ok := p.Int("qty"); !ok || v != 3 {
		t.Errorf("Int(qty) = %d, %v", v, ok)
	}
	if v, ok := p.Float("price"); !ok || v != 2.5 {
		t.Errorf("Float(price) = %g, %v", v, ok)
	}
	if v, ok := p.Bool("urgent"); !ok || !v {
		t.Errorf("Bool(urgent) = %v, %v", v, ok)
	}
	if v, ok := p.Str("region"); !ok || v != "EU" {
		t.Errorf("Str(region) = %q, %v", v, ok)
	}
	for name, ok := range map[string]bool{"qty": false, "region": false, "absent": false} {
		if _, got := p.Float(name); got != ok {
			t.Errorf("Float(%s) found a float", name)
		}
	}
	if _, ok := p.Int("region"); ok {
		t.Error("Int(region) answered for a string")
	}
	if _, ok := p.Str("qty"); ok {
		t.Error("Str(qty) answered for an int")
	}
	if v, ok := p.Get("qty"); !ok || v != int64(3) {
		t.Errorf("Get(qty) = %#v, %v, want int64(3)", v, ok)
	}
	if _, ok := p.Get("absent"); ok {
		t.Error("Get(absent) found something")
	}
	var names []string
	for k := range p.All() {
		names = append(names, k)
	}
	if want := []string{"price", "qty", "region", "urgent"}; !slices.Equal(names, want) {
		t.Errorf("All walked %v, want %v", names, want)
	}
	want := map[string]any{"qty": int64(3), "price": 2.5, "urgent": true, "region": "EU"}
	if !maps.Equal(p.Map(), want) {
		t.Errorf("Map = %v, want %v", p.Map(), want)
	}
	if s := p.String(); s != "{price=2.5 qty=3 region=EU urgent=true}" {
		t.Errorf("String = %q", s)
	}
	b, err := json.Marshal(struct{ Props Props }{p})
	if err != nil || string(b) != `{"Props":{"price":2.5,"qty":3,"region":"EU","urgent":true}}` {
		t.Errorf("JSON = %s, %v", b, err)
	}
	var none Props
	if b, _ := json.Marshal(none); none.Len() != 0 || none.Map() != nil || string(b) != "null" || none.String() != "{}" {
		t.Errorf("zero Props: len %d, map %v, JSON %s, %q", none.Len(), none.Map(), b, none.String())
	}
	if _, err := PropsOf(map[string]any{"bad": []int{1}}); err == nil || err.Error() != `aerie: property "bad": unsupported type []int (use integer, float, bool or string)` {
		t.Errorf("PropsOf of a slice value: %v", err)
	}
}

// TestPropsLookupsDoNotAllocate: reading a delivered event's properties
// costs no allocation (the point of reading them in place).
func TestPropsLookupsDoNotAllocate(t *testing.T) {
	p, err := PropsOf(map[string]any{"k": int64(7), "region": "EU"})
	if err != nil {
		t.Fatal(err)
	}
	var sum int64
	n := testing.AllocsPerRun(100, func() {
		k, _ := p.Int("k")
		r, _ := p.Str("region")
		for name := range p.All() {
			sum += int64(len(name))
		}
		sum += k + int64(len(r))
	})
	if n != 0 {
		t.Errorf("%.1f allocations per lookup and walk, want 0", n)
	}
}

// TestNormalizePropsAllocatesOnlyTheEncoding: a publish's properties cost
// one allocation, their encoding.
func TestNormalizePropsAllocatesOnlyTheEncoding(t *testing.T) {
	m := map[string]any{"k": int64(7)}
	if n := testing.AllocsPerRun(100, func() { normalizeProps(m) }); n != 1 {
		t.Errorf("normalizeProps allocates %.1f times, want 1", n)
	}
}
