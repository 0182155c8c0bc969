package config

import (
	"errors"
	"reflect"
	"testing"
)

// FuzzParse checks that Parse never panics, that every problem it reports is
// an *Error wrapping ErrInvalid, and that what it accepts survives
// Marshal → Parse unchanged.
func FuzzParse(f *testing.F) {
	for _, s := range []string{
		designExample, fourLevels, "", "broker = 3", "[[broker]]\nid = \n",
		`broker = [{id = "a", listen = "h:1", x = {y = [1, {z = 2}]}}]`,
		"[[broker]]\nid = \"\"\"a\"\"\"\"\nlisten = '''h:1'''\n[broker.x.y]\n\"q.r\".s = 1979-05-27 07:32:00Z\n",
		"\xef\xbb\xbf[[broker]]\r\nid = \"a\\u00e9\"\r\nlisten = \"h:1\"\r\n",
	} {
		f.Add([]byte(s))
	}
	if data, err := Dev("/d", 7100).Marshal(); err == nil {
		f.Add(data)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		n, err := Parse(data, "f.toml")
		if err != nil {
			if n != nil {
				t.Fatal("network and error")
			}
			if !errors.Is(err, ErrInvalid) {
				t.Fatalf("error does not wrap ErrInvalid: %v", err)
			}
			return
		}
		for _, b := range n.Brokers {
			n.Routes(b.ID)
		}
		out, err := n.Marshal()
		if err != nil {
			t.Fatalf("Marshal of a parsed network: %v", err)
		}
		back, err := Parse(out, "marshalled.toml")
		if err != nil {
			t.Fatalf("reparse: %v\n%s", err, out)
		}
		if !reflect.DeepEqual(back, n) {
			t.Fatalf("round trip:\n%+v\nwant\n%+v", back, n)
		}
	})
}
