package config

import (
	"strings"
	"testing"
)

func TestParseBandwidth(t *testing.T) {
	for in, want := range map[string]int64{
		"500KB/s": 500_000, "500KiB/s": 512_000, "2MB/s": 2_000_000, "1MiB/s": 1 << 20, "60B/s": 60,
		"1.5KB/s": 1500, " 250KB/s ": 250_000,
	} {
		got, err := ParseBandwidth(in)
		if err != nil || got != want {
			t.Errorf("ParseBandwidth(%q) = %d, %v; want %d", in, got, err, want)
		}
		if back, err := ParseBandwidth(FormatBandwidth(got)); err != nil || back != got {
			t.Errorf("FormatBandwidth(%d) = %q reads back as %d, %v", got, FormatBandwidth(got), back, err)
		}
	}
	for _, in := range []string{"", "0KB/s", "-5KB/s", "500", "500KB", "fastKB/s", "NaNKB/s", "InfMB/s", "0.0001B/s", "500kb/s"} {
		if _, err := ParseBandwidth(in); err == nil || !strings.Contains(err.Error(), "bandwidth must be") {
			t.Errorf("ParseBandwidth(%q): %v, want a clear error", in, err)
		}
	}
}

// A link's bandwidth is read, written back and checked with its position.
func TestLinkBandwidth(t *testing.T) {
	const good = `
[[broker]]
id = "p1"
listen = "127.0.0.1:7001"
clients = "127.0.0.1:7101"
pubends = ["P1"]
[[broker]]
id = "s1"
listen = "127.0.0.1:7002"
clients = "127.0.0.1:7102"
[[link]]
up = "p1"
down = "s1"
bandwidth = "500KB/s"
`
	n, err := Parse([]byte(good), "net.toml")
	if err != nil {
		t.Fatal(err)
	}
	if bw := n.Bandwidth[Link{"p1", "s1"}]; bw != 500_000 {
		t.Fatalf("bandwidth %d", bw)
	}
	out, err := n.Marshal()
	if err != nil {
		t.Fatal(err)
	}
	again, err := Parse(out, "again.toml")
	if err != nil || again.Bandwidth[Link{"p1", "s1"}] != 500_000 {
		t.Fatalf("marshalled config reads back %v, %v", again, err)
	}
	if got := n.DownBandwidth("p1"); got["s1"] != 500_000 || len(got) != 1 {
		t.Fatalf("p1 sends to %v", got)
	}
	if got := n.DownBandwidth("s1"); got != nil {
		t.Fatalf("s1 sends to %v", got)
	}
	for _, bad := range []string{`bandwidth = "0KB/s"`, `bandwidth = 500`, `bandwidth = "fast"`} {
		_, err := Parse([]byte(strings.Replace(good, `bandwidth = "500KB/s"`, bad, 1)), "net.toml")
		if err == nil || !strings.Contains(err.Error(), "net.toml:14") || !strings.Contains(err.Error(), "bandwidth must be") {
			t.Errorf("%s: %v", bad, err)
		}
	}
}

// congestion_control: absent, congestion control runs, with or without a
// bandwidth on a link; true or false say so everywhere, and survive
// Marshal; any other value is an error with its position.
func TestCongestionControlKey(t *testing.T) {
	const brokers = `
[[broker]]
id = "p1"
listen = "127.0.0.1:7001"
pubends = ["P1"]
[[broker]]
id = "s1"
listen = "127.0.0.1:7002"
clients = "127.0.0.1:7102"
[[link]]
up = "p1"
down = "s1"
`
	for _, c := range []struct {
		top, link string
		want      bool
	}{
		{"", "", true},
		{"", `bandwidth = "500KB/s"`, true},
		{"congestion_control = true", "", true},
		{"congestion_control = false", "", false},
		{"congestion_control = false", `bandwidth = "500KB/s"`, false},
	} {
		src := c.top + "\n" + brokers + c.link + "\n"
		n, err := Parse([]byte(src), "net.toml")
		if err != nil {
			t.Fatalf("%q: %v", src, err)
		}
		if n.CongestionOn() != c.want {
			t.Errorf("%s / %s: CongestionOn %v, want %v", c.top, c.link, n.CongestionOn(), c.want)
		}
		out, err := n.Marshal()
		if err != nil {
			t.Fatal(err)
		}
		again, err := Parse(out, "again.toml")
		if err != nil || again.CongestionOn() != c.want || (again.CongestionControl == nil) != (n.CongestionControl == nil) {
			t.Errorf("%s / %s: marshalled config reads back %v, %v:\n%s", c.top, c.link, again.CongestionControl, err, out)
		}
	}
	for _, bad := range []string{`congestion_control = "off"`, "congestion_control = 0"} {
		_, err := Parse([]byte(bad+"\n"+brokers), "net.toml")
		if err == nil || !strings.Contains(err.Error(), "net.toml:1:") || !strings.Contains(err.Error(), "congestion_control must be true or false") {
			t.Errorf("%s: %v, want a clear error at line 1", bad, err)
		}
	}
	if _, err := Parse([]byte(brokers+"congestion_control = true\n"), "net.toml"); err == nil || !strings.Contains(err.Error(), "top-level key") {
		t.Errorf("congestion_control inside [[link]]: %v, want the top-level hint", err)
	}
}
