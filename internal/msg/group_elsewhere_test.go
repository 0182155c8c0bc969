package msg

import "testing"

func TestGroupElsewhereRoundTrip(t *testing.T) {
	for _, mqtt := range []string{"", "127.0.0.1:1883"} {
		r := GroupElsewhere("billing", "s1", "127.0.0.1:7203", mqtt)
		g, h, a, ok := ParseGroupElsewhere(r)
		if !ok || g != "billing" || h != "s1" || a != "127.0.0.1:7203" {
			t.Fatalf("%q read back as %q %q %q %v", r, g, h, a, ok)
		}
	}
	if _, _, _, ok := ParseGroupElsewhere("group x has topic"); ok {
		t.Fatal("another reason read as a redirection")
	}
}
