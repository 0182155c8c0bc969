package config

import (
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/aerie-mq/aerie/internal/gd"
	"github.com/aerie-mq/aerie/internal/msg"
)

// designExample is the example network of the config contract, verbatim.
const designExample = `[[broker]]
id      = "p1"
cell    = "phb"               # optional; defaults to id. Several brokers in one cell = a redundant cell.
listen  = "127.0.0.1:7101"    # broker-to-broker
clients = "127.0.0.1:7201"    # client connections (optional)
data    = "data/p1"           # optional for brokers without durable state
pubends = ["P1", "P2"]        # makes this broker a PHB for these pubends

[[broker]]
id = "b1"
listen = "127.0.0.1:7102"

[[broker]]
id = "s1"
listen = "127.0.0.1:7103"
clients = "127.0.0.1:7203"
data = "data/s1"

[[link]]                      # a virtual link from an upstream cell to a downstream cell
up = "phb"
down = "b1"
[[link]]
up = "b1"
down = "s1"
`

func TestParseDesignExample(t *testing.T) {
	n, err := Parse([]byte(designExample), "net.toml")
	if err != nil {
		t.Fatal(err)
	}
	want := &Network{
		Brokers: []Broker{
			{ID: "p1", Cell: "phb", Listen: "127.0.0.1:7101", Clients: "127.0.0.1:7201", Data: "data/p1", Pubends: []string{"P1", "P2"}},
			{ID: "b1", Cell: "b1", Listen: "127.0.0.1:7102"},
			{ID: "s1", Cell: "s1", Listen: "127.0.0.1:7103", Clients: "127.0.0.1:7203", Data: "data/s1"},
		},
		Links: []Link{{"phb", "b1"}, {"b1", "s1"}},
	}
	if !reflect.DeepEqual(n, want) {
		t.Fatalf("got  %+v\nwant %+v", n, want)
	}
	if b, ok := n.Broker("s1"); !ok || b.Data != "data/s1" {
		t.Errorf("Broker(s1) = %+v, %v", b, ok)
	}
	if _, ok := n.Broker("nope"); ok {
		t.Error("Broker(nope) found")
	}
	wantRoutes := map[string][]gd.Route{
		"p1": {{Pubend: "P1", Down: ids("b1")}, {Pubend: "P2", Down: ids("b1")}},
		"b1": {{Pubend: "P1", Up: "phb", Down: ids("s1")}, {Pubend: "P2", Up: "phb", Down: ids("s1")}},
		"s1": {{Pubend: "P1", Up: "b1"}, {Pubend: "P2", Up: "b1"}},
	}
	for id, want := range wantRoutes {
		if got := n.Routes(id); !reflect.DeepEqual(got, want) {
			t.Errorf("Routes(%s) = %+v, want %+v", id, got, want)
		}
	}
}

// Other accepted spellings of the same network.
func TestParseAccepts(t *testing.T) {
	for _, tc := range []struct{ name, src string }{
		{"inline array of tables", `
broker = [{id = "a", listen = "h:1", pubends = ["P"]}, {id = "b", listen = "h:2"}]
link = [{up = "a", down = "b"}]`},
		{"quoted and dotted-free keys, literal strings", `
[["broker"]]
"id" = 'a'
listen = 'h:1'
pubends = [
  "P", # the only one
]
[[broker]]
id = "b"
listen = """h:2"""
[[link]]
up = "a"
down = "b"`},
		{"empty pubends", `
[[broker]]
id = "a"
listen = "h:1"
pubends = ["P"]
[[broker]]
id = "b"
listen = "h:2"
pubends = []
[[link]]
up = "a"
down = "b"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			n, err := Parse([]byte(tc.src), "net.toml")
			if err != nil {
				t.Fatal(err)
			}
			want := &Network{
				Brokers: []Broker{{ID: "a", Cell: "a", Listen: "h:1", Pubends: []string{"P"}}, {ID: "b", Cell: "b", Listen: "h:2"}},
				Links:   []Link{{"a", "b"}},
			}
			if !reflect.DeepEqual(n, want) {
				t.Fatalf("got  %+v\nwant %+v", n, want)
			}
		})
	}
}

func TestParseErrors(t *testing.T) {
	for _, tc := range []struct {
		name string
		src  string
		want []string // every line of the error, in order
	}{
		{"syntax: missing value", "[[broker]]\nid = \n",
			[]string{`net.toml:2:6: expected value but found '\n' instead`}},
		{"syntax: unterminated string", "[[broker]]\nid = \"p1\nlisten = \"h:1\"\n",
			[]string{`net.toml:2:9: strings cannot contain newlines`}},
		{"syntax: key defined twice", "[[broker]]\nid = \"a\"\nid = \"b\"\n",
			[]string{`net.toml:3:1: Key 'broker.id' has already been defined.`}},
		{"unknown key with suggestion", `[[broker]]
id = "p1"
listen = "h:1"

[[broker]]
id = "s1"
lisen = "h:2"
`, []string{
			`net.toml:5:1: broker "s1" has no listen address`,
			`net.toml:7:1: unknown key "lisen" in [[broker]] (did you mean "listen"?)`,
		}},
		{"unknown keys everywhere", `title = "x"
[[brokers]]
id = "a"
[[broker]]
id = "a"
listen = "h:1"
  pubend = ["P"]
[broker.extra]
x = 1
[[link]]
up = "a"
dwn = "a"
`, []string{
			`net.toml:1:1: unknown key "title"`,
			`net.toml:2:1: unknown key "brokers" (did you mean "broker"?)`,
			`net.toml:7:3: unknown key "pubend" in [[broker]] (did you mean "pubends"?)`,
			`net.toml:8:1: unknown key "extra" in [[broker]]`,
			`net.toml:10:1: link has no down cell`,
			`net.toml:12:1: unknown key "dwn" in [[link]] (did you mean "down"?)`,
		}},
		{"chaos: unknown broker and key", `[[broker]]
id = "p1"
listen = "h:1"
[chaos]
spare = ["p2"]
interval = "10ms"
faults = ["crash", "reboot"]
every = 3
`, []string{
			`net.toml:4:1: chaos.interval 10ms is below 1s: the network would do nothing but recover`,
			`net.toml:4:1: chaos.spare: unknown broker "p2" (did you mean "p1"?)`,
			`net.toml:4:1: chaos.faults: unknown fault "reboot" (known: crash, links)`,
			`net.toml:8:1: unknown key "every" in [chaos]`,
		}},
		{"pubend names that tokens cannot carry", "[[broker]]\nid = \"p1\"\nlisten = \"h:1\"\npubends = [\"P:1\", \"a,b\"]\n",
			[]string{
				`net.toml:4:1: broker "p1": pubend "P:1": a pubend name cannot contain ',' or ':' (tokens list pubend:tick pairs)`,
				`net.toml:4:1: broker "p1": pubend "a,b": a pubend name cannot contain ',' or ':' (tokens list pubend:tick pairs)`,
			}},
		{"chaos: spare of the wrong type", "[[broker]]\nid = \"p1\"\nlisten = \"h:1\"\n[chaos]\nspare = \"p1\"\n",
			[]string{`net.toml:4:1: chaos.spare must be an array of broker ids (strings), not a string`}},
		{"unknown key in an inline table", `broker = [{id = "a", listen = "h:1"}, {id = "b", listen = "h:2", lsten = "h:3"}]`,
			[]string{`net.toml:1:66: unknown key "lsten" in [[broker]] (did you mean "listen"?)`}},
		{"wrong types", `[[broker]]
id = 5
listen = "h:1"
pubends = "P1"
[[broker]]
id = "b"
listen = ["h:2"]
cell = { name = "c" }
[[link]]
up = "b"
down = true
`, []string{
			`net.toml:2:1: id must be a string, not an integer`,
			`net.toml:4:1: pubends must be an array of strings, not a string`,
			`net.toml:7:1: listen must be a string, not an array`,
			`net.toml:8:1: cell must be a string, not a table`,
			`net.toml:11:1: down must be a string, not a boolean`,
		}},
		{"broker not an array of tables", "broker = 3\nlink = [1]\n", []string{
			`net.toml:1:1: broker must be an array of tables ([[broker]]), not an integer`,
			`net.toml:2:1: link must be an array of tables ([[link]]), not an array`,
		}},
		{"no brokers", "# nothing\n", []string{`net.toml: no brokers: a network needs at least one [[broker]]`}},
		{"missing id and listen, empty cell", `[[broker]]
clients = "h:1"
[[broker]]
id = ""
cell = ""
listen = "h:2"
`, []string{
			`net.toml:1:1: [[broker]] #1 has no id`,
			`net.toml:1:1: [[broker]] #1 has no listen address`,
			`net.toml:4:1: [[broker]] #2 has no id`,
			`net.toml:5:1: [[broker]] #2: cell must not be empty (leave it out to default to the id)`,
		}},
		{"duplicate ids", `[[broker]]
id = "a"
listen = "h:1"
[[broker]]
id = "a"
listen = "h:2"
`, []string{`net.toml:5:1: duplicate broker id "a" (first at line 1)`}},
		{"bad and duplicate addresses", `[[broker]]
id = "a"
listen = "127.0.0.1:7101"
clients = "127.0.0.1:7101"
[[broker]]
id = "b"
listen = "localhost"
clients = "h:http"
[[broker]]
id = "c"
listen = "h:70000"
clients = "h:0"
[[broker]]
id = "d"
listen = "[::1]:7102"
clients = "127.0.0.1:07101"
`, []string{
			`net.toml:4:1: broker "a": address "127.0.0.1:7101" is already used by broker "a" (listen)`,
			`net.toml:7:1: broker "b": listen address "localhost": not host:port (missing port in address)`,
			`net.toml:8:1: broker "b": clients address "h:http": port "http" is not a number in 1–65535`,
			`net.toml:11:1: broker "c": listen address "h:70000": port "70000" is not a number in 1–65535`,
			`net.toml:12:1: broker "c": clients address "h:0": port 0: peers and clients need a fixed port`,
			`net.toml:16:1: broker "d": address "127.0.0.1:07101" is already used by broker "a" (listen)`,
		}},
		{"links: unknown cell, self-link, duplicate", `[[broker]]
id = "p1"
cell = "phb"
listen = "h:1"
[[broker]]
id = "b1"
listen = "h:2"
[[link]]
up = "p1"
down = "b1"
[[link]]
up = "phb"
down = "b2"
[[link]]
up = "b1"
down = "b1"
[[link]]
up = "phb"
down = "b1"
[[link]]
up = "phb"
down = "b1"
`, []string{
			`net.toml:9:1: link up: unknown cell "p1" (links join cells; broker "p1" is in cell "phb")`,
			`net.toml:13:1: link down: unknown cell "b2" (did you mean "b1"?)`,
			`net.toml:14:1: link from cell "b1" to itself`,
			`net.toml:20:1: duplicate link "phb" → "b1" (first at line 17)`,
		}},
		{"pubends: hosted twice, empty, listed twice", `[[broker]]
id = "a"
listen = "h:1"
pubends = ["P1", "P2", "P2"]
[[broker]]
id = "b"
listen = "h:2"
pubends = ["P1", ""]
`, []string{
			`net.toml:4:1: broker "a": pubend "P2" is listed twice`,
			`net.toml:8:1: pubend "P1" is hosted by two brokers, "a" and "b"`,
			`net.toml:8:1: broker "b": empty pubend name`,
		}},
		{"not a tree: diamond", `[[broker]]
id = "p1"
listen = "h:1"
pubends = ["P1"]
[[broker]]
id = "b1"
listen = "h:2"
[[broker]]
id = "b2"
listen = "h:3"
[[broker]]
id = "s1"
listen = "h:4"
[[link]]
up = "p1"
down = "b1"
[[link]]
up = "p1"
down = "b2"
[[link]]
up = "b1"
down = "s1"
[[link]]
up = "b2"
down = "s1"
`, []string{
			`net.toml:23:1: pubend P1: cell "s1" is reached twice (via "b1" and "b2"); the links from a pubend's cell must form a tree`,
		}},
		{"not a tree: cycle back to the PHB's cell", `[[broker]]
id = "p1"
listen = "h:1"
pubends = ["P1", "P2"]
[[broker]]
id = "b1"
listen = "h:2"
[[link]]
up = "p1"
down = "b1"
[[link]]
up = "b1"
down = "p1"
`, []string{
			`net.toml:11:1: pubend P1: cell "p1" is reached twice (as the pubend's own cell and via "b1"); the links from a pubend's cell must form a tree`,
			`net.toml:11:1: pubend P2: cell "p1" is reached twice (as the pubend's own cell and via "b1"); the links from a pubend's cell must form a tree`,
		}},
		{"a cycle no pubend reaches is not checked", `[[broker]]
id = "p1"
listen = "h:1"
pubends = ["P1"]
[[broker]]
id = "b1"
listen = "h:2"
[[broker]]
id = "b2"
listen = "h:3"
[[link]]
up = "b1"
down = "b2"
[[link]]
up = "b2"
down = "b1"
`, nil},
		{"two brokers in one cell", `[[broker]]
id = "a"
cell = "c"
listen = "h:1"
[[broker]]
id = "b"
cell = "c"
listen = "h:2"
[[broker]]
id = "c"
listen = "h:3"
`, []string{
			`net.toml:3:1: cell "c" has several brokers but no downstream cell: only intermediate cells can be redundant (Gryphon GD §3)`,
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Parse([]byte(tc.src), "net.toml")
			if tc.want == nil {
				if err != nil {
					t.Fatalf("unexpected error:\n%v", err)
				}
				return
			}
			if err == nil {
				t.Fatal("no error")
			}
			if !errors.Is(err, ErrInvalid) {
				t.Errorf("error does not wrap ErrInvalid: %v", err)
			}
			if got := strings.Split(err.Error(), "\n"); !reflect.DeepEqual(got, tc.want) {
				t.Errorf("got:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(tc.want, "\n"))
			}
		})
	}
}

// All problems come back together, ordered by position, each an *Error.
func TestParseReportsAllProblems(t *testing.T) {
	src := `[[broker]]
id = "p1"
listen = "h:1"
pubends = ["P1"]
colour = "blue"
[[broker]]
id = "p1"
listen = "h"
[[link]]
up = "p1"
down = "nowhere"
`
	_, err := Parse([]byte(src), "net.toml")
	want := []*Error{
		{File: "net.toml", Line: 5, Col: 1, Msg: `unknown key "colour" in [[broker]]`},
		{File: "net.toml", Line: 7, Col: 1, Msg: `duplicate broker id "p1" (first at line 1)`},
		{File: "net.toml", Line: 8, Col: 1, Msg: `broker "p1": listen address "h": not host:port (missing port in address)`},
		{File: "net.toml", Line: 11, Col: 1, Msg: `link down: unknown cell "nowhere" (cells: p1)`},
	}
	var got []*Error
	for _, e := range err.(interface{ Unwrap() []error }).Unwrap() {
		var ce *Error
		if !errors.As(e, &ce) {
			t.Fatalf("%v is not an *Error", e)
		}
		got = append(got, ce)
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("got:\n%v\nwant:\n%v", err, errors.Join(asErrors(want)...))
	}
}

func asErrors(es []*Error) []error {
	out := make([]error, len(es))
	for i, e := range es {
		out[i] = e
	}
	return out
}

func ids(s ...string) []msg.NodeID {
	out := make([]msg.NodeID, len(s))
	for i, x := range s {
		out[i] = msg.NodeID(x)
	}
	return out
}

// A 4-level network: p1 (cell phb) hosts P1 and P2 and feeds b1, which feeds
// b2, which feeds s1 and s2; p2 hosts P3 and feeds b2 directly and s3.
const fourLevels = `
[[broker]]
id = "p1"
cell = "phb"
listen = "h:1"
pubends = ["P2", "P1"]
[[broker]]
id = "p2"
listen = "h:2"
pubends = ["P3"]
[[broker]]
id = "b1"
listen = "h:3"
[[broker]]
id = "b2"
listen = "h:4"
[[broker]]
id = "s1"
listen = "h:5"
[[broker]]
id = "s2"
listen = "h:6"
[[broker]]
id = "s3"
listen = "h:7"
[[link]]
up = "phb"
down = "b1"
[[link]]
up = "b1"
down = "b2"
[[link]]
up = "b2"
down = "s2"
[[link]]
up = "b2"
down = "s1"
[[link]]
up = "p2"
down = "b2"
[[link]]
up = "p2"
down = "s3"
`

func TestRoutes(t *testing.T) {
	n, err := Parse([]byte(fourLevels), "net.toml")
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		id   string
		want []gd.Route
	}{
		{"p1", []gd.Route{{Pubend: "P1", Down: ids("b1")}, {Pubend: "P2", Down: ids("b1")}}},
		{"p2", []gd.Route{{Pubend: "P3", Down: ids("b2", "s3")}}},
		{"b1", []gd.Route{{Pubend: "P1", Up: "phb", Down: ids("b2")}, {Pubend: "P2", Up: "phb", Down: ids("b2")}}},
		{"b2", []gd.Route{
			{Pubend: "P1", Up: "b1", Down: ids("s1", "s2")},
			{Pubend: "P2", Up: "b1", Down: ids("s1", "s2")},
			{Pubend: "P3", Up: "p2", Down: ids("s1", "s2")},
		}},
		{"s1", []gd.Route{{Pubend: "P1", Up: "b2"}, {Pubend: "P2", Up: "b2"}, {Pubend: "P3", Up: "b2"}}},
		{"s2", []gd.Route{{Pubend: "P1", Up: "b2"}, {Pubend: "P2", Up: "b2"}, {Pubend: "P3", Up: "b2"}}},
		{"s3", []gd.Route{{Pubend: "P3", Up: "p2"}}},
		{"unknown", nil},
	} {
		t.Run(tc.id, func(t *testing.T) {
			if got := n.Routes(tc.id); !reflect.DeepEqual(got, tc.want) {
				t.Errorf("Routes(%s) =\n%+v\nwant\n%+v", tc.id, got, tc.want)
			}
		})
	}
}

func TestMarshalRoundTrip(t *testing.T) {
	for _, tc := range []struct {
		name string
		n    *Network
	}{
		{"design example", mustParse(t, designExample)},
		{"four levels", mustParse(t, fourLevels)},
		{"dev", Dev("/tmp/aerie dev", 7100)},
		{"spared by the chaos monkey", func() *Network {
			n := Dev("/tmp/aerie dev", 7100)
			n.Chaos = &Chaos{Spare: []string{"p1", "s2"}, Interval: 90 * time.Second, Faults: []string{"links"}}
			n.Brokers[0].HTTP = "127.0.0.1:7401"
			return n
		}()},
		{"awkward strings", &Network{
			Brokers: []Broker{
				{ID: `a"b\c`, Cell: "tab\there", Listen: "[::1]:1", Data: "dïr/ü\x01", Pubends: []string{"P 1", "#P2", "P=3"}},
				{ID: "é", Cell: "é", Listen: "h:2"},
			},
			Links: []Link{{"tab\there", "é"}},
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			data, err := tc.n.Marshal()
			if err != nil {
				t.Fatal(err)
			}
			back, err := Parse(data, "marshalled.toml")
			if err != nil {
				t.Fatalf("%v\n%s", err, data)
			}
			if !reflect.DeepEqual(back, tc.n) {
				t.Fatalf("round trip:\n%+v\nwant\n%+v\n%s", back, tc.n, data)
			}
		})
	}
}

func TestMarshalRefusesInvalid(t *testing.T) {
	n := Dev("d", 7100)
	n.Links = append(n.Links, Link{"s1", "p1"})
	if _, err := n.Marshal(); !errors.Is(err, ErrInvalid) {
		t.Fatalf("Marshal of a cyclic network: %v", err)
	}
}

func TestDev(t *testing.T) {
	n := Dev("/data", 7100)
	if err := n.Validate(); err != nil {
		t.Fatal(err)
	}
	want := &Network{
		Brokers: []Broker{
			{ID: "p1", Cell: "p1", Listen: "127.0.0.1:7101", Clients: "127.0.0.1:7201", Data: "/data/p1", Pubends: []string{"P1", "P2", "P3", "P4"}, Gossip: "127.0.0.1:7301"},
			{ID: "b1", Cell: "b1", Listen: "127.0.0.1:7102", Gossip: "127.0.0.1:7302"},
			{ID: "s1", Cell: "s1", Listen: "127.0.0.1:7103", Clients: "127.0.0.1:7203", Data: "/data/s1", Gossip: "127.0.0.1:7303"},
			{ID: "s2", Cell: "s2", Listen: "127.0.0.1:7104", Clients: "127.0.0.1:7204", Data: "/data/s2", Gossip: "127.0.0.1:7304"},
		},
		Links: []Link{{"p1", "b1"}, {"b1", "s1"}, {"b1", "s2"}},
	}
	if !reflect.DeepEqual(n, want) {
		t.Fatalf("got  %+v\nwant %+v", n, want)
	}
	got := n.Routes("b1")
	wantB1 := []gd.Route{}
	for _, p := range []msg.PubendID{"P1", "P2", "P3", "P4"} {
		wantB1 = append(wantB1, gd.Route{Pubend: p, Up: "p1", Down: ids("s1", "s2")})
	}
	if !reflect.DeepEqual(got, wantB1) {
		t.Errorf("Routes(b1) = %+v", got)
	}
}

func TestLoad(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "network.toml")
	data, err := Dev(dir, 7100).Marshal()
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, data, 0o644); err != nil {
		t.Fatal(err)
	}
	n, err := Load(path)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(n, Dev(dir, 7100)) {
		t.Errorf("Load = %+v", n)
	}
	if _, err := Load(filepath.Join(dir, "missing.toml")); err == nil || errors.Is(err, ErrInvalid) || !errors.Is(err, os.ErrNotExist) {
		t.Errorf("Load(missing) = %v", err)
	}
	bad := filepath.Join(dir, "bad.toml")
	if err := os.WriteFile(bad, []byte("[[broker]]\nid = \"x\"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := Load(bad); err == nil || !strings.HasPrefix(err.Error(), bad+":1:1: ") {
		t.Errorf("Load(bad) = %v", err)
	}
}

func TestSuggest(t *testing.T) {
	for _, tc := range []struct{ key, want string }{
		{"lisen", "listen"}, {"Listen", "listen"}, {"client", "clients"}, {"pubend", "pubends"},
		{"ID", "id"}, {"x", ""}, {"colour", ""}, {"datas", "data"},
	} {
		got := suggest(tc.key, brokerKeys)
		if tc.want == "" && got != "" || tc.want != "" && !strings.Contains(got, `"`+tc.want+`"`) {
			t.Errorf("suggest(%q) = %q, want %q", tc.key, got, tc.want)
		}
	}
}

func mustParse(t *testing.T, src string) *Network {
	t.Helper()
	n, err := Parse([]byte(src), "net.toml")
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// TestRedundantCell: an intermediate cell of two brokers (seed 000 Fig. 3).
// Routes name cells, Cells lists every cell's brokers, Peers a broker's
// cell-mates; pubends and clients in such a cell are refused.
func TestRedundantCell(t *testing.T) {
	const src = `[[broker]]
id = "p1"
listen = "h:1"
pubends = ["P1"]
[[broker]]
id = "b1"
cell = "ib1"
listen = "h:2"
[[broker]]
id = "b2"
cell = "ib1"
listen = "h:3"
[[broker]]
id = "s1"
listen = "h:4"
clients = "h:5"
[[link]]
up = "p1"
down = "ib1"
[[link]]
up = "ib1"
down = "s1"
`
	n, err := Parse([]byte(src), "net.toml")
	if err != nil {
		t.Fatal(err)
	}
	if got, want := n.Routes("b2"), []gd.Route{{Pubend: "P1", Up: "p1", Down: ids("s1")}}; !reflect.DeepEqual(got, want) {
		t.Errorf("Routes(b2) = %+v, want %+v", got, want)
	}
	if got, want := n.Routes("s1"), []gd.Route{{Pubend: "P1", Up: "ib1"}}; !reflect.DeepEqual(got, want) {
		t.Errorf("Routes(s1) = %+v, want %+v", got, want)
	}
	if got := n.Cells()["ib1"]; !reflect.DeepEqual(got, ids("b1", "b2")) {
		t.Errorf("Cells()[ib1] = %v", got)
	}
	if got := n.Peers("b1"); !reflect.DeepEqual(got, []string{"b2"}) {
		t.Errorf("Peers(b1) = %v", got)
	}
	for bad, want := range map[string]string{
		`clients = "h:6"`: `cell "ib1" has several brokers and cannot take clients`,
		// A cell whose brokers host pubends is a replicated PHB
		// (replicated_test.go), with its own rules.
		`pubends = ["P2"]`: `the members of replicated PHB cell "ib1" must list the same pubends: b1 lists [], b2 lists [P2]`,
	} {
		_, err = Parse([]byte(strings.Replace(src, `cell = "ib1"
listen = "h:3"`, `cell = "ib1"
listen = "h:3"
`+bad, 1)), "net.toml")
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("want error %q, got %v", want, err)
		}
	}
}

// gossipNet is a cell network with membership: every broker gossips, b2
// does not, and p1 and b1 are the seeds.
const gossipNet = `seeds = ["p1", "b1"]

[[broker]]
id = "p1"
listen = "127.0.0.1:7101"
clients = "127.0.0.1:7201"
data = "d/p1"
pubends = ["P1"]
gossip = "127.0.0.1:7301"

[[broker]]
id = "b1"
cell = "ib1"
listen = "127.0.0.1:7102"
gossip = "127.0.0.1:7302"

[[broker]]
id = "b2"
cell = "ib1"
listen = "127.0.0.1:7103"

[[broker]]
id = "s1"
listen = "127.0.0.1:7104"
clients = "127.0.0.1:7204"
gossip = "127.0.0.1:7304"

[[link]]
up = "p1"
down = "ib1"
[[link]]
up = "ib1"
down = "s1"
`

func TestGossipAndSeeds(t *testing.T) {
	n := mustParse(t, gossipNet)
	if !reflect.DeepEqual(n.Seeds, []string{"p1", "b1"}) {
		t.Errorf("Seeds = %q", n.Seeds)
	}
	if b, _ := n.Broker("b1"); b.Gossip != "127.0.0.1:7302" {
		t.Errorf("b1 gossip = %q", b.Gossip)
	}
	if b, _ := n.Broker("b2"); b.Gossip != "" {
		t.Errorf("b2 gossip = %q, want none", b.Gossip)
	}
	if got, want := n.SeedAddrs(), []string{"127.0.0.1:7301", "127.0.0.1:7302"}; !reflect.DeepEqual(got, want) {
		t.Errorf("SeedAddrs = %q, want %q", got, want)
	}
	// Without seeds, every broker with a gossip address is one.
	n.Seeds = nil
	if got, want := n.SeedAddrs(), []string{"127.0.0.1:7301", "127.0.0.1:7302", "127.0.0.1:7304"}; !reflect.DeepEqual(got, want) {
		t.Errorf("default SeedAddrs = %q, want %q", got, want)
	}
	// Round trip, with and without seeds.
	for _, seeds := range [][]string{nil, {"s1"}} {
		n.Seeds = seeds
		data, err := n.Marshal()
		if err != nil {
			t.Fatal(err)
		}
		if back := mustParse(t, string(data)); !reflect.DeepEqual(back, n) {
			t.Errorf("round trip:\n%+v\nwant\n%+v\n%s", back, n, data)
		}
	}
	// The design example (no gossip anywhere) has no seeds.
	if got := mustParse(t, designExample).SeedAddrs(); got != nil {
		t.Errorf("SeedAddrs without gossip = %q", got)
	}
}

func TestGossipErrors(t *testing.T) {
	for _, tc := range []struct {
		name, old, new string
		want           []string
	}{
		{"bad address", `gossip = "127.0.0.1:7302"`, `gossip = "127.0.0.1"`,
			[]string{`net.toml:15:1: broker "b1": gossip address "127.0.0.1": not host:port (missing port in address)`}},
		{"port zero", `gossip = "127.0.0.1:7302"`, `gossip = "127.0.0.1:0"`,
			[]string{`net.toml:15:1: broker "b1": gossip address "127.0.0.1:0": port 0: peers and clients need a fixed port`}},
		{"address taken", `gossip = "127.0.0.1:7302"`, `gossip = "127.0.0.1:7101"`,
			[]string{`net.toml:15:1: broker "b1": address "127.0.0.1:7101" is already used by broker "p1" (listen)`}},
		{"gossip not a string", `gossip = "127.0.0.1:7302"`, `gossip = 7302`,
			[]string{`net.toml:15:1: gossip must be a string, not an integer`}},
		{"unknown seed", `seeds = ["p1", "b1"]`, `seeds = ["p1", "bl"]`,
			[]string{`net.toml:1:1: seeds: unknown broker "bl" (did you mean "b1"?)`}},
		{"seed without gossip", `seeds = ["p1", "b1"]`, `seeds = ["p1", "b2"]`,
			[]string{`net.toml:1:1: seeds: broker "b2" has no gossip address, so nobody can join through it`}},
		{"seed twice", `seeds = ["p1", "b1"]`, `seeds = ["p1", "p1"]`,
			[]string{`net.toml:1:1: seeds: broker "p1" is listed twice`}},
		{"empty seeds", `seeds = ["p1", "b1"]`, `seeds = []`,
			[]string{`net.toml:1:1: seeds is empty: list the brokers to join the membership through, or leave seeds out to use every broker with a gossip address`}},
		{"seeds not strings", `seeds = ["p1", "b1"]`, `seeds = "p1"`,
			[]string{`net.toml:1:1: seeds must be an array of broker ids (strings), not a string`}},
		{"seeds inside a table", "seeds = [\"p1\", \"b1\"]\n", "",
			nil}, // placeholder replaced below
		{"unknown key near gossip", `gossip = "127.0.0.1:7302"`, `gosip = "127.0.0.1:7302"`,
			[]string{
				`net.toml:1:1: seeds: broker "b1" has no gossip address, so nobody can join through it`,
				`net.toml:15:1: unknown key "gosip" in [[broker]] (did you mean "gossip"?)`,
			}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			src := strings.Replace(gossipNet, tc.old, tc.new, 1)
			want := tc.want
			if tc.name == "seeds inside a table" {
				// A top-level key written after [[broker]] belongs to that table.
				src = strings.Replace(src, `gossip = "127.0.0.1:7304"`, `gossip = "127.0.0.1:7304"`+"\nseeds = [\"p1\"]", 1)
				want = []string{`net.toml:26:1: unknown key "seeds" in [[broker]] (seeds is a top-level key: put it before the first table)`}
			}
			_, err := Parse([]byte(src), "net.toml")
			if err == nil {
				t.Fatalf("no error for\n%s", src)
			}
			if !errors.Is(err, ErrInvalid) {
				t.Errorf("error does not wrap ErrInvalid: %v", err)
			}
			if got := strings.Split(err.Error(), "\n"); !reflect.DeepEqual(got, want) {
				t.Errorf("got:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
			}
		})
	}
}

// TestMaxRetainBytes: max_retain_bytes on a PHB is a size ("50GB") or a
// number of bytes, absent means no size bound, it survives Marshal, and
// anything else is refused with the format.
func TestMaxRetainBytes(t *testing.T) {
	n := mustParse(t, `[[broker]]
id = "p1"
listen = "h:1"
pubends = ["P1"]
max_retain_bytes = "50GB"

[[broker]]
id = "p2"
listen = "h:2"
pubends = ["P2"]
max_retain_bytes = 1048576

[[broker]]
id = "p3"
listen = "h:3"
pubends = ["P3"]
`)
	for id, want := range map[string]int64{"p1": 50e9, "p2": 1 << 20, "p3": 0} {
		if b, _ := n.Broker(id); b.MaxRetainBytes != want {
			t.Errorf("%s: MaxRetainBytes = %d, want %d", id, b.MaxRetainBytes, want)
		}
	}
	data, err := n.Marshal()
	if err != nil {
		t.Fatal(err)
	}
	if back, err := Parse(data, "m.toml"); err != nil || !reflect.DeepEqual(back, n) {
		t.Fatalf("round trip: %v\n%s", err, data)
	}
	_, err = Parse([]byte(`[[broker]]
id = "p1"
listen = "h:1"
pubends = ["P1"]
max_retain_bytes = "lots"

[[broker]]
id = "p2"
listen = "h:2"
pubends = ["P2"]
max_retain_bytes = 0

[[broker]]
id = "s1"
listen = "h:3"
max_retain_bytes = "1GB"
`), "net.toml")
	units := `must be a positive size such as "50GB" (units B, KB = 1000, KiB = 1024, MB, MiB, GB, GiB, TB, TiB)`
	want := []string{
		`net.toml:5:1: broker "p1": max_retain_bytes "lots" ` + units,
		`net.toml:11:1: broker "p2": max_retain_bytes 0 ` + units,
		`net.toml:16:1: broker "s1": max_retain_bytes applies to the pubends a broker hosts, and this one hosts none`,
	}
	if err == nil || err.Error() != strings.Join(want, "\n") {
		t.Fatalf("got\n%v\nwant\n%s", err, strings.Join(want, "\n"))
	}
}

// TestMaxRetain: max_retain on a PHB (docs/CONFIG.md; Gryphon DS, DSN 2003 §3)
// is a duration, "0s" never releases early, and absent means 168h.
func TestMaxRetain(t *testing.T) {
	n := mustParse(t, `[[broker]]
id = "p1"
listen = "h:1"
pubends = ["P1"]
max_retain = "36h"

[[broker]]
id = "p2"
listen = "h:2"
pubends = ["P2"]
max_retain = "0s"

[[broker]]
id = "p3"
listen = "h:3"
pubends = ["P3"]

[[broker]]
id = "p4"
listen = "h:4"
pubends = ["P4"]
max_retain = "5s"
`)
	for id, want := range map[string]time.Duration{"p1": 36 * time.Hour, "p2": 0, "p3": 168 * time.Hour, "p4": 5 * time.Second} {
		b, _ := n.Broker(id)
		if got := b.Retain(); got != want {
			t.Errorf("%s: Retain() = %v, want %v", id, got, want)
		}
	}
	data, err := n.Marshal()
	if err != nil {
		t.Fatal(err)
	}
	if back, err := Parse(data, "m.toml"); err != nil || !reflect.DeepEqual(back, n) {
		t.Fatalf("round trip: %v\n%s", err, data)
	}

	_, err = Parse([]byte(`[[broker]]
id = "p1"
listen = "h:1"
pubends = ["P1"]
max_retain = "a week"

[[broker]]
id = "p2"
listen = "h:2"
pubends = ["P2"]
max_retain = "-1h"

[[broker]]
id = "s1"
listen = "h:3"
max_retain = "1h"

[[broker]]
id = "p3"
listen = "h:4"
pubends = ["P3"]
max_retain = "4.5s"
`), "net.toml")
	want := []string{
		`net.toml:5:1: broker "p1": max_retain must be a duration such as "168h" ("0s": never release early), not a week`,
		`net.toml:11:1: broker "p2": max_retain -1h0m0s is negative ("0s" never releases early)`,
		`net.toml:16:1: broker "s1": max_retain applies to the pubends a broker hosts, and this one hosts none`,
		`net.toml:22:1: broker "p3": max_retain 4.5s is shorter than the links' heartbeat timeout (5s): it would release past downstream brokers that are merely slow; make it at least 5s ("0s" never releases early)`,
	}
	if err == nil || err.Error() != strings.Join(want, "\n") {
		t.Fatalf("got\n%v\nwant\n%s", err, strings.Join(want, "\n"))
	}
}

// TestCatchupWindow: catchup_window (events) and catchup_window_bytes (a
// size) set the durable subscriptions' catch-up window, absent means the
// defaults, they survive Marshal, and values a client could stall under or
// that would outgrow a connection's queue are refused with the bounds.
func TestCatchupWindow(t *testing.T) {
	if MinCatchupWindow != gd.MinCatchupWindowEvents || MinCatchupWindowBytes != gd.MinCatchupWindowBytes {
		t.Fatalf("config's least catch-up window %d, %d; the engine's %d, %d", MinCatchupWindow, MinCatchupWindowBytes, gd.MinCatchupWindowEvents, gd.MinCatchupWindowBytes)
	}
	n := mustParse(t, `[[broker]]
id = "s1"
listen = "h:1"
catchup_window = 2000
catchup_window_bytes = "2MiB"

[[broker]]
id = "s2"
listen = "h:2"
`)
	for id, want := range map[string][2]int64{"s1": {2000, 2 << 20}, "s2": {0, 0}} {
		if b, _ := n.Broker(id); int64(b.CatchupWindow) != want[0] || b.CatchupWindowBytes != want[1] {
			t.Errorf("%s: catch-up window %d events %d bytes, want %v", id, b.CatchupWindow, b.CatchupWindowBytes, want)
		}
	}
	data, err := n.Marshal()
	if err != nil {
		t.Fatal(err)
	}
	if back, err := Parse(data, "m.toml"); err != nil || !reflect.DeepEqual(back, n) {
		t.Fatalf("round trip: %v\n%s", err, data)
	}
	_, err = Parse([]byte(`[[broker]]
id = "s1"
listen = "h:1"
catchup_window = 10
catchup_window_bytes = "1KiB"

[[broker]]
id = "s2"
listen = "h:2"
catchup_window = "many"
catchup_window_bytes = "lots"
`), "net.toml")
	want := []string{
		`net.toml:4:1: broker "s1": catchup_window 10: want a number of events from 128 to 100000`,
		`net.toml:5:1: broker "s1": catchup_window_bytes "1KiB": want from 128KiB to 1GiB`,
		`net.toml:10:1: broker "s2": catchup_window "many": want a number of events from 128 to 100000`,
		`net.toml:11:1: broker "s2": catchup_window_bytes "lots" must be a positive size such as "50GB" (units B, KB = 1000, KiB = 1024, MB, MiB, GB, GiB, TB, TiB)`,
	}
	if err == nil || err.Error() != strings.Join(want, "\n") {
		t.Fatalf("got\n%v\nwant\n%s", err, strings.Join(want, "\n"))
	}
}

// TestRelayCacheBytes: relay_cache_bytes sets gd.Config.RelayCacheBytes,
// absent means the default, it survives Marshal, and sizes out of bounds
// or not sizes are refused with the bounds.
func TestRelayCacheBytes(t *testing.T) {
	n := mustParse(t, `[[broker]]
id = "s1"
listen = "h:1"
relay_cache_bytes = "8MiB"

[[broker]]
id = "s2"
listen = "h:2"
`)
	for id, want := range map[string]int64{"s1": 8 << 20, "s2": 0} {
		if b, _ := n.Broker(id); b.RelayCacheBytes != want {
			t.Errorf("%s: relay cache %d bytes, want %d", id, b.RelayCacheBytes, want)
		}
	}
	data, err := n.Marshal()
	if err != nil {
		t.Fatal(err)
	}
	if back, err := Parse(data, "m.toml"); err != nil || !reflect.DeepEqual(back, n) {
		t.Fatalf("round trip: %v\n%s", err, data)
	}
	_, err = Parse([]byte(`[[broker]]
id = "s1"
listen = "h:1"
relay_cache_bytes = "1KiB"

[[broker]]
id = "s2"
listen = "h:2"
relay_cache_bytes = "lots"
`), "net.toml")
	want := []string{
		`net.toml:4:1: broker "s1": relay_cache_bytes "1KiB": want from 64KiB to 1TiB`,
		`net.toml:9:1: broker "s2": relay_cache_bytes "lots" must be a positive size such as "50GB" (units B, KB = 1000, KiB = 1024, MB, MiB, GB, GiB, TB, TiB)`,
	}
	if err == nil || err.Error() != strings.Join(want, "\n") {
		t.Fatalf("got\n%v\nwant\n%s", err, strings.Join(want, "\n"))
	}
}

// TestDiskReserve: disk_reserve on a PHB is a size, "0" (or 0) for none,
// absent for the default; it survives Marshal; a bad size or a broker
// that hosts no pubend is refused.
func TestDiskReserve(t *testing.T) {
	n := mustParse(t, `[[broker]]
id = "p1"
listen = "h:1"
pubends = ["P1"]
disk_reserve = "1GiB"

[[broker]]
id = "p2"
listen = "h:2"
pubends = ["P2"]
disk_reserve = "0"

[[broker]]
id = "p3"
listen = "h:3"
pubends = ["P3"]
`)
	for id, want := range map[string]int64{"p1": 1 << 30, "p2": -1, "p3": 0} {
		if b, _ := n.Broker(id); b.DiskReserve != want {
			t.Errorf("%s: DiskReserve = %d, want %d", id, b.DiskReserve, want)
		}
	}
	data, err := n.Marshal()
	if err != nil {
		t.Fatal(err)
	}
	if back, err := Parse(data, "m.toml"); err != nil || !reflect.DeepEqual(back, n) {
		t.Fatalf("round trip: %v\n%s", err, data)
	}
	_, err = Parse([]byte(`[[broker]]
id = "p1"
listen = "h:1"
pubends = ["P1"]
disk_reserve = "lots"

[[broker]]
id = "s1"
listen = "h:3"
disk_reserve = "1GB"
`), "net.toml")
	for _, want := range []string{`disk_reserve "lots" must be a positive size`, `disk_reserve applies to the pubends a broker hosts`} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("error %v, want %q", err, want)
		}
	}
}

// TestMemoryBudget: the top-level memory_budget sets Network.MemoryBudget,
// absent means none, it survives Marshal, and sizes out of bounds or not
// sizes are refused with the bounds.
func TestMemoryBudget(t *testing.T) {
	n := mustParse(t, `memory_budget = "512MiB"

[[broker]]
id = "s1"
listen = "h:1"
`)
	if n.MemoryBudget != 512<<20 {
		t.Errorf("memory budget %d bytes, want %d", n.MemoryBudget, 512<<20)
	}
	data, err := n.Marshal()
	if err != nil {
		t.Fatal(err)
	}
	if back, err := Parse(data, "m.toml"); err != nil || !reflect.DeepEqual(back, n) {
		t.Fatalf("round trip: %v\n%s", err, data)
	}
	if n := mustParse(t, "[[broker]]\nid = \"s1\"\nlisten = \"h:1\"\n"); n.MemoryBudget != 0 {
		t.Errorf("absent: memory budget %d, want 0", n.MemoryBudget)
	}
	for raw, want := range map[string]string{
		`"1MiB"`: `net.toml:1:1: memory_budget "1MiB": want from 32MiB to 1TiB`,
		`"lots"`: `net.toml:1:1: memory_budget "lots" must be a positive size such as "50GB" (units B, KB = 1000, KiB = 1024, MB, MiB, GB, GiB, TB, TiB)`,
	} {
		_, err := Parse([]byte("memory_budget = "+raw+"\n\n[[broker]]\nid = \"s1\"\nlisten = \"h:1\"\n"), "net.toml")
		if err == nil || err.Error() != want {
			t.Errorf("memory_budget = %s: got\n%v\nwant\n%s", raw, err, want)
		}
	}
}
