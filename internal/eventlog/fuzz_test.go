package eventlog

import (
	"bytes"
	"errors"
	"testing"

	"github.com/aerie-mq/aerie/internal/vfs"
)

// FuzzOpen writes arbitrary bytes as the only segment, and arbitrary bytes
// as a mark file, and checks that Open never panics and either refuses
// with ErrCorrupt or yields a usable log whose records are a prefix of the
// file's frames. The marks can only add refusals: with no valid mark, or
// one within what Open keeps without marks, it does what it does without
// them; a valid mark for a segment that is not there, or past what it
// keeps, is refused.
func FuzzOpen(f *testing.F) {
	valid := appendFrame(appendFrame(nil, []byte("hello")), []byte("world"))
	mark := func(base uint64, size int64) []byte { return appendMark(nil, syncedMark{base, size}) }
	f.Add([]byte{}, []byte{})
	f.Add(valid, []byte{})
	f.Add(valid, mark(0, int64(len(valid))))
	f.Add(valid[:len(valid)-3], mark(0, 13))
	f.Add(valid[:len(valid)-3], mark(0, int64(len(valid))))
	f.Add(append(bytes.Clone(valid), 0, 0, 0, 0, 0, 0, 0, 0), append(mark(0, 5), mark(0, 13)...))
	flipped := bytes.Clone(valid)
	flipped[len(flipped)-2] ^= 1
	f.Add(flipped, []byte{})
	f.Add(flipped, mark(0, int64(len(valid))))
	f.Add(flipped, mark(0, 13)[:19])
	f.Add(valid, mark(7, 0))
	f.Add([]byte{0xff, 0xff, 0xff, 0xff, 0, 0, 0, 0}, []byte{})

	const maxRecord = 1 << 16
	f.Fuzz(func(t *testing.T, data, marks []byte) {
		keptBare, okBare := fuzzOpen(t, data, nil, maxRecord)
		kept, ok := fuzzOpen(t, data, marks, maxRecord)
		m, valid := lastMark(marks)
		switch {
		case !valid || m.base == 0 && m.size <= keptBare && okBare:
			if ok != okBare || kept != keptBare {
				t.Fatalf("with mark %+v (valid %v): ok %v, kept %d; without: ok %v, kept %d", m, valid, ok, kept, okBare, keptBare)
			}
		case ok:
			t.Fatalf("mark %+v accepted, %d bytes kept", m, kept)
		}
	})
}

// fuzzOpen opens a log of one segment holding data, with marks as its
// first mark file (none if nil), checks what Open returns, and reports
// how many bytes it kept and whether it opened.
func fuzzOpen(t *testing.T, data, marks []byte, maxRecord int) (int64, bool) {
	m := vfs.NewMem()
	if err := m.MkdirAll(testDir); err != nil {
		t.Fatal(err)
	}
	writeFile(t, m, segPath(0), data)
	if marks != nil {
		writeFile(t, m, testDir+"/"+markNames[0], marks)
	}
	l, rec, err := Open(m, testDir, Options{MaxRecordBytes: maxRecord})
	if err != nil {
		if !errors.Is(err, ErrCorrupt) {
			t.Fatalf("Open failed without ErrCorrupt: %v", err)
		}
		if !bytes.Equal(readFile(t, m, segPath(0)), data) {
			t.Fatal("a refused segment was modified")
		}
		return 0, false
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
	return kept, true
}
