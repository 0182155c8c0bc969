package eventlog

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"path"

	"github.com/aerie-mq/aerie/internal/vfs"
)

// WriteSnapshot atomically replaces the file at name with payloads, framed
// like log records. It writes name+".tmp", fsyncs it, renames it over name
// and fsyncs the directory: after a crash the file holds either the old
// snapshot or the new one, never a mix. A snapshot lets a log drop the
// segments whose content it summarises (TruncateFront).
func WriteSnapshot(fsys vfs.FS, name string, payloads [][]byte) error {
	tmp := name + ".tmp"
	f, err := fsys.Create(tmp)
	if err != nil {
		return fmt.Errorf("eventlog: snapshot %s: %w", name, err)
	}
	var buf []byte
	for _, p := range payloads {
		buf = appendFrame(buf, p)
	}
	if _, err = f.Write(buf); err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = fsys.Rename(tmp, name)
	}
	if err == nil {
		err = fsys.SyncDir(path.Dir(name))
	}
	if err != nil {
		return fmt.Errorf("eventlog: snapshot %s: %w", name, err)
	}
	return nil
}

// ReadSnapshot returns the payloads of the snapshot at name; no file is an
// empty snapshot. A snapshot is only ever renamed into place after its
// fsync, so any bad frame is corruption (ErrCorrupt), never a torn tail.
func ReadSnapshot(fsys vfs.FS, name string) ([][]byte, error) {
	f, err := fsys.Open(name)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("eventlog: snapshot %s: %w", name, err)
	}
	defer f.Close()
	size, err := f.Size()
	if err != nil {
		return nil, fmt.Errorf("eventlog: snapshot %s: %w", name, err)
	}
	r := newFrameReader(f, size, DefaultMaxRecordBytes)
	var out [][]byte
	for {
		p, err := r.next(nil)
		if errors.Is(err, io.EOF) {
			return out, nil
		}
		var bad *badFrame
		if errors.As(err, &bad) {
			return nil, corruptAt(name, bad.off, "%s", bad.reason)
		}
		if err != nil {
			return nil, fmt.Errorf("eventlog: snapshot %s: %w", name, err)
		}
		out = append(out, p)
	}
}
