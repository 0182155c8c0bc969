package vfs

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"path"
	"path/filepath"
	"slices"
	"strings"
	"sync"
)

// MemFS is an in-memory FS with an explicit durability model, for tests and
// the deterministic simulator.
//
// Model (see Crash for what a power loss does):
//   - file content: every file has a durable prefix (the bytes present at its
//     last successful Sync) and unsynced bytes appended after it. Because
//     writes only append, the durable content is always a prefix of the
//     current content.
//   - Truncate (and Create of an existing name, which truncates) cuts the
//     durable prefix too, immediately. This is simpler than a real disk,
//     where a truncation can be undone by a crash before fsync.
//   - namespace: Create, Remove and Rename change the current namespace
//     only; SyncDir(dir) copies the current entries of dir into the durable
//     namespace. A file created but never followed by SyncDir of its
//     directory vanishes on Crash; a removed or renamed one comes back under
//     its old name.
//   - directories made by MkdirAll are durable immediately.
//
// All methods, including those of the Files it hands out, are safe for
// concurrent use: a single mutex guards the whole filesystem.
type MemFS struct {
	mu      sync.Mutex
	dirs    map[string]bool
	files   map[string]*memNode // current namespace
	durable map[string]*memNode // namespace as of the last SyncDir of each dir
	gen     uint64              // bumped by Crash to invalidate open handles
	faults  []fault
	full    error // SetFull: the error writes and fsyncs fail with, or nil
}

type memNode struct {
	data   []byte
	synced int // len of the durable prefix of data
	// lost, when above 0, is 1 + the offset from which the bytes are not
	// durable whatever a later Sync says: an fsync failed on a full disk
	// there, and the kernel may have marked those pages clean (SetFull).
	// A Truncate below it clears it.
	lost int
}

// NewMem returns an empty MemFS whose root ("." and "/") exists.
func NewMem() *MemFS {
	return &MemFS{
		dirs:    map[string]bool{".": true, "/": true},
		files:   map[string]*memNode{},
		durable: map[string]*memNode{},
	}
}

// clean maps host-syntax names onto one canonical slash form so that
// "a/b", "./a/b" and "a//b" name the same file.
func clean(name string) string { return path.Clean(filepath.ToSlash(name)) }

func pathErr(op, name string, err error) error {
	return &fs.PathError{Op: op, Path: name, Err: err}
}

// Create implements FS.
func (m *MemFS) Create(name string) (File, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	n := clean(name)
	if m.dirs[n] {
		return nil, pathErr("create", name, errors.New("is a directory"))
	}
	if !m.dirs[path.Dir(n)] {
		return nil, pathErr("create", name, fs.ErrNotExist)
	}
	node := m.files[n]
	if node == nil {
		node = &memNode{}
		m.files[n] = node
	} else {
		node.data, node.synced = node.data[:0], 0
	}
	return &memFile{fs: m, node: node, name: n, gen: m.gen}, nil
}

// Open implements FS.
func (m *MemFS) Open(name string) (File, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	n := clean(name)
	node := m.files[n]
	if node == nil {
		return nil, pathErr("open", name, fs.ErrNotExist)
	}
	return &memFile{fs: m, node: node, name: n, gen: m.gen}, nil
}

// Remove implements FS. Only files can be removed.
func (m *MemFS) Remove(name string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	n := clean(name)
	if m.files[n] == nil {
		return pathErr("remove", name, fs.ErrNotExist)
	}
	delete(m.files, n)
	return nil
}

// Rename implements FS. Only files can be renamed.
func (m *MemFS) Rename(oldname, newname string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	o, n := clean(oldname), clean(newname)
	node := m.files[o]
	if node == nil {
		return fmt.Errorf("vfs: rename %s %s: %w", oldname, newname, fs.ErrNotExist)
	}
	if !m.dirs[path.Dir(n)] || m.dirs[n] {
		return fmt.Errorf("vfs: rename %s %s: %w", oldname, newname, fs.ErrInvalid)
	}
	delete(m.files, o)
	m.files[n] = node
	return nil
}

// ReadDir implements FS; it lists both files and subdirectories.
func (m *MemFS) ReadDir(dir string) ([]string, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	d := clean(dir)
	if !m.dirs[d] {
		return nil, pathErr("readdir", dir, fs.ErrNotExist)
	}
	var names []string
	for n := range m.files {
		if path.Dir(n) == d {
			names = append(names, path.Base(n))
		}
	}
	for n := range m.dirs {
		if n != d && path.Dir(n) == d {
			names = append(names, path.Base(n))
		}
	}
	slices.Sort(names)
	return names, nil
}

// MkdirAll implements FS.
func (m *MemFS) MkdirAll(dir string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	d := clean(dir)
	var missing []string
	for !m.dirs[d] {
		if m.files[d] != nil {
			return pathErr("mkdir", dir, errors.New("not a directory"))
		}
		missing = append(missing, d)
		d = path.Dir(d)
	}
	for _, p := range missing {
		m.dirs[p] = true
	}
	return nil
}

// SyncDir implements FS: the current entries of dir become the durable ones.
func (m *MemFS) SyncDir(dir string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	d := clean(dir)
	if !m.dirs[d] {
		return pathErr("syncdir", dir, fs.ErrNotExist)
	}
	if err := m.takeFault(OpSyncDir, d); err != nil {
		return pathErr("syncdir", dir, err)
	}
	for n := range m.durable {
		if path.Dir(n) == d {
			delete(m.durable, n)
		}
	}
	for n, node := range m.files {
		if path.Dir(n) == d {
			m.durable[n] = node
		}
	}
	return nil
}

// Stat implements FS. A directory has size 0.
func (m *MemFS) Stat(name string) (int64, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	n := clean(name)
	if node := m.files[n]; node != nil {
		return int64(len(node.data)), nil
	}
	if m.dirs[n] {
		return 0, nil
	}
	return 0, pathErr("stat", name, fs.ErrNotExist)
}

// String lists every file with its current and durable size; handy in test
// failure messages.
func (m *MemFS) String() string {
	m.mu.Lock()
	defer m.mu.Unlock()
	names := make([]string, 0, len(m.files))
	for n := range m.files {
		names = append(names, n)
	}
	slices.Sort(names)
	var b strings.Builder
	for _, n := range names {
		node := m.files[n]
		fmt.Fprintf(&b, "%s size=%d synced=%d\n", n, len(node.data), node.synced)
	}
	return b.String()
}

// memFile is a handle on a memNode. It remembers the crash generation it
// was opened in so that Crash can invalidate it without tracking handles.
type memFile struct {
	fs     *MemFS
	node   *memNode
	name   string // clean name at open time; used to match injected faults
	gen    uint64
	closed bool
}

// usable must be called with fs.mu held.
func (f *memFile) usable(op string) error {
	if f.closed {
		return pathErr(op, f.name, ErrClosed)
	}
	if f.gen != f.fs.gen {
		return pathErr(op, f.name, ErrCrashed)
	}
	return nil
}

func (f *memFile) Write(p []byte) (int, error) {
	f.fs.mu.Lock()
	defer f.fs.mu.Unlock()
	if err := f.usable("write"); err != nil {
		return 0, err
	}
	if err := f.fs.takeFault(OpWrite, f.name); err != nil {
		return 0, pathErr("write", f.name, err)
	}
	if f.fs.full != nil {
		// A full disk takes what fits: a short write, then the error.
		n := len(p) / 2
		f.node.data = append(f.node.data, p[:n]...)
		return n, pathErr("write", f.name, f.fs.full)
	}
	f.node.data = append(f.node.data, p...)
	return len(p), nil
}

func (f *memFile) ReadAt(p []byte, off int64) (int, error) {
	f.fs.mu.Lock()
	defer f.fs.mu.Unlock()
	if err := f.usable("read"); err != nil {
		return 0, err
	}
	if off < 0 {
		return 0, pathErr("read", f.name, fs.ErrInvalid)
	}
	if off >= int64(len(f.node.data)) {
		return 0, io.EOF
	}
	n := copy(p, f.node.data[off:])
	if n < len(p) {
		return n, io.EOF
	}
	return n, nil
}

func (f *memFile) Sync() error {
	f.fs.mu.Lock()
	defer f.fs.mu.Unlock()
	if err := f.usable("sync"); err != nil {
		return err
	}
	// A failed fsync leaves the durable prefix where it was: the unsynced
	// bytes may or may not survive a later Crash.
	if err := f.fs.takeFault(OpSync, f.name); err != nil {
		return pathErr("sync", f.name, err)
	}
	if n := f.node; f.fs.full != nil && n.synced < len(n.data) {
		if n.lost == 0 {
			n.lost = n.synced + 1
		}
		return pathErr("sync", f.name, f.fs.full)
	}
	f.node.synced = len(f.node.data)
	return nil
}

func (f *memFile) Truncate(size int64) error {
	f.fs.mu.Lock()
	defer f.fs.mu.Unlock()
	if err := f.usable("truncate"); err != nil {
		return err
	}
	if size < 0 {
		return pathErr("truncate", f.name, fs.ErrInvalid)
	}
	n := f.node
	if size <= int64(len(n.data)) {
		n.data = n.data[:size]
		n.synced = min(n.synced, int(size))
		if n.lost > int(size) {
			n.lost = 0
		}
		return nil
	}
	if f.fs.full != nil {
		return pathErr("truncate", f.name, f.fs.full)
	}
	n.data = append(n.data, make([]byte, size-int64(len(n.data)))...)
	return nil
}

func (f *memFile) Size() (int64, error) {
	f.fs.mu.Lock()
	defer f.fs.mu.Unlock()
	if err := f.usable("size"); err != nil {
		return 0, err
	}
	return int64(len(f.node.data)), nil
}

// Close marks the handle closed. Closing a handle invalidated by Crash is
// allowed so that cleanup code needs no special case.
func (f *memFile) Close() error {
	f.fs.mu.Lock()
	defer f.fs.mu.Unlock()
	if f.closed {
		return pathErr("close", f.name, ErrClosed)
	}
	f.closed = true
	return nil
}
