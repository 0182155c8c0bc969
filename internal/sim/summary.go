package sim

import (
	"path"
	"strings"

	"github.com/aerie-mq/aerie/internal/vfs"
)

// damageSummary damages one of the segment summaries on n's disk, which
// just crashed (FaultSummary): torn, replaced by another segment's, or a
// byte flipped. The restart must not use it (checkRestored).
func (w *world) damageSummary(n *node) {
	var fsys *vfs.MemFS
	switch {
	case n.disk != nil:
		fsys = n.disk.fs
	case n.raft != nil:
		fsys = n.raft.fs
	default:
		return
	}
	var sums []string
	var walk func(dir string)
	walk = func(dir string) {
		names, err := fsys.ReadDir(dir)
		if err != nil {
			return // a file
		}
		for _, name := range names {
			p := path.Join(dir, name)
			if strings.HasSuffix(name, ".sum") {
				sums = append(sums, p)
			} else {
				walk(p)
			}
		}
	}
	walk("/")
	if len(sums) == 0 {
		return
	}
	name := sums[w.srng.IntN(len(sums))]
	b := readAll(fsys, name)
	if len(b) == 0 {
		return
	}
	switch w.srng.IntN(3) {
	case 0: // torn
		b = b[:w.srng.IntN(len(b))]
	case 1: // another segment's
		if other := readAll(fsys, sums[w.srng.IntN(len(sums))]); len(other) > 0 {
			b = other
		}
	default: // rot
		b[w.srng.IntN(len(b))] ^= byte(1 + w.srng.IntN(255))
	}
	f, err := fsys.Create(name)
	if err != nil {
		return
	}
	_, _ = f.Write(b)
	_ = f.Sync()
	_ = f.Close()
	w.sums.damaged++
	w.watchf("damaged the segment summary %s of %s", name, n.id)
}

// readAll returns the bytes of the file name (nil if it cannot be read).
func readAll(fsys vfs.FS, name string) []byte {
	f, err := fsys.Open(name)
	if err != nil {
		return nil
	}
	defer f.Close()
	size, err := f.Size()
	if err != nil {
		return nil
	}
	b := make([]byte, size)
	if _, err := f.ReadAt(b, 0); err != nil {
		return nil
	}
	return b
}
