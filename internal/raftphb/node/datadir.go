package node

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io/fs"
	"path"
	"slices"

	"github.com/aerie-mq/aerie/internal/eventlog"
	"github.com/aerie-mq/aerie/internal/raftphb"
	"github.com/aerie-mq/aerie/internal/storage"
	"github.com/aerie-mq/aerie/internal/vfs"
)

// storeGenFile names the file that says which directory holds the store:
// installing a leader's store image (install) writes a new generation next
// to the old one and then switches this file atomically, so a crash
// leaves one whole store or the other.
const storeGenFile = "pubends.gen"

// storePaths returns the directory and snapshot file of the store's
// generation gen (0: the paths a PHB member always used).
func (n *Node) storePaths(gen uint64) (dir, snap string) { return storePaths(n.cfg.Dir, gen) }

func storePaths(data string, gen uint64) (dir, snap string) {
	name := "pubends"
	if gen > 0 {
		name = fmt.Sprintf("pubends.%d", gen)
	}
	return path.Join(data, name), path.Join(data, name+".snapshot")
}

// StorePaths returns the directory and snapshot file of the pubend store
// of the member whose data is in dir (for tools and tests; the member
// must be stopped).
func StorePaths(fsys vfs.FS, dir string) (store, snap string, err error) {
	gen, err := readGen(fsys, dir, storeGenFile)
	if err != nil {
		return "", "", err
	}
	store, snap = storePaths(dir, gen)
	return store, snap, nil
}

// readGen reads a generation file (storeGenFile, raftGenFile) of the
// member whose data is in dir: 0 when it is absent.
func readGen(fsys vfs.FS, dir, name string) (uint64, error) {
	frames, err := eventlog.ReadSnapshot(fsys, path.Join(dir, name))
	if err != nil {
		return 0, fmt.Errorf("raftphb: %w", err)
	}
	if len(frames) == 0 {
		return 0, nil
	}
	gen, k := binary.Uvarint(frames[0])
	if len(frames) != 1 || k <= 0 || k != len(frames[0]) {
		return 0, fmt.Errorf("%w: %s", eventlog.ErrCorrupt, path.Join(dir, name))
	}
	return gen, nil
}

// firstConfFile records, in a member's data directory, the slots of the
// cell's first configuration: the cell's members when this member first
// started (raftphb.Config.First).
const firstConfFile = "raft.first"

// firstConf returns the cell's first configuration as recorded in dir,
// recording peers as it when nothing is (a member's first start; or the
// first start of a member whose directory predates the record, whose
// cell's members cannot have changed since).
func firstConf(fsys vfs.FS, dir string, peers []uint64) ([]uint64, error) {
	name := path.Join(dir, firstConfFile)
	frames, err := eventlog.ReadSnapshot(fsys, name)
	if err != nil {
		return nil, fmt.Errorf("raftphb: %w", err)
	}
	if len(frames) == 0 {
		out := make([][]byte, len(peers))
		for i, p := range peers {
			out[i] = binary.AppendUvarint(nil, p)
		}
		if err := fsys.MkdirAll(dir); err != nil {
			return nil, fmt.Errorf("raftphb: %w", err)
		}
		if err := eventlog.WriteSnapshot(fsys, name, out); err != nil {
			return nil, fmt.Errorf("raftphb: record the cell's first configuration: %w", err)
		}
		return slices.Clone(peers), nil
	}
	slots := make([]uint64, len(frames))
	for i, f := range frames {
		s, k := binary.Uvarint(f)
		if k <= 0 || k != len(f) || s == 0 || s > raftphb.MaxSlots {
			return nil, fmt.Errorf("%w: %s", eventlog.ErrCorrupt, name)
		}
		slots[i] = s
	}
	return slots, nil
}

// writeGen replaces a generation file atomically.
func writeGen(fsys vfs.FS, dir, name string, gen uint64) error {
	return eventlog.WriteSnapshot(fsys, path.Join(dir, name), [][]byte{binary.AppendUvarint(nil, gen)})
}

// removeStore deletes generation gen's files, if any (a store replaced by
// an install, or one a crash left half-installed).
func (n *Node) removeStore(gen uint64) error {
	dir, snap := n.storePaths(gen)
	names, err := n.cfg.FS.ReadDir(dir)
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("raftphb: remove store %s: %w", dir, err)
	}
	for _, name := range names {
		if err := n.cfg.FS.Remove(path.Join(dir, name)); err != nil {
			return fmt.Errorf("raftphb: remove store %s: %w", dir, err)
		}
	}
	for _, f := range []string{snap, snap + ".tmp"} {
		if err := n.cfg.FS.Remove(f); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return fmt.Errorf("raftphb: remove store %s: %w", f, err)
		}
	}
	if len(names) > 0 {
		if err := n.cfg.FS.SyncDir(dir); err != nil {
			return fmt.Errorf("raftphb: remove store %s: %w", dir, err)
		}
	}
	return nil
}

// replaceStore installs an image as the store's next generation, with
// install (storage.Install or InstallFrom) into its paths.
func (n *Node) replaceStore(install func(dir, snapPath string) (*storage.Store, error)) error {
	gen := n.storeGen + 1
	if err := n.removeStore(gen); err != nil { // a crash's half-installed one
		return err
	}
	dir, snapPath := n.storePaths(gen)
	store, err := install(dir, snapPath)
	if err != nil {
		return err
	}
	if err := writeGen(n.cfg.FS, n.cfg.Dir, storeGenFile, gen); err != nil {
		store.Close()
		return fmt.Errorf("raftphb: switch the store: %w", err)
	}
	old := n.storeGen
	_ = n.store.Close() // replaced: its errors no longer matter
	n.store, n.storeGen, n.storeDirty = store, gen, 0
	return n.removeStore(old)
}
