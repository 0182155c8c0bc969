package main

import (
	"log/slog"
	"strings"
	"testing"

	"github.com/aerie-mq/aerie/internal/config"
)

// TestBrokerRefusesReplicatedCell: until the broker process carries the
// Raft group, a member of a replicated PHB cell refuses to start rather
// than run an unreplicated copy of the cell's pubends.
func TestBrokerRefusesReplicatedCell(t *testing.T) {
	var src strings.Builder
	for _, id := range []string{"p1", "p2", "p3"} {
		src.WriteString("[[broker]]\nid = \"" + id + "\"\ncell = \"phb\"\nlisten = \"127.0.0.1:1" + id[1:] + "\"\ndata = \"d/" + id + "\"\npubends = [\"P1\"]\n")
	}
	n, err := config.Parse([]byte(src.String()), "net.toml")
	if err != nil {
		t.Fatal(err)
	}
	_, err = brokerOptions(n, "p2", t.TempDir(), slog.New(slog.DiscardHandler))
	want := `broker "p2" is a member of a replicated PHB cell (p1, p2, p3)`
	if err == nil || !strings.Contains(err.Error(), want) {
		t.Fatalf("brokerOptions(p2) = %v, want an error containing %q", err, want)
	}
}
