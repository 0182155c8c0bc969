package eventlog

import (
	"errors"
	"slices"
	"testing"

	"github.com/aerie-mq/aerie/internal/vfs"
)

// FuzzReadSnapshot: any file in a snapshot's place reads back as the
// payloads written, or is refused as corrupt; never a panic. What reads
// back writes and reads back the same.
func FuzzReadSnapshot(f *testing.F) {
	fs := vfs.NewMem()
	if err := WriteSnapshot(fs, "seed", [][]byte{[]byte("meta"), []byte("x")}); err != nil {
		f.Fatal(err)
	}
	file, _ := fs.Open("seed")
	size, _ := file.Size()
	good := make([]byte, size)
	file.ReadAt(good, 0)
	file.Close()
	f.Add(good)
	f.Add(good[:len(good)-2])
	f.Add([]byte{0, 0, 0, 0, 0, 0, 0, 0})
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, in []byte) {
		fs := vfs.NewMem()
		w, err := fs.Create("snap")
		if err != nil {
			t.Fatal(err)
		}
		w.Write(in)
		w.Close()
		got, err := ReadSnapshot(fs, "snap")
		if err != nil {
			if !errors.Is(err, ErrCorrupt) {
				t.Fatalf("unexpected error kind: %v", err)
			}
			return
		}
		if err := WriteSnapshot(fs, "again", got); err != nil {
			t.Fatalf("payloads read back do not write: %v", err)
		}
		again, err := ReadSnapshot(fs, "again")
		if err != nil || !slices.EqualFunc(got, again, func(a, b []byte) bool { return string(a) == string(b) }) {
			t.Fatalf("round trip: %v, %q != %q", err, again, got)
		}
	})
}
