package eventlog

import (
	"bytes"
	"errors"
	"testing"

	"github.com/aerie-mq/aerie/internal/vfs"
)

// FuzzOpen writes arbitrary bytes as the only segment and checks that Open
// never panics and either refuses with ErrCorrupt or yields a usable log
// whose records are a prefix of the file's frames.
func FuzzOpen(f *testing.F) {
	valid := appendFrame(appendFrame(nil, []byte("hello")), []byte("world"))
	f.Add([]byte{})
	f.Add(valid)
	f.Add(valid[:len(valid)-3])
	f.Add(append(bytes.Clone(valid), 0, 0, 0, 0, 0, 0, 0, 0))
	flipped := bytes.Clone(valid)
	flipped[9] ^= 1
	f.Add(flipped)
	f.Add([]byte{0xff, 0xff, 0xff, 0xff, 0, 0, 0, 0})

	const maxRecord = 1 << 16
	f.Fuzz(func(t *testing.T, data []byte) {
		m := vfs.NewMem()
		if err := m.MkdirAll(testDir); err != nil {
			t.Fatal(err)
		}
		writeFile(t, m, segPath(0), data)

		l, rec, err := Open(m, testDir, Options{MaxRecordBytes: maxRecord})
		if err != nil {
			if !errors.Is(err, ErrCorrupt) {
				t.Fatalf("Open failed without ErrCorrupt: %v", err)
			}
			return
		}
		var kept int64
		got := readLog(t, l)
		for _, p := range got {
			if len(p) == 0 || len(p) > maxRecord {
				t.Fatalf("record of %d bytes", len(p))
			}
			kept += frameHeaderSize + int64(len(p))
		}
		if !bytes.Equal(readFile(t, m, segPath(0)), data[:kept]) {
			t.Fatal("recovered segment is not a prefix of the input")
		}
		if rec.TornTail != (kept < int64(len(data))) || rec.Offset+rec.TruncatedBytes != int64(len(data)) && rec.TornTail {
			t.Fatalf("recovery %+v for %d input bytes, %d kept", rec, len(data), kept)
		}
		// The log stays usable: append, close, reopen cleanly.
		if _, err := l.Append([]byte("more")); err != nil {
			t.Fatal(err)
		}
		if err := l.Close(); err != nil {
			t.Fatal(err)
		}
		l, rec, err = Open(m, testDir, Options{MaxRecordBytes: maxRecord})
		if err != nil || rec.TornTail {
			t.Fatalf("reopen: %v, %+v", err, rec)
		}
		equalRecords(t, readLog(t, l), append(got, []byte("more")))
	})
}
