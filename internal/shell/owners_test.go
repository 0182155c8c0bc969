package shell

import "testing"

// TestOwnersForgetsOnChange: the answer kept beside the map never outlives
// a change of the map (a publisher reconnected, a connection closed).
func TestOwnersForgetsOnChange(t *testing.T) {
	o := newOwners[string]()
	expect := func(k string, want ClientID, wantOK bool) {
		t.Helper()
		if c, ok := o.get(k); c != want || ok != wantOK {
			t.Fatalf("get(%q) = %d, %v; want %d, %v", k, c, ok, want, wantOK)
		}
	}
	o.set("p", 1)
	expect("p", 1, true)
	expect("p", 1, true) // from the kept answer
	o.set("p", 2)        // the publisher reconnected
	expect("p", 2, true)
	o.set("q", 3)
	expect("q", 3, true)
	expect("p", 2, true)
	o.delete("p")
	expect("p", 0, false)
	expect("q", 3, true)
	o.deleteOwnedBy(3)
	expect("q", 0, false)
	if len(o.m) != 0 {
		t.Fatalf("%d names left", len(o.m))
	}
}
