package msg

import (
	"errors"
	"maps"
	"testing"
)

func TestParseToken(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want Token
		err  string
	}{
		{"", Token{}, ""},
		{"P1:123,P2:0", Token{"P1": 123, "P2": 0}, ""},
		{"P 1:18446744073709551615", Token{"P 1": 1<<64 - 1}, ""},
		{"P1", nil, `bad token "P1": "P1" is not pubend:tick`},
		{":5", nil, `bad token ":5": ":5" is not pubend:tick`},
		{"P1:x", nil, `bad token "P1:x": tick of P1: "x" is not a number`},
		{"P1:1,P1:2", nil, `bad token "P1:1,P1:2": pubend P1 appears twice`},
		{"P1:1,", nil, `bad token "P1:1,": "" is not pubend:tick`},
	} {
		got, err := ParseToken(tc.in)
		switch {
		case tc.err != "" && (err == nil || err.Error() != tc.err || !errors.Is(err, ErrBadToken)):
			t.Errorf("ParseToken(%q): %v, want error %q", tc.in, err, tc.err)
		case tc.err == "" && (err != nil || !maps.Equal(got, tc.want)):
			t.Errorf("ParseToken(%q) = %v, %v; want %v", tc.in, got, err, tc.want)
		}
	}
}

// FuzzParseToken: what parses prints back to a form that parses to the
// same token; nothing panics.
func FuzzParseToken(f *testing.F) {
	f.Add("P1:123,P2:456")
	f.Add("")
	f.Add("a:1,b")
	f.Fuzz(func(t *testing.T, s string) {
		tok, err := ParseToken(s)
		if err != nil {
			if !errors.Is(err, ErrBadToken) {
				t.Fatalf("unexpected error kind: %v", err)
			}
			return
		}
		back, err := ParseToken(tok.String())
		if err != nil || !maps.Equal(back, tok) {
			t.Fatalf("%q parsed to %v, printed %q, which parses to %v (%v)", s, tok, tok.String(), back, err)
		}
	})
}
