package main

import (
	"log/slog"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/aerie-mq/aerie/internal/broker"
	"github.com/aerie-mq/aerie/internal/config"
	"github.com/aerie-mq/aerie/internal/congestion"
	"github.com/aerie-mq/aerie/internal/gd"
	"github.com/aerie-mq/aerie/internal/msg"
	"github.com/aerie-mq/aerie/internal/shell"
)

// TestReplicatedCellOptions: a member of a replicated PHB cell runs with
// the cell's members as its Raft group, in sorted order (Raft ids), and
// dials its higher-id cell peers (the links that carry Raft).
func TestReplicatedCellOptions(t *testing.T) {
	var src strings.Builder
	for _, id := range []string{"p3", "p1", "p2"} {
		src.WriteString("[[broker]]\nid = \"" + id + "\"\ncell = \"phb\"\nlisten = \"127.0.0.1:1" + id[1:] + "\"\ndata = \"d/" + id + "\"\npubends = [\"P1\"]\n")
	}
	n, err := config.Parse([]byte(src.String()), "net.toml")
	if err != nil {
		t.Fatal(err)
	}
	opts, err := brokerOptions(n, "p2", t.TempDir(), slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	if opts.Raft == nil || opts.Raft.Cell != "phb" || !reflect.DeepEqual(opts.Raft.Members, []msg.NodeID{"p1", "p2", "p3"}) {
		t.Fatalf("Raft options %+v, want cell phb with members p1 p2 p3", opts.Raft)
	}
	if _, dials := opts.Upstreams["p3"]; !dials || len(opts.Upstreams) != 1 {
		t.Fatalf("p2 dials %v, want p3 only", opts.Upstreams)
	}
	if opts.Raft.Clients != "" {
		t.Fatalf("raft_clients absent: Clients %q, want the broker's default", opts.Raft.Clients)
	}
	// raft_clients reaches the broker.
	n, err = config.Parse([]byte(strings.Replace(src.String(), "id = \"p2\"\n", "id = \"p2\"\nraft_clients = \"redirect\"\n", 1)), "net.toml")
	if err != nil {
		t.Fatal(err)
	}
	if opts, err = brokerOptions(n, "p2", t.TempDir(), slog.New(slog.DiscardHandler)); err != nil {
		t.Fatal(err)
	}
	if opts.Raft.Clients != broker.RaftClientsRedirect {
		t.Fatalf("raft_clients = \"redirect\": Clients %q", opts.Raft.Clients)
	}
	if opts.Raft.TickInterval != 0 || opts.Raft.ElectionTicks != 0 {
		t.Fatalf("raft_election_timeout absent: tick %v × %d, want the broker's defaults", opts.Raft.TickInterval, opts.Raft.ElectionTicks)
	}
	// raft_election_timeout reaches the broker as ten ticks.
	n, err = config.Parse([]byte(strings.ReplaceAll(src.String(), "cell = \"phb\"\n", "cell = \"phb\"\nraft_election_timeout = \"300ms\"\n")), "net.toml")
	if err != nil {
		t.Fatal(err)
	}
	if opts, err = brokerOptions(n, "p2", t.TempDir(), slog.New(slog.DiscardHandler)); err != nil {
		t.Fatal(err)
	}
	if opts.Raft.TickInterval != 30*time.Millisecond || opts.Raft.ElectionTicks != 10 {
		t.Fatalf("raft_election_timeout = \"300ms\": tick %v × %d, want 30ms × 10", opts.Raft.TickInterval, opts.Raft.ElectionTicks)
	}
}

// Congestion control runs in every broker of the network, with the broker
// profile, whether or not a link is capped; congestion_control = false
// turns it off.
func TestCongestionControlOptions(t *testing.T) {
	const net = "[[broker]]\nid = \"p1\"\nlisten = \"127.0.0.1:1\"\npubends = [\"P1\"]\n" +
		"[[broker]]\nid = \"b1\"\nlisten = \"127.0.0.1:2\"\n[[broker]]\nid = \"s1\"\nlisten = \"127.0.0.1:3\"\n" +
		"[[link]]\nup = \"p1\"\ndown = \"b1\"\n[[link]]\nup = \"b1\"\ndown = \"s1\"\n"
	const capped = "bandwidth = \"500KB/s\"\n"
	for _, c := range []struct {
		top, link string
		want      bool
	}{{"", "", true}, {"", capped, true}, {"congestion_control = false\n", "", false}, {"congestion_control = false\n", capped, false}} {
		n, err := config.Parse([]byte(c.top+net+c.link), "net.toml")
		if err != nil {
			t.Fatal(err)
		}
		for _, id := range []string{"p1", "b1", "s1"} {
			opts, err := brokerOptions(n, id, t.TempDir(), slog.New(slog.DiscardHandler))
			if err != nil {
				t.Fatal(err)
			}
			if opts.GD.CongestionControl != c.want {
				t.Errorf("%q %q: %s runs congestion control %v, want %v", c.top, c.link, id, opts.GD.CongestionControl, c.want)
			}
			if opts.GD.Congestion != congestion.BrokerConfig() {
				t.Errorf("%s: congestion config %+v, want the broker profile", id, opts.GD.Congestion)
			}
			if err := opts.GD.Validate(); err != nil {
				t.Errorf("%s: %v", id, err)
			}
		}
		if c.link == "" {
			continue
		}
		if opts, _ := brokerOptions(n, "b1", t.TempDir(), slog.New(slog.DiscardHandler)); opts.Bandwidth["s1"] != 500_000 {
			t.Errorf("b1 paces its link to s1 at %d B/s, want 500000", opts.Bandwidth["s1"])
		}
	}
}

// TestCatchupWindowOptions: catchup_window and catchup_window_bytes reach
// the engine of the broker that sets them; another keeps the defaults (0).
func TestCatchupWindowOptions(t *testing.T) {
	const net = "[[broker]]\nid = \"p1\"\nlisten = \"127.0.0.1:1\"\npubends = [\"P1\"]\n" +
		"[[broker]]\nid = \"s1\"\nlisten = \"127.0.0.1:2\"\ncatchup_window = 500\ncatchup_window_bytes = \"1MiB\"\n" +
		"[[link]]\nup = \"p1\"\ndown = \"s1\"\n"
	n, err := config.Parse([]byte(net), "net.toml")
	if err != nil {
		t.Fatal(err)
	}
	for id, want := range map[string][2]int64{"s1": {500, 1 << 20}, "p1": {0, 0}} {
		opts, err := brokerOptions(n, id, t.TempDir(), slog.New(slog.DiscardHandler))
		if err != nil {
			t.Fatal(err)
		}
		if got := [2]int64{int64(opts.GD.CatchupWindowEvents), opts.GD.CatchupWindowBytes}; got != want {
			t.Errorf("%s: catch-up window %v, want %v", id, got, want)
		}
	}
}

// TestRelayCacheOptions: relay_cache_bytes reaches the engine of the
// broker that sets it; another keeps the engine's default.
func TestRelayCacheOptions(t *testing.T) {
	const net = "[[broker]]\nid = \"p1\"\nlisten = \"127.0.0.1:1\"\npubends = [\"P1\"]\n" +
		"[[broker]]\nid = \"s1\"\nlisten = \"127.0.0.1:2\"\nrelay_cache_bytes = \"2MiB\"\n" +
		"[[link]]\nup = \"p1\"\ndown = \"s1\"\n"
	n, err := config.Parse([]byte(net), "net.toml")
	if err != nil {
		t.Fatal(err)
	}
	for id, want := range map[string]int64{"s1": 2 << 20, "p1": gd.DefaultConfig().RelayCacheBytes} {
		opts, err := brokerOptions(n, id, t.TempDir(), slog.New(slog.DiscardHandler))
		if err != nil {
			t.Fatal(err)
		}
		if opts.GD.RelayCacheBytes != want {
			t.Errorf("%s: relay cache %d bytes, want %d", id, opts.GD.RelayCacheBytes, want)
		}
	}
}

// TestDiskReserveOptions: disk_reserve reaches the broker: a size as
// given, "0" as none (negative: broker.Options.DiskReserve checks
// nothing), absent as the default (0: the broker's four segments).
func TestDiskReserveOptions(t *testing.T) {
	const net = "[[broker]]\nid = \"p1\"\nlisten = \"127.0.0.1:1\"\npubends = [\"P1\"]\ndisk_reserve = \"1GiB\"\n" +
		"[[broker]]\nid = \"p2\"\nlisten = \"127.0.0.1:2\"\npubends = [\"P2\"]\ndisk_reserve = \"0\"\n" +
		"[[broker]]\nid = \"p3\"\nlisten = \"127.0.0.1:3\"\npubends = [\"P3\"]\n"
	n, err := config.Parse([]byte(net), "net.toml")
	if err != nil {
		t.Fatal(err)
	}
	for id, want := range map[string]int64{"p1": 1 << 30, "p2": -1, "p3": 0} {
		opts, err := brokerOptions(n, id, t.TempDir(), slog.New(slog.DiscardHandler))
		if err != nil {
			t.Fatal(err)
		}
		if opts.DiskReserve != want {
			t.Errorf("%s: DiskReserve %d, want %d", id, opts.DiskReserve, want)
		}
	}
}

// The candidate homes of consumer groups are the brokers with a client
// address and a data directory, outside replicated PHB cells, the same
// list at every broker.
func TestGroupHomesOptions(t *testing.T) {
	n, err := config.Parse([]byte(`
[[broker]]
id = "p1"
listen = "127.0.0.1:1"
clients = "127.0.0.1:11"
data = "p1"
pubends = ["P1"]
[[broker]]
id = "b1"
listen = "127.0.0.1:2"
[[broker]]
id = "s1"
listen = "127.0.0.1:3"
clients = "127.0.0.1:13"
[[broker]]
id = "s2"
listen = "127.0.0.1:4"
clients = "127.0.0.1:14"
data = "s2"
[[link]]
up = "p1"
down = "b1"
[[link]]
up = "b1"
down = "s1"
[[link]]
up = "b1"
down = "s2"
`), "net.toml")
	if err != nil {
		t.Fatal(err)
	}
	want := []shell.GroupHome{{ID: "p1", Clients: "127.0.0.1:11"}, {ID: "s2", Clients: "127.0.0.1:14"}}
	for _, id := range []string{"p1", "b1", "s1", "s2"} {
		o, err := brokerOptions(n, id, t.TempDir(), slog.New(slog.DiscardHandler))
		if err != nil {
			t.Fatal(err)
		}
		if !slices.Equal(o.GroupHomes, want) {
			t.Fatalf("%s: group homes %v, want %v", id, o.GroupHomes, want)
		}
	}
}
