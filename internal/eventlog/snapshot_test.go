package eventlog

import (
	"errors"
	"math/rand/v2"
	"testing"

	"github.com/aerie-mq/aerie/internal/vfs"
)

func TestSnapshotAtomicAcrossCrashes(t *testing.T) {
	for seed := uint64(0); seed < 200; seed++ {
		rng := rand.New(rand.NewPCG(seed, 9))
		fs := vfs.NewMem()
		if err := fs.MkdirAll("/d"); err != nil {
			t.Fatal(err)
		}
		old := [][]byte{[]byte("old-1"), []byte("old-2")}
		if err := WriteSnapshot(fs, "/d/meta", old); err != nil {
			t.Fatal(err)
		}
		// A second snapshot, then a crash at a random point of writing it
		// (modelled by crashing before or after it completed).
		done := rng.IntN(2) == 0
		if done {
			if err := WriteSnapshot(fs, "/d/meta", [][]byte{[]byte("new")}); err != nil {
				t.Fatal(err)
			}
		} else {
			f, _ := fs.Create("/d/meta.tmp")
			f.Write(appendFrame(nil, []byte("new")))
		}
		fs.Crash(rng)
		got, err := ReadSnapshot(fs, "/d/meta")
		if err != nil {
			t.Fatalf("seed %d: %v", seed, err)
		}
		switch {
		case done && (len(got) != 1 || string(got[0]) != "new"):
			t.Fatalf("seed %d: completed snapshot lost: %q", seed, got)
		case !done && (len(got) != 2 || string(got[0]) != "old-1"):
			t.Fatalf("seed %d: interrupted snapshot damaged the old one: %q", seed, got)
		}
	}
}

func TestSnapshotMissingAndCorrupt(t *testing.T) {
	fs := vfs.NewMem()
	fs.MkdirAll("/d")
	if got, err := ReadSnapshot(fs, "/d/none"); err != nil || got != nil {
		t.Fatalf("missing snapshot: %v %v", got, err)
	}
	WriteSnapshot(fs, "/d/meta", [][]byte{[]byte("abc")})
	f, _ := fs.Create("/d/meta") // overwrite with a bad checksum
	b := appendFrame(nil, []byte("abc"))
	b[5] ^= 0xff
	f.Write(b)
	f.Sync()
	if _, err := ReadSnapshot(fs, "/d/meta"); !errors.Is(err, ErrCorrupt) {
		t.Fatalf("corrupt snapshot: %v", err)
	}
}
