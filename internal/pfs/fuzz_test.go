package pfs

import (
	"bytes"
	"errors"
	"testing"
)

// FuzzDecode: a record either decodes and re-encodes to the same bytes, or
// is refused with ErrBadRecord; never a panic.
func FuzzDecode(f *testing.F) {
	f.Add(appendMatch(nil, 42, []link{{sub: 3, prev: 0}, {sub: 7, prev: 12}}))
	f.Add(appendTick(nil, kindCover, 1<<50))
	f.Add(appendTick(nil, kindRestart, 9))
	f.Add(appendTick(nil, kindRelease, 9))
	f.Add([]byte{kindMatch, 1, 200})
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, in []byte) {
		r, err := decode(in, nil)
		if err != nil {
			if !errors.Is(err, ErrBadRecord) {
				t.Fatalf("unexpected error kind: %v", err)
			}
			return
		}
		var out []byte
		if r.kind == kindMatch {
			out = appendMatch(nil, r.tick, r.links)
		} else {
			out = appendTick(nil, r.kind, r.tick)
		}
		// Varints have one shortest form; a longer one decodes too, so
		// compare by decoding again rather than byte for byte.
		r2, err := decode(out, nil)
		if err != nil || r2.kind != r.kind || r2.tick != r.tick || len(r2.links) != len(r.links) {
			t.Fatalf("%x decodes to %+v, re-encoded %x decodes to %+v (%v)", in, r, out, r2, err)
		}
		if len(out) > len(in) || (len(out) == len(in) && !bytes.Equal(out, in)) {
			t.Fatalf("re-encoding %x of %x is not canonical", out, in)
		}
	})
}
