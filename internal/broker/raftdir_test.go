package broker

import (
	"strings"
	"testing"

	"github.com/aerie-mq/aerie/internal/msg"
	"github.com/aerie-mq/aerie/internal/vfs"
)

// TestMemberDir: a replicated member claims a fresh data directory, starts
// again on its own, and refuses another member's, another cell's, another
// slot's, or a single PHB's log.
func TestMemberDir(t *testing.T) {
	fs := vfs.NewMem()
	if err := checkMemberDir(fs, "/d/p2", "phb", "p2", 2); err != nil {
		t.Fatalf("fresh directory: %v", err)
	}
	if err := checkMemberDir(fs, "/d/p2", "phb", "p2", 2); err != nil {
		t.Fatalf("its own directory again: %v", err)
	}
	for _, c := range []struct {
		name, cell, self string
		slot             uint64
		want             string
	}{
		{"another member", "phb", "p3", 2, "data directory /d/p2 belongs to cell phb member p2 slot 2, not to cell phb member p3 slot 2"},
		{"another cell", "other", "p2", 2, "data directory /d/p2 belongs to cell phb member p2 slot 2, not to"},
		{"another slot", "phb", "p2", 1, "holds member p2 of cell phb on Raft slot 2, and the config puts it on slot 1"},
	} {
		err := checkMemberDir(fs, "/d/p2", msg.NodeID(c.cell), msg.NodeID(c.self), c.slot)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: got %v, want an error containing %q", c.name, err, c.want)
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
	err = checkMemberDir(fs, "/d/single", "phb", "p1", 1)
	if want := "holds the log of a PHB that was not replicated"; err == nil || !strings.Contains(err.Error(), want) {
		t.Errorf("a single PHB's directory: got %v, want %q", err, want)
	}
}

// TestMemberDirBeforeSlots: a directory claimed when the identity named
// the whole membership opens under any membership that keeps the member's
// slot (a member added after it, or one removed whose place another's
// raft_slot keeps), and is refused when the member's slot moved.
func TestMemberDirBeforeSlots(t *testing.T) {
	fs := vfs.NewMem()
	if err := fs.MkdirAll("/d/p3"); err != nil {
		t.Fatal(err)
	}
	f, err := fs.Create("/d/p3/" + memberFile)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.Write([]byte("cell phb member p3 of p1,p2,p3\n")); err != nil {
		t.Fatal(err)
	}
	f.Close()
	if err := checkMemberDir(fs, "/d/p3", "phb", "p3", 3); err != nil {
		t.Errorf("same slot under another membership: %v", err)
	}
	err = checkMemberDir(fs, "/d/p3", "phb", "p3", 2)
	if want := "set raft_slot = 3 on broker p3"; err == nil || !strings.Contains(err.Error(), want) {
		t.Errorf("slot moved from 3 to 2: got %v, want an error containing %q", err, want)
	}
}
