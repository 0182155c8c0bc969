package main

import (
	"bufio"
	"bytes"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/aerie-mq/aerie/client"
)

// TestPubAndSubRefuseBadFlags: every bad value is refused with exit 2 and
// a message that names the value and the rule, before anything is sent
// (no broker listens at the default addresses of this test).
func TestPubAndSubRefuseBadFlags(t *testing.T) {
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"pub", "--topic", ""}, `bad topic "": empty`},
		{[]string{"pub", "--topic", "a..b"}, `bad topic "a..b": empty word at offset 2`},
		{[]string{"pub", "--topic", "orders.>"}, `bad topic "orders.>": wildcard ">"`},
		{[]string{"pub", "--topic", "a.*"}, `bad topic "a.*": wildcard "*"`},
		{[]string{"pub", "--count", "0"}, "--count 0: must be at least 1"},
		{[]string{"pub", "--count", "-3"}, "--count -3: must be at least 1"},
		{[]string{"pub", "--rate", "-5"}, "--rate -5: must be a finite number, 0 or more"},
		{[]string{"pub", "--rate", "NaN"}, "--rate NaN"},
		{[]string{"pub", "--size", "-1"}, "--size -1: must be from 0 to"},
		{[]string{"pub", "--size", "4194305"}, "--size 4194305: must be from 0 to 4194304"},
		{[]string{"pub", "--timeout", "-1s"}, "--timeout -1s: must be 0 or more"},
		{[]string{"pub", "--wait-for-broker", "-1s"}, "--wait-for-broker -1s: must be 0 or more"},
		{[]string{"pub", "--data", "x", "--file", "f"}, "give one of them"},
		{[]string{"pub", "--prop", "=3"}, `--prop "=3": want name=value`},
		{[]string{"pub", "orders.eu", "--connect", "127.0.0.1:1"}, `unexpected arguments "orders.eu" "--connect" "127.0.0.1:1"`},
		{[]string{"pub", "--count", "2", "orders.eu"}, "--topic orders.eu"},
		{[]string{"sub", "--topic", ""}, "empty pattern"},
		{[]string{"sub", "--topic", "a..b"}, `"a..b": empty word at offset 2`},
		{[]string{"sub", "--topic", "a.>.b"}, "'>' must be the last word"},
		{[]string{"sub", "--selector", "qty >"}, `--selector "qty >"`},
		{[]string{"sub", "--count", "-1"}, "--count -1: must be at least 0"},
		{[]string{"sub", "--timeout", "-5s"}, "--timeout -5s"},
		{[]string{"sub", "--from", "P1:3"}, "need --durable"},
		{[]string{"sub", "--group", "g", "--durable", "d"}, "--group and --durable"},
		{[]string{"sub", "--group", "g", "--from", "P1:3"}, "not for --group"},
		{[]string{"sub", "--group", "g", "--total-order"}, "not offered for groups"},
		{[]string{"sub", "--group", "a/b"}, `--group "a/b": no spaces or slashes`},
		{[]string{"sub", "orders.>"}, `unexpected argument "orders.>"`},
		{[]string{"pub", "--connect", ""}, `--connect "": no address`},
		{[]string{"sub", "--connect", " , "}, `--connect " , ": no address`},
		{[]string{"broker", "--id", "x", "extra"}, `unexpected argument "extra"`},
		{[]string{"version", "now"}, `unexpected argument "now"`},
	} {
		var out, errOut bytes.Buffer
		code := run(c.args, &out, &errOut)
		if code != 2 || !strings.Contains(errOut.String(), c.want) || strings.Contains(errOut.String(), "panic") {
			t.Errorf("aerie %q: exit %d, stderr %q; want exit 2 and %q", c.args, code, errOut.String(), c.want)
		}
	}
}

// TestPubFailsFastWhereNothingListens: an address that never answered is
// an error at once, naming the address and the operating system's reason,
// unless --wait-for-broker asks for patience (and then it says so).
func TestPubFailsFastWhereNothingListens(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close() // nothing listens there now
	for _, cmd := range []string{"pub", "sub"} {
		var out, errOut bytes.Buffer
		if code := run([]string{cmd, "--connect", addr}, &out, &errOut); code != 1 ||
			!strings.Contains(errOut.String(), addr) || !strings.Contains(errOut.String(), "connection refused") {
			t.Errorf("aerie %s --connect %s: exit %d, stderr %q; want exit 1 naming the address and the refusal", cmd, addr, code, errOut.String())
		}
	}
	var out, errOut bytes.Buffer
	if code := run([]string{"pub", "--connect", "127.0.0.1"}, &out, &errOut); code != 1 || !strings.Contains(errOut.String(), "missing port") {
		t.Errorf("a missing port: exit %d, stderr %q", code, errOut.String())
	}
	errOut.Reset()
	if code := run([]string{"pub", "--connect", addr, "--wait-for-broker", "200ms"}, &out, &errOut); code != 1 ||
		!strings.Contains(errOut.String(), "trying again for up to 200ms") || !strings.Contains(errOut.String(), "answered within 200ms") {
		t.Errorf("--wait-for-broker: exit %d, stderr %q; want it to say it retries, then that nothing answered", code, errOut.String())
	}
}

func TestPubPayloads(t *testing.T) {
	file := filepath.Join(t.TempDir(), "p")
	if err := os.WriteFile(file, []byte("from a file"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		args  []string
		stdin string
		want  string
	}{
		{nil, "", ""},
		{[]string{"--data", `{"id":42}`}, "", `{"id":42}`},
		{[]string{"--data", "-"}, "from stdin\n", "from stdin\n"},
		{[]string{"--file", file}, "", "from a file"},
		{[]string{"--size", "28"}, "", "abcdefghijklmnopqrstuvwxyzab"},
	} {
		o, code, ok := parsePub(c.args, &bytes.Buffer{})
		if !ok {
			t.Fatalf("%q: exit %d", c.args, code)
		}
		got, err := o.payload(strings.NewReader(c.stdin))
		if err != nil || string(got) != c.want {
			t.Errorf("%q: payload %q, %v; want %q", c.args, got, err, c.want)
		}
	}
	o, _, _ := parsePub([]string{"--file", filepath.Join(t.TempDir(), "missing")}, &bytes.Buffer{})
	if _, err := o.payload(nil); err == nil || !strings.Contains(err.Error(), "--file") {
		t.Errorf("a missing --file: %v", err)
	}
	big := filepath.Join(t.TempDir(), "big")
	if err := os.WriteFile(big, make([]byte, client.MaxEventBytes+1), 0o644); err != nil {
		t.Fatal(err)
	}
	o, _, _ = parsePub([]string{"--file", big}, &bytes.Buffer{})
	if _, err := o.payload(nil); err == nil || !strings.Contains(err.Error(), "limit") {
		t.Errorf("an oversized --file: %v", err)
	}
	o, _, _ = parsePub([]string{"--data", "-"}, &bytes.Buffer{})
	if _, err := o.payload(bytes.NewReader(make([]byte, client.MaxEventBytes+1))); err == nil || !strings.Contains(err.Error(), "limit") {
		t.Errorf("an oversized stdin payload: %v", err)
	}
}

func TestSubOutput(t *testing.T) {
	props, err := client.PropsOf(map[string]any{"qty": 3, "region": "EU", "note": "two words", "price": 9.5, "ok": true})
	if err != nil {
		t.Fatal(err)
	}
	ev := client.Event{Pubend: "P1", Tick: 7, Topic: "orders.eu", Props: props, Payload: []byte("<b>&"),
		PubTime: time.UnixMilli(1000), Checkpoint: "P1:7"}
	var buf bytes.Buffer
	w := bufio.NewWriter(&buf)
	writeEvent(w, ev, false)
	if want := `P1@7 orders.eu note="two words" ok=true price=9.5 qty=3 region=EU | <b>&` + "\n"; buf.String() != want {
		t.Errorf("plain output %q, want %q", buf.String(), want)
	}
	buf.Reset()
	ev.Payload = []byte{0, 1}
	writeEvent(w, ev, false)
	if !strings.HasSuffix(buf.String(), `| "\x00\x01"`+"\n") {
		t.Errorf("a binary payload is written %q, want it quoted", buf.String())
	}
	buf.Reset()
	ev.Payload, ev.Topic = []byte("a>b"), "x.y"
	writeEvent(w, ev, true)
	line := buf.String()
	for _, want := range []string{`"payload":"a>b"`, `"topic":"x.y"`, `"pubend":"P1"`, `"tick":7`, `"props":{`, `"pub_ms":1000`, `"recv_ms":`, `"token":"P1:7"`} {
		if !strings.Contains(line, want) {
			t.Errorf("json %s lacks %s", line, want)
		}
	}
	buf.Reset()
	ev.Checkpoint = ""
	writeEvent(w, ev, true)
	if strings.Contains(buf.String(), "token") {
		t.Errorf("a plain subscription's event carries a token: %s", buf.String())
	}
}

func TestHelpAndVersionForms(t *testing.T) {
	for _, args := range [][]string{{"help", "pub"}, {"pub", "-h"}} {
		var out, errOut bytes.Buffer
		if code := run(args, &out, &errOut); code != 0 || !strings.Contains(errOut.String(), "examples:") || !strings.Contains(errOut.String(), "-count") {
			t.Errorf("aerie %q: exit %d, output %q", args, code, errOut.String())
		}
	}
	var out, errOut bytes.Buffer
	if code := run([]string{"help", "nope"}, &out, &errOut); code != 2 || !strings.Contains(errOut.String(), `unknown command "nope"`) {
		t.Errorf("aerie help nope: exit %d, %q", code, errOut.String())
	}
	out.Reset()
	if code := run([]string{"--version"}, &out, &errOut); code != 0 || !strings.HasPrefix(out.String(), "aerie ") {
		t.Errorf("aerie --version: exit %d, %q %q", code, out.String(), errOut.String())
	}
}

// TestHelpDescribesAndShowsExamples: -h of every command of the registry
// (and of zap's two) says what the command does and shows two examples
// before its flags; no hidden flag is shown.
func TestHelpDescribesAndShowsExamples(t *testing.T) {
	cmds := [][]string{{"zap", "pub"}, {"zap", "view"}}
	for _, c := range commands() {
		if !c.hidden && c.name != "help" {
			cmds = append(cmds, []string{c.name})
		}
	}
	for _, cmd := range cmds {
		var out, errOut bytes.Buffer
		if code := run(append(cmd, "-h"), &out, &errOut); code != 0 {
			t.Errorf("aerie %s -h: exit %d", cmd, code)
		}
		h, name := errOut.String(), strings.Join(cmd, " ")
		ex := strings.Index(h, "\nexamples:\n")
		if !strings.HasPrefix(h, "usage: aerie "+name) || ex < 0 {
			t.Errorf("aerie %s -h lacks usage or examples:\n%s", name, h)
			continue
		}
		end := len(h)
		if flags := strings.Index(h, "\nflags:\n"); flags >= 0 {
			end = flags
		} else if c, _ := lookup(cmd[0]); c.name != "version" && c.name != "zap" && c.name != "passwd" {
			t.Errorf("aerie %s -h lists no flags", name)
		}
		if n := strings.Count(h[ex:end], "\n  "); n != 2 {
			t.Errorf("aerie %s -h shows %d examples, want 2", name, n)
		}
		if desc := h[strings.Index(h, "\n\n")+2 : ex]; len(desc) < 200 || strings.Contains(desc, "\n\n") {
			t.Errorf("aerie %s -h: description %q is not one paragraph", name, desc)
		}
		for _, hidden := range []string{"former name", "-cpuprofile string\n    \t\n", "-memprofile"} {
			if strings.Contains(h, hidden) {
				t.Errorf("aerie %s -h shows a hidden flag (%q)", name, hidden)
			}
		}
	}
}

// TestUsageListsTheRegistry: `aerie -h` lists every command of the
// registry but the hidden ones, under its group; `aerie help CMD` is
// `aerie CMD -h`, and a hidden command has no help.
func TestUsageListsTheRegistry(t *testing.T) {
	var out, errOut bytes.Buffer
	if code := run([]string{"-h"}, &out, &errOut); code != 0 {
		t.Fatalf("aerie -h: exit %d", code)
	}
	u := errOut.String()
	for _, c := range commands() {
		listed := strings.Contains(u, "\n  "+c.name+" ")
		if listed == c.hidden {
			t.Errorf("command %s (hidden %v) listed %v by aerie -h", c.name, c.hidden, listed)
		}
		if !c.hidden && !strings.Contains(u, "\n"+c.group+":\n") {
			t.Errorf("group %q of %s not in aerie -h", c.group, c.name)
		}
		if c.hidden || c.name == "help" {
			continue
		}
		var viaHelp, viaFlag bytes.Buffer
		run([]string{"help", c.name}, &out, &viaHelp)
		run([]string{c.name, "-h"}, &out, &viaFlag)
		if viaHelp.String() != viaFlag.String() {
			t.Errorf("aerie help %s differs from aerie %s -h", c.name, c.name)
		}
	}
	errOut.Reset()
	if code := run([]string{"help", "bench-child"}, &out, &errOut); code != 2 || !strings.Contains(errOut.String(), "unknown command") {
		t.Errorf("aerie help of a hidden command: exit %d, %q", code, errOut.String())
	}
	errOut.Reset()
	if code := run([]string{"nope"}, &out, &errOut); code != 2 || !strings.Contains(errOut.String(), `unknown command "nope"`) {
		t.Errorf("aerie nope: exit %d, %q", code, errOut.String())
	}
}

// TestFormerFlagNamesStillWork: a renamed flag keeps its former name.
func TestFormerFlagNamesStillWork(t *testing.T) {
	for _, c := range []struct{ cmd, old, name, value string }{
		{"sim", "nack-repetition-min", "nrt", "-1s"},
		{"bench", "fanout", "fanout-subs", "0"},
	} {
		var out, errOut bytes.Buffer
		if code := run([]string{c.cmd, "--" + c.old, c.value}, &out, &errOut); code != 2 || !strings.Contains(errOut.String(), "--"+c.name) {
			t.Errorf("aerie %s --%s %s: exit %d, %q; want it read as --%s", c.cmd, c.old, c.value, code, errOut.String(), c.name)
		}
	}
}

func TestOtherCommandsRefuseNonsensicalNumbers(t *testing.T) {
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"broker", "--config", "x.toml", "--id", "p1", "--gct", "-1s"}, "--gct -1s: must be 0 or more"},
		{[]string{"broker", "--config", "x.toml", "--id", "p1", "--gc-headroom-mb", "-5"}, "--gc-headroom-mb -5: must be at least 0"},
		{[]string{"dev", "--base-port", "-1"}, "--base-port -1: must be from 1 to"},
		{[]string{"dev", "--base-port", "65500"}, "--base-port 65500"},
		{[]string{"chaos", "--duration", "-1m"}, "--duration -1m0s: must be 0 or more"},
		{[]string{"zap", "view", "--top", "-1"}, "--top -1: must be at least 0"},
		{[]string{"zap", "pub", "--timeout", "-1s"}, "--timeout -1s: must be 0 or more"},
		{[]string{"zap", "view", "--wait-for-broker", "-1s"}, "--wait-for-broker -1s: must be 0 or more"},
		{[]string{"zap", "view", "--every", "0s"}, "--every 0s: must be more than 0"},
		{[]string{"zap", "view", "--connect", ","}, `--connect ",": no address`},
		{[]string{"zap", "pub", "--rate", "NaN"}, "--rate NaN: must be a finite number"},
		{[]string{"zap", "pub", "--count", "-1"}, "--count -1: must be at least 0"},
		{[]string{"zap", "pub", "--duration", "-1s"}, "--duration -1s: must be 0 or more"},
	} {
		var out, errOut bytes.Buffer
		if code := run(c.args, &out, &errOut); code != 2 || !strings.Contains(errOut.String(), c.want) {
			t.Errorf("aerie %q: exit %d, stderr %q; want exit 2 and %q", c.args, code, errOut.String(), c.want)
		}
	}
}

func TestSimAndBenchRefuseNonsensicalNumbers(t *testing.T) {
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"sim", "--seeds", "-1"}, "--seeds -1: must be at least 0"},
		{[]string{"sim", "--workers", "0"}, "--workers 0: must be at least 1"},
		{[]string{"sim", "--seed", "-5"}, "--seed -5: must be 0 or more"},
		{[]string{"sim", "--watch", "P1@x"}, `--watch "P1@x": want PUBEND@TICK`},
		{[]string{"sim", "--topology", "scale", "--brokers", "-1"}, "--brokers -1: must be at least 0"},
		{[]string{"sim", "--topology", "scale", "--brokers", "50", "--fanout", "-2"}, "--fanout -2: must be at least 0"},
		{[]string{"sim", "--topology", "scale", "--brokers", "50", "--rate", "-1"}, "--rate -1: must be a finite number"},
		{[]string{"sim", "--topology", "scale", "--brokers", "50", "--full-checks", "-1"}, "--full-checks -1"},
		{[]string{"bench", "--rates", "1000,-1"}, `--rates "1000,-1": want positive integers`},
		{[]string{"bench", "--fanout-subs", "0"}, `--fanout-subs "0": want positive integers`},
		{[]string{"bench", "--fanout", "0"}, `--fanout-subs "0": want positive integers`}, // its former name
		{[]string{"bench", "--matching", "2"}, `--matching "2": want fractions in (0, 1]`},
		{[]string{"bench", "--duration", "-1s"}, "--duration -1s: must be 0 or more"},
		{[]string{"bench", "--size", "-4"}, "--size -4: must be from 0"},
	} {
		var out, errOut bytes.Buffer
		if code := run(c.args, &out, &errOut); code != 2 || !strings.Contains(errOut.String(), c.want) {
			t.Errorf("aerie %q: exit %d, stderr %q; want exit 2 and %q", c.args, code, errOut.String(), c.want)
		}
	}
}

func TestSubDeleteNeedsDurable(t *testing.T) {
	var out, errOut bytes.Buffer
	if code := run([]string{"sub", "--delete"}, &out, &errOut); code != 2 || !strings.Contains(errOut.String(), "--delete need --durable") {
		t.Errorf("sub --delete without --durable: exit %d, %q", code, errOut.String())
	}
}

// TestPubReportsAnInterrupt: interrupted, pub's last line still starts
// "published N acked M" and says it was interrupted, and it exits 1.
func TestPubReportsAnInterrupt(t *testing.T) {
	o := pubOptions{count: 10}
	a := newAckReader(o.count, 0)
	a.sent.Store(4)
	a.acked.Store(3)
	a.last = client.Ack{Pubend: "P1", Tick: 9}
	a.errs = []error{client.ErrClosed}
	var out, errOut bytes.Buffer
	if code := o.report(a, true, time.Now(), &out, &errOut); code != 1 {
		t.Errorf("exit %d, want 1", code)
	}
	if want := "published 4 acked 3 (interrupted after 4 of 10; last acked pubend P1 tick 9)\n"; out.String() != want {
		t.Errorf("last line %q, want %q", out.String(), want)
	}
	if errOut.Len() != 0 {
		t.Errorf("the interrupt's own closing was reported: %q", errOut.String())
	}
}

// TestPubReportsRefusalsOnce: a run of the same refusal (a pubend whose
// disk is full refuses every publish) is one line with its count; other
// errors keep their own lines, in order.
func TestPubReportsRefusalsOnce(t *testing.T) {
	o := pubOptions{count: 5}
	a := newAckReader(o.count, 0)
	a.sent.Store(5)
	full := fmt.Errorf("%w: pubend P1 at broker p1: disk full (no space left on device)", client.ErrRejected)
	other := fmt.Errorf("%w: topic too long", client.ErrRejected)
	a.errs = []error{full, full, full, other, full}
	var out, errOut bytes.Buffer
	if code := o.report(a, false, time.Now(), &out, &errOut); code != 1 {
		t.Errorf("exit %d, want 1", code)
	}
	want := "aerie pub: " + full.Error() + " (3 publishes)\n" +
		"aerie pub: " + other.Error() + "\n" +
		"aerie pub: " + full.Error() + "\n"
	if errOut.String() != want {
		t.Errorf("stderr:\n%s\nwant:\n%s", errOut.String(), want)
	}
}
