package mqtt

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"log/slog"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/mochi-mqtt/server/v2/packets"

	"github.com/aerie-mq/aerie/internal/msg"
	"github.com/aerie-mq/aerie/internal/tick"
)

func sampleRetained() retainedFile {
	return retainedFile{
		token: msg.Token{"P1": 42, "P2": 1 << 40},
		msgs: []retainedMsg{
			{topic: "a/b", payload: []byte("on"), qos: 1, published: 1_767_225_600_123, props: msg.MustProps(map[string]any{
				"k": "v", "k2": "", expiryProperty: int64(60), correlationProperty: "\x00\xff", retainProperty: true})},
			{topic: "$dev/x", payload: []byte{0, 1, 2}, qos: 0},
			{topic: "/", payload: []byte("root"), qos: 2},
		},
	}
}

// sortedRetained is f with its messages in the file's order.
func sortedRetained(f retainedFile) retainedFile {
	g, err := decodeRetained(encodeRetained(f))
	if err != nil {
		panic(err)
	}
	return g
}

// TestRetainedFileRoundTrip: a store encodes and decodes back to itself
// (messages in topic order), empty stores included.
func TestRetainedFileRoundTrip(t *testing.T) {
	for _, f := range []retainedFile{sampleRetained(), {token: msg.Token{}}} {
		b := encodeRetained(f)
		g, err := decodeRetained(b)
		if err != nil {
			t.Fatalf("decoding an encoded store: %v", err)
		}
		if len(g.msgs) != len(f.msgs) || !sameRetained(g, sortedRetained(f)) {
			t.Fatalf("round trip: %+v, want %+v", g, f)
		}
		for i := 1; i < len(g.msgs); i++ {
			if g.msgs[i-1].topic >= g.msgs[i].topic {
				t.Fatalf("messages not in topic order: %q before %q", g.msgs[i-1].topic, g.msgs[i].topic)
			}
		}
		if !bytes.Equal(encodeRetained(g), b) {
			t.Fatal("encoding is not canonical")
		}
	}
}

// seal appends a valid checksum to body (header included).
func seal(body []byte) []byte {
	return binary.BigEndian.AppendUint32(body, crc32.Checksum(body, castagnoli))
}

// body builds a file body from fields: strings are length-prefixed,
// uint64s uvarints, bytes raw.
func body(fields ...any) []byte {
	b := []byte(retainedMagic + "\x01")
	for _, f := range fields {
		switch v := f.(type) {
		case string:
			b = appendString(b, v)
		case int:
			b = binary.AppendUvarint(b, uint64(v))
		case byte:
			b = append(b, v)
		}
	}
	return b
}

// body2 is body in version 2.
func body2(fields ...any) []byte {
	b := body(fields...)
	b[len(retainedMagic)] = 2
	return b
}

// TestRetainedFileVersion1: a store written by the previous version
// reads with its user properties as aerie properties, escaped as a
// PUBLISH's are (props.go), and no publish time; it is written back in
// version 2.
func TestRetainedFileVersion1(t *testing.T) {
	f, err := decodeRetained(seal(body(1, "P1", 9, 1, "a", "x", byte(1), 2, "k", "v", "mqtt_qos", "7")))
	if err != nil {
		t.Fatal(err)
	}
	want := msg.MustProps(map[string]any{"k": "v", "mqtt__qos": "7"})
	if len(f.msgs) != 1 || f.msgs[0].props.Encoded() != want.Encoded() || f.msgs[0].published != 0 || f.token["P1"] != 9 {
		t.Fatalf("version 1 file read as %+v, want properties %v", f, want)
	}
	if b := encodeRetained(f); b[len(retainedMagic)] != retainedVersion {
		t.Fatalf("written in version %d", b[len(retainedMagic)])
	}
	if user := mqttProps(f.msgs[0].props, nil).User; !slices.Equal(user, []packets.UserProperty{{Key: "k", Val: "v"}, {Key: "mqtt_qos", Val: "7"}}) {
		t.Fatalf("delivered with user properties %v", user)
	}
}

// TestRetainedFileRefusals: a damaged or malformed file is refused, with
// an error that says what is wrong; nothing is half-read.
func TestRetainedFileRefusals(t *testing.T) {
	good := encodeRetained(sampleRetained())
	flipped := bytes.Clone(good)
	flipped[len(flipped)/2] ^= 0x40
	for _, c := range []struct {
		name string
		b    []byte
		want string
	}{
		{"empty", nil, "header"},
		{"not ours", []byte("{\"topic\":\"a\"}\n....."), "header"},
		{"version", seal([]byte(retainedMagic + "\x03\x00\x00")), "version 3"},
		{"v2 properties", seal(body2(0, 1, "a", "x", byte(0), 2, "b", byte(4), "x", "a", byte(4), "y", 0)), "not after"},
		{"v2 property type", seal(body2(0, 1, "a", "x", byte(0), 1, "b", byte(9), 0)), "unknown type"},
		{"v2 publish time", seal(append(body2(0, 1, "a", "x", byte(0), 0), 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01)), "publish time"},
		{"v2 no publish time", seal(body2(0, 1, "a", "x", byte(0), 0)), "publish time"},
		{"bit flip", flipped, "checksum"},
		{"truncated", good[:len(good)-7], "checksum"},
		{"count too large", seal(body(0, 1000)), "1000 items"},
		{"string too long", seal(body(0, 1, 50, "x")), "more than"},
		{"topics unsorted", seal(body(0, 2, "b", "x", byte(0), 0, "a", "x", byte(0), 0)), "not after"},
		{"topic twice", seal(body(0, 2, "a", "x", byte(0), 0, "a", "y", byte(0), 0)), "not after"},
		{"empty payload", seal(body(0, 1, "a", "", byte(0), 0)), "empty payload"},
		{"QoS 3", seal(body(0, 1, "a", "x", byte(3), 0)), "QoS 3"},
		{"wildcard topic", seal(body(0, 1, "a/#", "x", byte(0), 0)), "wildcard"},
		{"empty topic", seal(body(0, 1, "", "x", byte(0), 0)), "topic"},
		{"pubends unsorted", seal(body(2, "P2", 1, "P1", 1, 0)), "ascending"},
		{"empty pubend", seal(body(1, "", 1, 0)), "ascending"},
		{"trailing bytes", seal(append(body(0, 0), 7)), "after the last message"},
		{"no QoS", seal(body(0, 1, "a", "x")), "QoS"},
	} {
		_, err := decodeRetained(c.b)
		if err == nil || !errors.Is(err, errRetainedFile) || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: error %v, want one saying %q", c.name, err, c.want)
		}
	}
}

// FuzzRetainedFile: the decoder never panics nor allocates beyond its
// input, and what it accepts encodes back to the same store. Each input
// is also tried with its checksum made valid, so that the fuzzer reaches
// the fields.
func FuzzRetainedFile(f *testing.F) {
	f.Add(encodeRetained(sampleRetained()))
	f.Add(encodeRetained(retainedFile{}))
	f.Add(seal(body(1, "P1", 9, 1, "a", "x", byte(1), 1, "k", "v")))
	f.Add(seal(body2(1, "P1", 9, 1, "a", "x", byte(1), 1, "k", byte(4), "v", 1_767_225_600_123)))
	f.Add([]byte(retainedMagic))
	f.Fuzz(func(t *testing.T, b []byte) {
		inputs := [][]byte{b}
		if len(b) >= len(retainedMagic)+1+4 {
			inputs = append(inputs, seal(bytes.Clone(b[:len(b)-4])))
		}
		for _, in := range inputs {
			got, err := decodeRetained(in)
			if err != nil {
				if !errors.Is(err, errRetainedFile) {
					t.Fatalf("error %v does not wrap errRetainedFile", err)
				}
				continue
			}
			again, err := decodeRetained(encodeRetained(got))
			if err != nil || !sameRetained(got, again) {
				t.Fatalf("accepted %x, but its encoding decodes to %+v, %v", in, again, err)
			}
		}
	})
}

// retainedServer starts a server with a retained file at path and its
// watch, logging to a buffer. The probe, answered as in force at the
// pubends of routed, gives way to the durable watch, which must ask from
// wantFrom; it returns once the watch has asked.
func retainedServer(t *testing.T, path string, routed, wantFrom msg.Token) (*Server, *fakeHost, *syncBuffer) {
	t.Helper()
	logs := &syncBuffer{}
	s, h := startFakeOpts(t, func(o *Options) {
		o.RetainedNetwork, o.RetainedFile = true, path
		o.Logger = slog.New(slog.NewTextHandler(logs, nil))
	}, "P1")
	r := h.request(t)
	if sub, ok := r.m.(msg.Subscribe); !ok || sub.Sub != probeName || sub.Durable || sub.Selector != watchSelector {
		t.Fatalf("the watch asked %+v first, want its probe", r.m)
	}
	h.conn(s.watchID).Send(msg.SubStarted{Sub: probeName, Token: routed})
	d := retainedEv(t, "P1", 1000, "probe/sees", "this")
	d.Sub = probeName
	h.conn(s.watchID).Send(d) // not the watch's: ignored
	if r := h.request(t); r.m != (msg.Unsubscribe{Sub: probeName}) {
		t.Fatalf("after the probe started the watch asked %+v, want the probe ended", r.m)
	}
	r = h.request(t)
	sub, ok := r.m.(msg.Subscribe)
	if !ok || sub.Sub != watchName || !sub.Durable || sub.Selector != watchSelector || !maps.Equal(sub.From, wantFrom) {
		t.Fatalf("the watch asked %+v, want a durable subscription from %v", r.m, wantFrom)
	}
	if len(storeOf(s)["probe/sees"]) > 0 {
		t.Fatal("the probe's delivery entered the store")
	}
	return s, h, logs
}

type syncBuffer struct {
	mu    sync.Mutex
	b     bytes.Buffer
	wrote chan struct{} // cap 1, signalled at each write
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.wrote == nil {
		s.wrote = make(chan struct{}, 1)
	}
	signal(s.wrote)
	return s.b.Write(p)
}

// await waits until the log holds text.
func (s *syncBuffer) await(t *testing.T, text string) {
	t.Helper()
	s.mu.Lock()
	if s.wrote == nil {
		s.wrote = make(chan struct{}, 1)
	}
	wrote := s.wrote
	s.mu.Unlock()
	timeout := time.After(10 * time.Second)
	for !strings.Contains(s.String(), text) {
		select {
		case <-wrote:
		case <-timeout:
			t.Fatalf("the log never said %q:\n%s", text, s.String())
		}
	}
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// retainedEv is a retained event of pubend at tk on MQTT topic.
func retainedEv(t *testing.T, pubend msg.PubendID, tk tick.Tick, topic, payload string) msg.Delivery {
	t.Helper()
	at, err := Topic(topic)
	if err != nil {
		t.Fatal(err)
	}
	props := msg.MustProps(map[string]any{retainProperty: true, qosProperty: int64(1)})
	return msg.Delivery{Sub: watchName, Event: msg.NewEvent(pubend, tk, "p", uint64(tk), at, props, []byte(payload))}
}

// subAck waits for the watch's next checkpoint.
func subAck(t *testing.T, h *fakeHost) msg.SubAck {
	t.Helper()
	for {
		r := h.request(t)
		if a, ok := r.m.(msg.SubAck); ok {
			if a.Sub != watchName {
				t.Fatalf("checkpoint of %q", a.Sub)
			}
			return a
		}
	}
}

func readRetained(t *testing.T, path string) retainedFile {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	f, err := decodeRetained(b)
	if err != nil {
		t.Fatal(err)
	}
	return f
}

func storeOf(s *Server) map[string]string {
	out := map[string]string{}
	for _, r := range s.retained.matching("#", time.Now().UnixMilli()) {
		out[r.topic] = string(r.payload)
	}
	for _, r := range s.retained.matching("$dev/#", time.Now().UnixMilli()) {
		out[r.topic] = string(r.payload)
	}
	return out
}

func sameStore(a, b map[string]string) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if w, ok := b[k]; !ok || w != v {
			return false
		}
	}
	return true
}

// TestRetainedFileBeforeCheckpoint: the watch's checkpoint is told to the
// broker only once the file holds everything it covers — read at the
// moment the SubAck arrives, the file has every message delivered up to
// its token, and a token at least as high.
func TestRetainedFileBeforeCheckpoint(t *testing.T) {
	path := filepath.Join(t.TempDir(), "mqtt-retained")
	s, h, _ := retainedServer(t, path, msg.Token{"P1": 7}, msg.Token{"P1": 0})
	w := h.conn(s.watchID)
	want := map[string]string{}
	for i := range 50 {
		topic := "t/" + string(rune('a'+i%26)) + "/" + string(rune('0'+i/26))
		w.Send(retainedEv(t, "P1", tick.Tick(10+i), topic, "v"+topic))
		want[topic] = "v" + topic
	}
	w.Send(retainedEv(t, "P1", 100, "t/a/0", "")) // cleared
	delete(want, "t/a/0")
	for {
		a := subAck(t, h)
		f := readRetained(t, path) // the SubAck is out: the file must cover it
		if f.token["P1"] < a.Token["P1"] {
			t.Fatalf("checkpoint %v told with the file at %v", a.Token, f.token)
		}
		got := map[string]string{}
		for _, r := range f.msgs {
			got[r.topic] = string(r.payload)
		}
		if a.Token["P1"] == 100 {
			if !sameStore(got, want) {
				t.Fatalf("the file at checkpoint 100 holds %v, want %v", got, want)
			}
			break
		}
	}
	// Progress alone moves the checkpoint, the file unchanged.
	w.Send(msg.Progress{Sub: watchName, Token: msg.Token{"P1": 200}})
	if a := subAck(t, h); a.Token["P1"] != 200 {
		t.Fatalf("checkpoint %v after progress to 200", a.Token)
	}
}

// TestRetainedFileRestart: a restarted server reads its store from the
// file, its watch resumes from its checkpoint (no From: the broker's),
// and the catch-up's deliveries the file already holds (at or below its
// token) do not take the store back to older values; later ones apply.
func TestRetainedFileRestart(t *testing.T) {
	path := filepath.Join(t.TempDir(), "mqtt-retained")
	s, h, _ := retainedServer(t, path, msg.Token{"P1": 7, "P2": 3}, msg.Token{"P1": 0, "P2": 0})
	w := h.conn(s.watchID)
	w.Send(retainedEv(t, "P1", 10, "x", "old"))
	w.Send(retainedEv(t, "P1", 20, "x", "new"))
	w.Send(retainedEv(t, "P1", 30, "y", "gone"))
	w.Send(retainedEv(t, "P1", 40, "y", ""))
	w.Send(retainedEv(t, "P2", 5, "$dev/z", "z"))
	for a := subAck(t, h); a.Token["P1"] < 40 || a.Token["P2"] < 5; a = subAck(t, h) {
	}
	// Close writes the file a last time; a kill -9 leaves it as of the
	// last checkpoint told, which the broker then resumes from (at most).
	s.Close()

	// It resumes from the file's token; a pubend routed since, from the
	// start of its log; one no longer routed keeps its position.
	s2, h2, _ := retainedServer(t, path, msg.Token{"P1": 60, "P3": 4}, msg.Token{"P1": 40, "P2": 5, "P3": 0})
	if got := storeOf(s2); !sameStore(got, map[string]string{"x": "new", "$dev/z": "z"}) {
		t.Fatalf("restored store %v", got)
	}
	w2 := h2.conn(s2.watchID)
	// A catch-up that repeats what the file holds changes nothing.
	w2.Send(retainedEv(t, "P1", 10, "x", "old"))
	w2.Send(retainedEv(t, "P1", 30, "y", "gone"))
	w2.Send(retainedEv(t, "P2", 5, "$dev/z", "z"))
	if got := storeOf(s2); !sameStore(got, map[string]string{"x": "new", "$dev/z": "z"}) {
		t.Fatalf("after the repeated catch-up the store is %v, want it unchanged", got)
	}
	w2.Send(retainedEv(t, "P1", 41, "x", "newer")) // retained while the server was down
	w2.Send(retainedEv(t, "P2", 6, "y", "back"))
	if got := storeOf(s2); !sameStore(got, map[string]string{"x": "newer", "y": "back", "$dev/z": "z"}) {
		t.Fatalf("after the catch-up the store is %v", got)
	}
	// A new subscriber gets them.
	got := subscribeRetained(t, s2, h2, "after", "#", 0, 2)
	if got[0].TopicName != "x" || string(got[0].Payload) != "newer" || got[1].TopicName != "y" || string(got[1].Payload) != "back" {
		t.Fatalf("a new subscriber got %s=%q, %s=%q", got[0].TopicName, got[0].Payload, got[1].TopicName, got[1].Payload)
	}
}

// TestRetainedFileCorrupt: a damaged file is logged with its path and
// why, set aside (kept for inspection), and the store rebuilt: the watch
// asks from the start of every pubend's log. A missing file does the same
// (a first start).
func TestRetainedFileCorrupt(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "mqtt-retained")
	b := encodeRetained(sampleRetained())
	b[len(b)/2] ^= 1
	if err := os.WriteFile(path, b, 0o644); err != nil {
		t.Fatal(err)
	}
	s, _, logs := retainedServer(t, path, msg.Token{"P1": 50, "P2": 7}, msg.Token{"P1": 0, "P2": 0})
	if l := logs.String(); !strings.Contains(l, "level=ERROR") || !strings.Contains(l, "unreadable") || !strings.Contains(l, path) || !strings.Contains(l, "checksum") {
		t.Fatalf("the log does not say the file was unreadable, where, and why:\n%s", l)
	}
	if aside, err := os.ReadFile(path + ".corrupt"); err != nil || !bytes.Equal(aside, b) {
		t.Fatalf("the damaged file was not set aside as it was: %v", err)
	}
	if len(storeOf(s)) != 0 {
		t.Fatalf("a store from a damaged file: %v", storeOf(s))
	}
	retainedServer(t, filepath.Join(dir, "first"), msg.Token{"P1": 50}, msg.Token{"P1": 0})
}

// TestRetainedFileUnwritable: a write that fails is logged and tried
// again; the checkpoint waits for it, and is told once the file holds
// what it covers.
func TestRetainedFileUnwritable(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "not-yet")
	path := filepath.Join(dir, "mqtt-retained")
	s, h, logs := retainedServer(t, path, msg.Token{"P1": 1}, msg.Token{"P1": 0})
	h.conn(s.watchID).Send(retainedEv(t, "P1", 5, "a", "A"))
	logs.await(t, "MQTT retained store not written")
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	a := subAck(t, h)
	if f := readRetained(t, path); a.Token["P1"] != 5 || f.token["P1"] != 5 || len(f.msgs) != 1 {
		t.Fatalf("checkpoint %v with the file at %v holding %d messages, want both at 5 with the one", a.Token, f.token, len(f.msgs))
	}
}

// TestRetainedNoFile: without a file (a broker without data) the watch
// is a plain subscription and nothing is written.
func TestRetainedNoFile(t *testing.T) {
	s, h := startFakeOpts(t, func(o *Options) { o.RetainedNetwork = true }, "P1")
	r := h.request(t)
	if sub := r.m.(msg.Subscribe); sub.Durable || sub.Sub != watchName {
		t.Fatalf("the watch without a file asked %+v, want a plain subscription", sub)
	}
	h.conn(s.watchID).Send(retainedEv(t, "P1", 3, "a", "A"))
	if got := storeOf(s); got["a"] != "A" {
		t.Fatalf("store %v", got)
	}
}

// BenchmarkRetainedWrite: one write of the whole store (encode, write,
// fsync, rename, directory fsync), as keepRetained does after a change,
// for stores of n retained messages of 64 bytes.
func BenchmarkRetainedWrite(b *testing.B) {
	for _, n := range []int{1000, 10000, 100000} {
		b.Run(fmt.Sprint(n), func(b *testing.B) {
			f := retainedFile{token: msg.Token{"P1": 1 << 50, "P2": 1 << 50}}
			for i := range n {
				f.msgs = append(f.msgs, retainedMsg{topic: fmt.Sprintf("site/%d/sensor/%d", i/100, i%100),
					payload: bytes.Repeat([]byte{'x'}, 64), qos: 1})
			}
			path := filepath.Join(b.TempDir(), "mqtt-retained")
			var size int
			b.ResetTimer()
			for b.Loop() {
				buf := encodeRetained(f)
				size = len(buf)
				if err := writeSynced(path, buf); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(size), "file-bytes")
		})
	}
}
