package vfs

import (
	"fmt"
	"os"
)

// OS returns an FS backed by package os.
func OS() FS { return osFS{} }

type osFS struct{}

// Files are opened with O_APPEND so that Write always lands at the end of
// the file, whatever the file offset; ReadAt (pread) is unaffected.
const osFlags = os.O_RDWR | os.O_APPEND

func (osFS) Create(name string) (File, error) {
	f, err := os.OpenFile(name, osFlags|os.O_CREATE|os.O_TRUNC, 0o644)
	if err != nil {
		return nil, err
	}
	return osFile{f}, nil
}

func (osFS) Open(name string) (File, error) {
	f, err := os.OpenFile(name, osFlags, 0)
	if err != nil {
		return nil, err
	}
	return osFile{f}, nil
}

func (osFS) Remove(name string) error             { return os.Remove(name) }
func (osFS) Rename(oldname, newname string) error { return os.Rename(oldname, newname) }
func (osFS) MkdirAll(dir string) error            { return os.MkdirAll(dir, 0o755) }

// ReadDir relies on os.ReadDir returning entries sorted by name.
func (osFS) ReadDir(dir string) ([]string, error) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, err
	}
	names := make([]string, len(entries))
	for i, e := range entries {
		names[i] = e.Name()
	}
	return names, nil
}

// SyncDir fsyncs the directory itself: on POSIX systems that is what makes
// a creation, removal or rename inside it survive a power loss.
func (osFS) SyncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	if err := d.Sync(); err != nil {
		d.Close()
		return fmt.Errorf("vfs: sync dir %s: %w", dir, err)
	}
	return d.Close()
}

func (osFS) Stat(name string) (int64, error) {
	fi, err := os.Stat(name)
	if err != nil {
		return 0, err
	}
	return fi.Size(), nil
}

// osFile hides the rest of *os.File's methods so callers stay within File.
type osFile struct{ f *os.File }

func (o osFile) Write(p []byte) (int, error)             { return o.f.Write(p) }
func (o osFile) ReadAt(p []byte, off int64) (int, error) { return o.f.ReadAt(p, off) }
func (o osFile) Sync() error                             { return o.f.Sync() }
func (o osFile) Truncate(size int64) error               { return o.f.Truncate(size) }
func (o osFile) Close() error                            { return o.f.Close() }

func (o osFile) Size() (int64, error) {
	fi, err := o.f.Stat()
	if err != nil {
		return 0, err
	}
	return fi.Size(), nil
}
