package broker

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"github.com/aerie-mq/aerie/internal/msg"
	"github.com/aerie-mq/aerie/internal/vfs"
)

// memberFile names, in a replicated PHB member's data directory, the cell,
// member and slot the directory belongs to. A member started on another
// member's or another cell's directory, or on a single PHB's, would join
// the group with a log that is not its own — two members with one
// identity, or a cell whose logs diverge — and a member whose config moved
// it to another slot would answer for another member's Raft id; so it
// refuses to start instead. The cell's other members may change
// (docs/REPLICATION.md "Changing a cell's members"); its slot may not.
const memberFile = "raft-member"

// memberIdentity is what memberFile holds: one line.
func memberIdentity(cell, self msg.NodeID, slot uint64) string {
	return fmt.Sprintf("cell %s member %s slot %d\n", cell, self, slot)
}

// parseIdentity reads memberFile's line: "cell C member M slot S", or, as
// written before members could change, "cell C member M of M1,M2,…", whose
// slot is M's position in the list plus one.
func parseIdentity(line string) (cell, self string, slot uint64, ok bool) {
	f := strings.Fields(line)
	if len(f) != 6 || f[0] != "cell" || f[2] != "member" {
		return "", "", 0, false
	}
	switch f[4] {
	case "slot":
		n, err := strconv.ParseUint(f[5], 10, 64)
		return f[1], f[3], n, err == nil && n > 0
	case "of":
		i := slices.Index(strings.Split(f[5], ","), f[3])
		return f[1], f[3], uint64(i + 1), i >= 0
	}
	return "", "", 0, false
}

// checkMemberDir refuses a data directory that belongs to another member,
// another cell or another slot, or that holds a single PHB's log; a fresh
// directory is claimed (written, fsynced, renamed into place).
func checkMemberDir(fsys vfs.FS, dir string, cell, self msg.NodeID, slot uint64) error {
	want := memberIdentity(cell, self, slot)
	path := filepath.Join(dir, memberFile)
	have, err := readAll(fsys, path)
	switch {
	case err == nil:
		c, m, s, ok := parseIdentity(have)
		switch {
		case !ok || c != string(cell) || m != string(self):
			return fmt.Errorf("data directory %s belongs to %s, not to %s: refusing to start (check the broker's data key)",
				dir, strings.TrimSpace(have), strings.TrimSpace(want))
		case s != slot:
			return fmt.Errorf("data directory %s holds member %s of cell %s on Raft slot %d, and the config puts it on slot %d "+
				"(a member without raft_slot takes its position among the cell's members without one): refusing to start; "+
				"set raft_slot = %d on broker %s, and keep every other member's slot as it was", dir, self, cell, s, slot, s, self)
		}
		return nil
	case !errors.Is(err, fs.ErrNotExist):
		return fmt.Errorf("data directory %s: %w", dir, err)
	}
	if names, err := fsys.ReadDir(filepath.Join(dir, "pubends")); err == nil && len(names) > 0 {
		return fmt.Errorf("data directory %s holds the log of a PHB that was not replicated: a replicated cell starts from empty directories (refusing to start)", dir)
	}
	if err := fsys.MkdirAll(dir); err != nil {
		return fmt.Errorf("data directory %s: %w", dir, err)
	}
	tmp := path + ".tmp"
	f, err := fsys.Create(tmp)
	if err != nil {
		return fmt.Errorf("data directory %s: %w", dir, err)
	}
	_, err = f.Write([]byte(want))
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = fsys.Rename(tmp, path)
	}
	if err == nil {
		err = fsys.SyncDir(dir)
	}
	if err != nil {
		return fmt.Errorf("data directory %s: claim it for %s: %w", dir, strings.TrimSpace(want), err)
	}
	return nil
}

func readAll(fsys vfs.FS, path string) (string, error) {
	f, err := fsys.Open(path)
	if err != nil {
		return "", err
	}
	defer f.Close()
	size, err := f.Size()
	if err != nil {
		return "", err
	}
	b := make([]byte, size)
	if _, err := f.ReadAt(b, 0); err != nil && !errors.Is(err, io.EOF) {
		return "", err
	}
	return string(b), nil
}
