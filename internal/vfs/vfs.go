// Package vfs is the filesystem seam of aerie's storage code.
//
// Storage packages (the event log in particular) talk to an FS instead of
// package os so that the same code runs against the real disk in production
// and against MemFS in tests and in the deterministic simulator, where
// MemFS.Crash models a power loss and MemFS.InjectError models a failing
// disk. The interfaces are deliberately small: only what an append-only,
// fsync-disciplined log needs.
//
// Durability contract shared by every implementation:
//   - bytes written with File.Write are durable only after File.Sync
//     returns nil;
//   - a newly created, removed or renamed name is durable only after
//     FS.SyncDir of its parent directory returns nil.
//
// Code that follows this contract survives OS and MemFS crashes alike.
package vfs

import (
	"errors"
	"io/fs"
)

// ErrClosed is returned by operations on a File that was closed. It is
// fs.ErrClosed, so the same check works for OS and MemFS files.
var ErrClosed = fs.ErrClosed

// ErrCrashed is returned by operations on a MemFS File handle that was open
// when MemFS.Crash ran: like a process killed by a power cut, the handle
// does not survive; reopen the file.
var ErrCrashed = errors.New("vfs: file handle invalidated by crash")

// FS is the set of filesystem operations a log needs. Names use the host's
// path syntax (filepath.Join is fine for both implementations).
type FS interface {
	// Create creates the named file, truncating it if it exists, and opens
	// it for reading and appending. The parent directory must exist. The
	// new name is not durable until SyncDir of the parent directory.
	Create(name string) (File, error)

	// Open opens an existing file for reading and appending. It fails with
	// an error matching fs.ErrNotExist if the file does not exist.
	Open(name string) (File, error)

	// Remove deletes the named file. The removal is not durable until
	// SyncDir of the parent directory.
	Remove(name string) error

	// Rename atomically renames oldname to newname, replacing newname if it
	// exists. The rename is not durable until SyncDir of the parent
	// directories of both names.
	Rename(oldname, newname string) error

	// ReadDir returns the names (not paths) of the entries of dir, sorted.
	ReadDir(dir string) ([]string, error)

	// MkdirAll creates dir and any missing parents; existing directories
	// are not an error.
	MkdirAll(dir string) error

	// SyncDir makes the entries of dir (creations, removals and renames
	// inside it) durable.
	SyncDir(dir string) error

	// Stat returns the current size in bytes of the named file. It fails
	// with an error matching fs.ErrNotExist if the file does not exist.
	Stat(name string) (size int64, err error)
}

// File is an open file. Writes always append: there is no seek and no
// write-at, which keeps every implementation (and every crash model) simple.
// A File is not safe for concurrent use unless the implementation says so.
type File interface {
	// Write appends p at the end of the file. The bytes are not durable
	// until Sync returns nil.
	Write(p []byte) (n int, err error)

	// ReadAt reads len(p) bytes at offset off, following io.ReaderAt: when
	// it returns n < len(p) the error is non-nil (io.EOF at end of file).
	ReadAt(p []byte, off int64) (n int, err error)

	// Sync makes every byte written so far durable (fsync). A failed Sync
	// leaves the durable content unknown; callers must not retry it and
	// assume success.
	Sync() error

	// Truncate changes the file size. Shrinking discards the bytes past
	// size; growing appends zero bytes. Call Sync to make it durable.
	Truncate(size int64) error

	// Size returns the current size of the file in bytes.
	Size() (int64, error)

	// Close releases the handle. It does not imply Sync.
	Close() error
}

// CacheDropper is implemented by files whose bytes can be dropped from the
// operating system's page cache once they are durable (the OS filesystem
// on Linux). A log written once and rarely read back calls it after each
// Sync, so that its writes keep reusing a few cache pages instead of
// filling the page cache with new ones (eventlog.Options.DropSynced).
type CacheDropper interface {
	// DropCache advises the OS that bytes [off, off+n) of the file, already
	// synced, will not be read soon. It is advice: a failure loses nothing,
	// and a later read of those bytes reads them from the disk.
	DropCache(off, n int64) error
}
