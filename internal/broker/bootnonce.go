package broker

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io/fs"
	"path/filepath"
	"time"

	"github.com/aerie-mq/aerie/internal/vfs"
)

// nonceFile holds the last boot nonce of the broker owning the data dir.
const nonceFile = "boot.nonce"

// bootNonce returns this incarnation's boot nonce: max(now in ns, last+1),
// where last is the nonce of the previous boot, read from dir, and records
// it there (atomically: a temporary file, fsync, rename, directory sync).
//
// The nonce must grow across restarts: the membership view layer treats
// the incarnation with the larger nonce as the newer one and removes the
// older as superseded (internal/member). The clock alone can step back
// between boots; the file covers that. Without a data dir (dir "") the
// clock alone decides. The transport handshake and gd.LinkUp only compare
// nonces for equality, and a wall clock in ns is never 0.
func bootNonce(fsys vfs.FS, dir string, now time.Time) (uint64, error) {
	nonce := uint64(now.UnixNano())
	if dir == "" {
		return nonce, nil
	}
	if err := fsys.MkdirAll(dir); err != nil {
		return 0, fmt.Errorf("boot nonce: %w", err)
	}
	path := filepath.Join(dir, nonceFile)
	last, err := readNonce(fsys, path)
	if err != nil {
		return 0, err
	}
	nonce = max(nonce, last+1)
	tmp := path + ".tmp"
	f, err := fsys.Create(tmp)
	if err != nil {
		return 0, fmt.Errorf("boot nonce: %w", err)
	}
	_, err = f.Write(binary.BigEndian.AppendUint64(nil, nonce))
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
		return 0, fmt.Errorf("boot nonce: write %s: %w", path, err)
	}
	return nonce, nil
}

// readNonce reads the recorded nonce; 0 when there is none yet.
func readNonce(fsys vfs.FS, path string) (uint64, error) {
	f, err := fsys.Open(path)
	if errors.Is(err, fs.ErrNotExist) {
		return 0, nil
	}
	if err != nil {
		return 0, fmt.Errorf("boot nonce: %w", err)
	}
	defer f.Close()
	var b [8]byte
	if _, err := f.ReadAt(b[:], 0); err != nil {
		// The file is written whole and renamed into place, so a short
		// file is damage, not a torn write: refuse rather than guess.
		return 0, fmt.Errorf("boot nonce: read %s: %w", path, err)
	}
	return binary.BigEndian.Uint64(b[:]), nil
}
