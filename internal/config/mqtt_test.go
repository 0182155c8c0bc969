package config

import (
	"strings"
	"testing"
)

// TestMQTTKey: `mqtt = "ADDR"` on a [[broker]] is read, written back, and
// checked like the other addresses.
func TestMQTTKey(t *testing.T) {
	src := `[[broker]]
id = "p1"
listen = "127.0.0.1:7101"
mqtt = "127.0.0.1:1883"
`
	n, err := Parse([]byte(src), "net.toml")
	if err != nil {
		t.Fatal(err)
	}
	if got := n.Brokers[0].MQTT; got != "127.0.0.1:1883" {
		t.Fatalf("MQTT = %q", got)
	}
	out, err := n.Marshal()
	if err != nil {
		t.Fatal(err)
	}
	back, err := Parse(out, "again.toml")
	if err != nil || back.Brokers[0].MQTT != "127.0.0.1:1883" {
		t.Fatalf("round trip: %v\n%s", err, out)
	}
	for _, tc := range []struct{ addr, want string }{
		{"127.0.0.1:7101", "already used"},
		{"h:0", `mqtt address "h:0"`},
	} {
		_, err := Parse([]byte(strings.Replace(src, "127.0.0.1:1883", tc.addr, 1)), "net.toml")
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("mqtt = %q: %v, want an error containing %q", tc.addr, err, tc.want)
		}
	}
}
