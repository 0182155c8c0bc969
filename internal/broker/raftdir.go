package broker

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"path/filepath"
	"strings"

	"github.com/aerie-mq/aerie/internal/msg"
	"github.com/aerie-mq/aerie/internal/vfs"
)

// memberFile names, in a replicated PHB member's data directory, the cell
// and member the directory belongs to. A member started on another
// member's or another cell's directory, or on a single PHB's, would join
// the group with a log that is not its own — two members with one
// identity, or a cell whose logs diverge — so it refuses to start instead.
const memberFile = "raft-member"

// memberIdentity is what memberFile holds: one line.
func memberIdentity(cell, self msg.NodeID, members []msg.NodeID) string {
	ms := make([]string, len(members))
	for i, m := range members {
		ms[i] = string(m)
	}
	return fmt.Sprintf("cell %s member %s of %s\n", cell, self, strings.Join(ms, ","))
}

// checkMemberDir refuses a data directory that belongs to another member,
// another cell or another membership, or that holds a single PHB's log; a
// fresh directory is claimed (written, fsynced, renamed into place).
func checkMemberDir(fsys vfs.FS, dir string, cell, self msg.NodeID, members []msg.NodeID) error {
	want := memberIdentity(cell, self, members)
	path := filepath.Join(dir, memberFile)
	have, err := readAll(fsys, path)
	switch {
	case err == nil && have == want:
		return nil
	case err == nil:
		return fmt.Errorf("data directory %s belongs to %s, not to %s: refusing to start (check the broker's data key)",
			dir, strings.TrimSpace(have), strings.TrimSpace(want))
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
