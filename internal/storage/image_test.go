package storage

import (
	"bytes"
	"errors"
	"testing"

	"github.com/aerie-mq/aerie/internal/eventlog"
	"github.com/aerie-mq/aerie/internal/msg"
	"github.com/aerie-mq/aerie/internal/tick"
	"github.com/aerie-mq/aerie/internal/vfs"
)

// TestImageReadInPieces: an image read piece by piece (ImageSource) is the
// image encoded whole, as of when the source was made — records appended
// later are not part of it, and the store may be closed and opened again
// in between — and a Trim past what it has not read yet fails it.
func TestImageReadInPieces(t *testing.T) {
	fsys := vfs.NewMem()
	opts := eventlog.Options{SegmentBytes: 1 << 10}
	s, _, _, err := Open(fsys, "/d/log", "/d/snap", opts)
	if err != nil {
		t.Fatal(err)
	}
	rec := func(i int) msg.Record {
		return msg.Record{Pubend: "P1", Event: &msg.Event{Pubend: "P1", Tick: tick.Tick(10 + i), Topic: "t", Payload: make([]byte, i)}}
	}
	for i := range 60 {
		if _, err := s.Append([]msg.Record{rec(i)}); err != nil {
			t.Fatal(err)
		}
	}
	if _, _, err := s.Trim(20, []msg.Record{{Pubend: "P1", HWM: 9}}); err != nil {
		t.Fatal(err)
	}
	reopened := false
	for _, piece := range []int{1, 7, 100, 1 << 20} {
		img, err := s.Image()
		if err != nil {
			t.Fatal(err)
		}
		want := img.Encode(nil)
		src, err := s.ImageSource()
		if err != nil {
			t.Fatal(err)
		}
		var got []byte
		for done := false; !done; {
			before := len(got)
			if got, done, err = s.ReadImage(src, got, piece); err != nil {
				t.Fatal(err)
			}
			if !done && len(got)-before < piece {
				t.Fatalf("piece %d: read %d bytes before the end", piece, len(got)-before)
			}
			if piece == 7 && len(got) > 300 && !reopened {
				reopened = true
				// Appended records are not part of it; a reopened store
				// reads on.
				if _, err := s.Append([]msg.Record{rec(99)}); err != nil {
					t.Fatal(err)
				}
				if err := s.Close(); err != nil {
					t.Fatal(err)
				}
				if s, _, _, err = Open(fsys, "/d/log", "/d/snap", opts); err != nil {
					t.Fatal(err)
				}
			}
		}
		if !bytes.Equal(got, want) {
			t.Fatalf("piece %d: %d bytes read differ from the %d of the image", piece, len(got), len(want))
		}
	}
	if !reopened {
		t.Fatal("the store was not reopened in the middle of a read")
	}
	src, err := s.ImageSource()
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := s.ReadImage(src, nil, 10); err != nil {
		t.Fatal(err)
	}
	if _, dropped, err := s.Trim(50, []msg.Record{{Pubend: "P1", HWM: 9}}); err != nil || dropped == 0 {
		t.Fatalf("trim: %d dropped, %v", dropped, err)
	}
	if _, _, err := s.ReadImage(src, nil, 1<<20); !errors.Is(err, eventlog.ErrTruncated) {
		t.Fatalf("read after a trim past it: %v", err)
	}
	s.Close()
}

// TestImageReader: an image read back record by record (ImageReader) is
// the image encoded; an encoding cut short or with bytes after it is
// refused; InstallFrom installs what Install does.
func TestImageReader(t *testing.T) {
	img := Image{First: 7, Snapshot: [][]byte{[]byte("snap")}, Records: [][]byte{[]byte("a"), []byte("c"), bytes.Repeat([]byte("b"), 300)}}
	enc := img.Encode(nil)
	read := func(b []byte) (Image, error) {
		ir, err := NewImageReader(bytes.NewReader(b), int64(len(b)))
		if err != nil {
			return Image{}, err
		}
		got := Image{First: ir.First, Snapshot: ir.Snapshot}
		for {
			p, err := ir.Record()
			if err != nil {
				return got, err
			}
			if p == nil {
				return got, nil
			}
			got.Records = append(got.Records, p)
		}
	}
	got, err := read(enc)
	if err != nil || !bytes.Equal(got.Encode(nil), enc) {
		t.Fatalf("read back %+v, %v", got, err)
	}
	for i := range len(enc) {
		if _, err := read(enc[:i]); !errors.Is(err, ErrBadImage) {
			t.Fatalf("cut at %d: %v", i, err)
		}
	}
	if _, err := read(append(enc, 0)); !errors.Is(err, ErrBadImage) {
		t.Fatalf("a byte after it: %v", err)
	}
	fsys := vfs.NewMem()
	if err := fsys.MkdirAll("/d"); err != nil {
		t.Fatal(err)
	}
	ir, err := NewImageReader(bytes.NewReader(enc), int64(len(enc)))
	if err != nil {
		t.Fatal(err)
	}
	s, err := InstallFrom(fsys, "/d/log", "/d/snap", eventlog.Options{SegmentBytes: 1 << 10}, ir)
	if err != nil {
		t.Fatal(err)
	}
	back, err := s.Image()
	if err != nil || !bytes.Equal(back.Encode(nil), enc) {
		t.Fatalf("installed %+v, %v", back, err)
	}
	s.Close()
}
