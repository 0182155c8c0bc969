package main

import (
	"log/slog"
	"reflect"
	"strings"
	"testing"

	"github.com/aerie-mq/aerie/internal/config"
	"github.com/aerie-mq/aerie/internal/msg"
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
}
