package node

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"path"
	"strings"

	"go.etcd.io/raft/v3/raftpb"

	"github.com/aerie-mq/aerie/internal/msg"
	"github.com/aerie-mq/aerie/internal/storage"
)

// A staged snapshot (raftphb.EncodeStagedSnapshot) is installed from the
// file a chunked transfer left (transfer_in.go), one record at a time.

// readyPrefix names the files that hold the image of a staged snapshot
// the member stepped and has not installed yet: readyPrefix + its Raft
// index + "." + the image's offset in the file. Raft keeps at most one
// snapshot to install, the newest it accepted: the file of its index is
// there when the install comes (a later transfer of the same index
// replaces it with an image as good), and the install removes them all.
const readyPrefix = "snapshot.ready."

func (n *Node) readyPath(index uint64, off int64) string {
	return path.Join(n.cfg.Dir, fmt.Sprintf("%s%d.%d", readyPrefix, index, off))
}

// installStaged installs a staged snapshot from its file: like install,
// reading the image one record at a time.
func (n *Node) installStaged(snap *raftpb.Snapshot, want uint64) error {
	at := snap.GetMetadata().GetIndex()
	name, off, err := n.findReady(at)
	if err != nil {
		return fmt.Errorf("raftphb: staged snapshot at %d: %w", at, err)
	}
	f, err := n.cfg.FS.Open(name)
	if err != nil {
		return fmt.Errorf("raftphb: staged snapshot at %d: %w", at, err)
	}
	defer f.Close()
	size, err := f.Size()
	if err != nil {
		return fmt.Errorf("raftphb: staged snapshot at %d: %w", at, err)
	}
	ir, err := storage.NewImageReader(io.NewSectionReader(f, off, size-off), size-off)
	if err == nil && ir.Next() < want {
		err = fmt.Errorf("the image ends at %d, before the snapshot's pubend index %d", ir.Next(), want)
	}
	if err == nil {
		err = n.installImage(ir)
	}
	if err != nil {
		return fmt.Errorf("raftphb: staged snapshot at %d: %w", at, err)
	}
	if err := n.installed(snap); err != nil {
		return err
	}
	return n.removeReady()
}

// installImage makes the store hold ir's image, as install does with an
// image in memory.
func (n *Node) installImage(ir *storage.ImageReader) error {
	_, next := n.store.Bounds()
	switch {
	case next >= ir.Next():
		return nil // already held (the store kept more than its Raft log)
	case next >= ir.First:
		if err := ir.Skip(next - ir.First); err != nil {
			return err
		}
		for {
			p, err := ir.Record()
			if err != nil || p == nil {
				return err
			}
			r, err := msg.DecodeRecord(p)
			if err != nil {
				return err
			}
			if _, err := n.store.Append([]msg.Record{r}); err != nil {
				return fmt.Errorf("pubend store: %w", err)
			}
			n.storeDirty++
		}
	default:
		return n.replaceStore(func(dir, snapPath string) (*storage.Store, error) {
			return storage.InstallFrom(n.cfg.FS, dir, snapPath, n.cfg.LogOptions, ir)
		})
	}
}

// findReady returns the file holding the image of the staged snapshot at
// Raft index at, and the image's offset in it.
func (n *Node) findReady(at uint64) (string, int64, error) {
	names, err := n.cfg.FS.ReadDir(n.cfg.Dir)
	if err != nil {
		return "", 0, err
	}
	for _, name := range names {
		var index uint64
		var off int64
		if _, err := fmt.Sscanf(name, readyPrefix+"%d.%d", &index, &off); err == nil && index == at {
			return path.Join(n.cfg.Dir, name), off, nil
		}
	}
	return "", 0, fmt.Errorf("no staged image (%s%d.*)", readyPrefix, at)
}

// removeReady removes every staged image: after an install, and at a
// start (a crash between a transfer's end and its install).
func (n *Node) removeReady() error {
	names, err := n.cfg.FS.ReadDir(n.cfg.Dir)
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("raftphb: remove staged images: %w", err)
	}
	for _, name := range names {
		if strings.HasPrefix(name, readyPrefix) {
			if err := n.cfg.FS.Remove(path.Join(n.cfg.Dir, name)); err != nil && !errors.Is(err, fs.ErrNotExist) {
				return fmt.Errorf("raftphb: remove staged images: %w", err)
			}
		}
	}
	return nil
}
