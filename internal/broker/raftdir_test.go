package broker

import (
	"strings"
	"testing"

	"github.com/aerie-mq/aerie/internal/msg"
	"github.com/aerie-mq/aerie/internal/vfs"
)

// TestMemberDir: a replicated member claims a fresh data directory, starts
// again on its own, and refuses another member's, another cell's, another
// membership's, or a single PHB's log.
func TestMemberDir(t *testing.T) {
	ms := []msg.NodeID{"p1", "p2", "p3"}
	fs := vfs.NewMem()
	if err := checkMemberDir(fs, "/d/p2", "phb", "p2", ms); err != nil {
		t.Fatalf("fresh directory: %v", err)
	}
	if err := checkMemberDir(fs, "/d/p2", "phb", "p2", ms); err != nil {
		t.Fatalf("its own directory again: %v", err)
	}
	for _, c := range []struct {
		name, cell, self string
		members          []msg.NodeID
	}{
		{"another member", "phb", "p3", ms},
		{"another cell", "other", "p2", ms},
		{"another membership", "phb", "p2", []msg.NodeID{"p1", "p2", "p3", "p4", "p5"}},
	} {
		err := checkMemberDir(fs, "/d/p2", msg.NodeID(c.cell), msg.NodeID(c.self), c.members)
		want := "data directory /d/p2 belongs to cell phb member p2 of p1,p2,p3, not to"
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: got %v, want an error containing %q", c.name, err, want)
		}
	}
	if err := fs.MkdirAll("/d/single/pubends"); err != nil {
		t.Fatal(err)
	}
	f, err := fs.Create("/d/single/pubends/00000000000000000000.log")
	if err != nil {
		t.Fatal(err)
	}
	f.Close()
	err = checkMemberDir(fs, "/d/single", "phb", "p1", ms)
	if want := "holds the log of a PHB that was not replicated"; err == nil || !strings.Contains(err.Error(), want) {
		t.Errorf("a single PHB's directory: got %v, want %q", err, want)
	}
}
