package wire

import (
	"bytes"
	"errors"
	"io"
	"testing"
	"testing/iotest"

	"github.com/aerie-mq/aerie/internal/msg"
)

func FuzzDecode(f *testing.F) {
	for _, c := range cases {
		b, err := AppendFrame(nil, c.m)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b[4:])
	}
	f.Add([]byte{})
	f.Add([]byte{byte(TypeSubStarted), 0, 2, 1, 'b', 1, 1, 'a', 1})
	f.Add([]byte{byte(TypePublishRun), 2, 1, 'P', 1, 'c', 1, 1, 't', 0, 0, 1, 'P', 1, 'c', 2, 1, 't', 0})
	f.Add([]byte{byte(TypePublishRunNoAck), 2, 1, 'P', 1, 'c', 1, 1, 't', 0, 0, 1, 'P', 1, 'c', 2, 1, 't', 0})
	f.Fuzz(func(t *testing.T, in []byte) {
		m, err := Decode(in)
		if err != nil {
			if m != nil {
				t.Fatalf("Decode returned both %v and %v", m, err)
			}
			if !errors.Is(err, ErrMalformed) && !errors.Is(err, ErrUnknownType) {
				t.Fatalf("unexpected error kind: %v", err)
			}
			if vm, verr := DecodeView(bytes.Clone(in)); verr == nil {
				t.Fatalf("DecodeView took %v where Decode refused: %v", vm, err)
			}
			return
		}
		out, err := AppendFrame(nil, m)
		if err != nil {
			t.Fatalf("decoded %v does not re-encode: %v", m, err)
		}
		// The encoding is canonical: what decodes re-encodes to itself.
		if !bytes.Equal(out[4:], in) {
			t.Fatalf("re-encoding differs:\n in %x\nout %x", in, out[4:])
		}
		again, err := Decode(out[4:])
		if err != nil || !equalMsg(again, m) {
			t.Fatalf("round trip changed %v -> %v (%v)", m, again, err)
		}
		// Viewing the frame instead of copying from it decodes the same.
		viewed, err := DecodeView(bytes.Clone(in))
		if err != nil || !equalMsg(viewed, m) {
			t.Fatalf("DecodeView gave %v (%v), Decode %v", viewed, err, m)
		}
	})
}

func FuzzReader(f *testing.F) {
	var all []byte
	for _, c := range cases {
		all, _ = AppendFrame(all, c.m)
	}
	f.Add(all, uint16(0))
	f.Add(all[:len(all)-3], uint16(0))
	f.Add(all, uint16(64))
	f.Add([]byte{0xff, 0xff, 0xff, 0xff, 1}, uint16(0))
	f.Add([]byte{0, 0, 0, 0}, uint16(0))
	f.Fuzz(func(t *testing.T, in []byte, max uint16) {
		read := func(src io.Reader, view bool) ([]msg.Msg, error) {
			r := NewReader(src, int(max))
			if view {
				r.ViewFrames()
			}
			var ms []msg.Msg
			for len(ms) <= len(in) {
				m, err := r.Next()
				if err != nil {
					if err2 := func() error { _, e := r.Next(); return e }(); err2 != err {
						t.Fatalf("error not sticky: %v then %v", err, err2)
					}
					return ms, err
				}
				ms = append(ms, m)
			}
			t.Fatalf("more messages than input bytes")
			return nil, nil
		}
		ms, err := read(bytes.NewReader(in), false)
		switch {
		case err == io.EOF, errors.Is(err, io.ErrUnexpectedEOF), errors.Is(err, ErrFrameTooLarge),
			errors.Is(err, ErrMalformed), errors.Is(err, ErrUnknownType):
		default:
			t.Fatalf("unexpected error kind: %v", err)
		}
		// What was read re-encodes to exactly the bytes it came from.
		var out []byte
		for _, m := range ms {
			var eerr error
			if out, eerr = AppendFrame(out, m); eerr != nil {
				t.Fatalf("%v does not re-encode: %v", m, eerr)
			}
		}
		if !bytes.HasPrefix(in, out) {
			t.Fatalf("re-encoded stream is not a prefix of the input")
		}
		// The same stream read in one-byte pieces, and read into write-once
		// memory that the messages view, gives the same messages.
		for _, view := range []bool{false, true} {
			ms2, err2 := read(iotest.OneByteReader(bytes.NewReader(in)), view)
			if len(ms2) != len(ms) || (err == io.EOF) != (err2 == io.EOF) {
				t.Fatalf("one-byte reads (viewing %v) differ: %d msgs (%v) vs %d (%v)", view, len(ms2), err2, len(ms), err)
			}
			for i := range ms {
				if !equalMsg(ms[i], ms2[i]) {
					t.Fatalf("one-byte reads (viewing %v) differ at %d", view, i)
				}
			}
		}
	})
}
