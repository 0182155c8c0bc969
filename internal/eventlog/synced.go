package eventlog

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io/fs"
	"path/filepath"

	"github.com/aerie-mq/aerie/internal/vfs"
)

// The synced mark tells a torn tail from damage to acknowledged records.
// A bad last frame with nothing valid after it looks the same in both
// cases; what differs is whether a Sync covered it. So after every Sync
// the log appends to a side file a small record of how far the active
// segment was synced: its base and its length. Open treats a bad frame
// that starts below that length as corruption of records a Sync made
// durable (and a caller may have acknowledged), and refuses it; past it,
// the old rule applies (a torn tail is truncated).
//
// The side files are never fsynced, so the hot path keeps its one fsync
// per group commit: a mark is written only after the fsync it describes
// returned, so whenever the OS writes it back, in whatever order with the
// segment's later bytes, it claims bytes that were durable already. It
// can only lag: a crash may lose the latest marks (then a bad frame past
// the last surviving one is taken for a torn tail, as before), never make
// one run ahead. Each mark carries its own checksum, so a torn or zeroed
// mark is ignored, not trusted.
//
// Marks go to two files in turn, each rewritten from empty once it holds
// markFileBytes, so that the files stay small and a crash just after a
// switch still finds the other file's last mark.
const (
	markSize      = 20 // base uint64, length uint64, crc32c uint32 of the two
	markFileBytes = 64 << 10
)

var markNames = [2]string{"synced.0", "synced.1"}

// syncedMark says that the segment whose first record is base was durable
// up to byte length size.
type syncedMark struct {
	base uint64
	size int64
}

func (m syncedMark) after(o syncedMark) bool {
	return m.base > o.base || m.base == o.base && m.size > o.size
}

func appendMark(dst []byte, m syncedMark) []byte {
	start := len(dst)
	dst = binary.LittleEndian.AppendUint64(dst, m.base)
	dst = binary.LittleEndian.AppendUint64(dst, uint64(m.size))
	return binary.LittleEndian.AppendUint32(dst, crc32.Checksum(dst[start:], castagnoli))
}

// lastMark returns the last valid mark of b, a mark file's content: marks
// are appended, so the first invalid one ends what can be trusted.
func lastMark(b []byte) (m syncedMark, ok bool) {
	for ; len(b) >= markSize; b = b[markSize:] {
		if crc32.Checksum(b[:16], castagnoli) != binary.LittleEndian.Uint32(b[16:]) {
			break
		}
		size := binary.LittleEndian.Uint64(b[8:])
		if size > 1<<62 {
			break
		}
		m, ok = syncedMark{base: binary.LittleEndian.Uint64(b), size: int64(size)}, true
	}
	return m, ok
}

// readMark returns the latest mark of the log in dir, if any survives,
// and which of the two files holds it.
func readMark(fsys vfs.FS, dir string) (best syncedMark, file int, found bool, err error) {
	for i, name := range markNames {
		b, err := readSmallFile(fsys, filepath.Join(dir, name), markFileBytes+markSize)
		if err != nil {
			return best, 0, false, err
		}
		if m, ok := lastMark(b); ok && (!found || m.after(best)) {
			best, file, found = m, i, true
		}
	}
	return best, file, found, nil
}

// readSmallFile reads at most limit bytes of name; a missing file is empty.
func readSmallFile(fsys vfs.FS, name string, limit int64) ([]byte, error) {
	f, err := fsys.Open(name)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("eventlog: open %s: %w", name, err)
	}
	defer f.Close()
	size, err := f.Size()
	if err != nil {
		return nil, fmt.Errorf("eventlog: size of %s: %w", name, err)
	}
	b := make([]byte, min(size, limit))
	if n, err := f.ReadAt(b, 0); n < len(b) {
		return nil, fmt.Errorf("eventlog: read %s: %w", name, readErr(err))
	}
	return b, nil
}

// marker appends synced marks (see above). Its errors never fail the log:
// a mark is advice for a later Open, and a marker that could not write
// stops writing, so that its files keep only marks that were whole.
type marker struct {
	files  [2]vfs.File
	cur    int   // the file marks go to
	size   int64 // bytes in files[cur]
	broken bool
	buf    []byte
}

// openMarker opens the mark files of dir, creating them when missing
// (the caller syncs dir afterwards). With fresh, stale marks are dropped
// first: a new log must not inherit the marks of a log that was removed
// from the same directory. Marks then go to the file after the one that
// holds the latest mark, so that a crash before the next mark still finds
// that one.
func openMarker(fsys vfs.FS, dir string, fresh bool, latest int) (*marker, error) {
	mk := &marker{cur: 1 - latest}
	for i, name := range markNames {
		path := filepath.Join(dir, name)
		if fresh {
			if err := fsys.Remove(path); err != nil && !errors.Is(err, fs.ErrNotExist) {
				mk.close()
				return nil, fmt.Errorf("eventlog: remove stale %s: %w", path, err)
			}
		}
		f, err := fsys.Open(path)
		if errors.Is(err, fs.ErrNotExist) {
			f, err = fsys.Create(path)
		}
		if err != nil {
			mk.close()
			return nil, fmt.Errorf("eventlog: open %s: %w", path, err)
		}
		mk.files[i] = f
	}
	if err := mk.files[mk.cur].Truncate(0); err != nil {
		mk.close()
		return nil, fmt.Errorf("eventlog: reset %s: %w", filepath.Join(dir, markNames[mk.cur]), err)
	}
	return mk, nil
}

// mark appends m, switching files when the current one is full.
func (mk *marker) mark(m syncedMark) {
	if mk == nil || mk.broken {
		return
	}
	if mk.size+markSize > markFileBytes {
		mk.cur, mk.size = 1-mk.cur, 0
		if err := mk.files[mk.cur].Truncate(0); err != nil {
			mk.broken = true
			return
		}
	}
	mk.buf = appendMark(mk.buf[:0], m)
	if _, err := mk.files[mk.cur].Write(mk.buf); err != nil {
		mk.broken = true
		return
	}
	mk.size += markSize
}

func (mk *marker) close() {
	if mk == nil {
		return
	}
	for _, f := range mk.files {
		if f != nil {
			f.Close()
		}
	}
}

// SyncedLength reports what the latest surviving synced mark of the log in
// dir says: the base of the segment that was active and how many of its
// bytes an fsync had made durable. ok is false when no mark survives. It
// is for tools and tests that must tell acknowledged bytes from a tail
// that was written but never fsynced (a kill between the write and its
// Sync leaves one); the log need not be open.
func SyncedLength(fsys vfs.FS, dir string) (segment string, size int64, ok bool, err error) {
	m, _, found, err := readMark(fsys, dir)
	if err != nil || !found {
		return "", 0, false, err
	}
	return segmentName(m.base), m.size, true, nil
}
