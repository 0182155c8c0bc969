package mqtt

import (
	"bytes"
	"encoding/binary"
	"errors"
	"log/slog"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/mochi-mqtt/server/v2/packets"

	"github.com/aerie-mq/aerie/internal/mqtt/mqtttest"
	"github.com/aerie-mq/aerie/internal/msg"
	"github.com/aerie-mq/aerie/internal/shell"
	"github.com/aerie-mq/aerie/internal/tick"
)

func sampleSession() sessionFile {
	return sessionFile{clientID: "dev/1", publisher: "mqtt:dev/1@b.1.1", limit: 2048,
		in:       map[uint16]uint64{1: 7, 300: 2048, 65535: 1},
		sums:     map[uint16]uint64{1: 0xfeed, 65535: 1},
		released: []releasedID{{pid: 9, seq: 6, sum: 0xabc}, {pid: 2, seq: 8, sum: 1}},
		out: map[deliveryKey]outRec{
			{"mqtt:dev%2F1:2:0:a", "P1", 10}: {pid: 4, state: outReceived},
			{"mqtt:dev%2F1:2:0:a", "P1", 20}: {pid: 4, state: outDone},
			{"mqtt:dev%2F1:2:0:a", "P2", 5}:  {pid: 5, state: outSent},
			{"mqtt:dev%2F1:2:1:a", "P1", 1}:  {pid: 65535, state: outDone},
		}}
}

func sameSession(a, b sessionFile) bool {
	return a.clientID == b.clientID && a.publisher == b.publisher && a.limit == b.limit && maps.Equal(a.in, b.in) &&
		maps.Equal(a.sums, b.sums) && slices.Equal(a.released, b.released) && maps.Equal(a.out, b.out)
}

// sessionBody builds a version 1 session file body from fields: strings
// are length-prefixed, ints uvarints.
func sessionBody(fields ...any) []byte {
	return sessionBodyV(sessionVersion1, fields...)
}

// sessionBodyV is sessionBody for version v; a digest field is 8 bytes.
func sessionBodyV(v byte, fields ...any) []byte {
	b := append([]byte(sessionMagic), v)
	for _, f := range fields {
		switch v := f.(type) {
		case string:
			b = appendString(b, v)
		case int:
			b = binary.AppendUvarint(b, uint64(v))
		case digest:
			b = binary.BigEndian.AppendUint64(b, uint64(v))
		}
	}
	return b
}

// digest is an 8-byte field of sessionBodyV.
type digest uint64

// TestSessionFileRoundTrip: a session encodes and decodes back to itself;
// every damaged or inconsistent file is refused with errSessionFile.
func TestSessionFileRoundTrip(t *testing.T) {
	for _, f := range []sessionFile{sampleSession(), {clientID: "", publisher: "p", in: map[uint16]uint64{}, out: map[deliveryKey]outRec{}}} {
		g, err := decodeSession(encodeSession(f))
		if err != nil || !sameSession(f, g) {
			t.Fatalf("round trip of %+v: %+v, %v", f, g, err)
		}
	}
	good := encodeSession(sampleSession())
	flipped := bytes.Clone(good)
	flipped[len(sessionMagic)+3] ^= 1
	for name, b := range map[string][]byte{
		"empty":          nil,
		"retained file":  encodeRetained(sampleRetained()),
		"version 3":      append([]byte(sessionMagic+"\x03"), good[len(sessionMagic)+1:]...),
		"flipped bit":    flipped,
		"truncated":      good[:len(good)-5],
		"no publisher":   seal(sessionBody("c", "", 10, 0)),
		"pid 0":          seal(sessionBody("c", "p", 10, 1, 0, 1)),
		"pid too large":  seal(sessionBody("c", "p", 10, 1, 65536, 1)),
		"pids unordered": seal(sessionBody("c", "p", 10, 2, 5, 1, 4, 2)),
		"seq 0":          seal(sessionBody("c", "p", 10, 1, 5, 0)),
		"seq past bound": seal(sessionBody("c", "p", 10, 1, 5, 11)),
		"huge count":     seal(sessionBody("c", "p", 10, 1<<40)),
		"trailing bytes": seal(append(sessionBody("c", "p", 10, 0, 0), 0)),
		"no sub":         seal(append(sessionBody("c", "p", 10, 0, 1, "", "P1", 3, 1), 0)),
		"ticks unsorted": seal(append(append(sessionBody("c", "p", 10, 0, 2, "s", "P1", 3, 1), 0), append(sessionBody("s", "P1", 3, 2)[len(sessionMagic)+1:], 0)...)),
		"delivery pid 0": seal(append(sessionBody("c", "p", 10, 0, 1, "s", "P1", 3, 0), 0)),
		"state 3":        seal(append(sessionBody("c", "p", 10, 0, 1, "s", "P1", 3, 1), 3)),
		"v2 no released": seal(sessionBodyV(2, "c", "p", 10, 1, 5, 3, digest(1))),
		"v2 digest cut":  seal(sessionBodyV(2, "c", "p", 10, 1, 5, 3, 0, 0, 0, 0, 0)),
		"released 0":     seal(append(sessionBodyV(2, "c", "p", 10, 0, 1, 0, 3, digest(1)), 0)),
		"released twice": seal(append(sessionBodyV(2, "c", "p", 10, 0, 2, 4, 3, digest(1), 4, 2, digest(1)), 0)),
		"released held":  seal(append(sessionBodyV(2, "c", "p", 10, 1, 4, 3, digest(1), 1, 4, 2, digest(1)), 0)),
		"released seq":   seal(append(sessionBodyV(2, "c", "p", 10, 0, 1, 4, 11, digest(1)), 0)),
		"released sum 0": seal(append(sessionBodyV(2, "c", "p", 10, 0, 1, 4, 3, digest(0)), 0)),
		"pid held twice": seal(append(append(sessionBody("c", "p", 10, 0, 2, "s", "P1", 3, 1), 1), append(sessionBody("s", "P1", 4, 1)[len(sessionMagic)+1:], 0)...)),
	} {
		if _, err := decodeSession(b); !errors.Is(err, errSessionFile) {
			t.Errorf("%s: %v, want errSessionFile", name, err)
		}
	}
}

func FuzzSessionFile(f *testing.F) {
	f.Add(encodeSession(sampleSession()))
	f.Add(seal(sessionBody("c", "p", 10, 1, 5, 3, 0)))
	f.Add(seal(append(sessionBodyV(2, "c", "p", 10, 1, 5, 3, digest(7), 1, 4, 2, digest(1)), 0)))
	f.Add(seal(append(sessionBody("c", "p", 10, 0, 1, "s", "P1", 3, 1), 1)))
	f.Add([]byte(sessionMagic))
	f.Fuzz(func(t *testing.T, b []byte) {
		inputs := [][]byte{b}
		if len(b) >= len(sessionMagic)+1+4 {
			inputs = append(inputs, seal(bytes.Clone(b[:len(b)-4])))
		}
		for _, in := range inputs {
			got, err := decodeSession(in)
			if err != nil {
				if !errors.Is(err, errSessionFile) {
					t.Fatalf("error %v does not wrap errSessionFile", err)
				}
				continue
			}
			again, err := decodeSession(encodeSession(got))
			if err != nil || !sameSession(got, again) {
				t.Fatalf("accepted %x, but its encoding decodes to %+v, %v", in, again, err)
			}
		}
	})
}

// persistentV5 makes a CONNECT an MQTT 5 persistent session's.
func persistentV5(pk *packets.Packet) {
	pk.Connect.Clean = false
	pk.Properties.SessionExpiryInterval, pk.Properties.SessionExpiryIntervalFlag = 3600, true
}

// sessionServer starts a server keeping sessions in dir, as run inc of
// its broker, logging to the buffer it returns.
func sessionServer(t *testing.T, dir string, inc uint64) (*Server, *fakeHost, *syncBuffer) {
	t.Helper()
	logs := &syncBuffer{}
	s, h := startFakeOpts(t, func(o *Options) {
		o.SessionDir, o.Incarnation = dir, inc
		o.Logger = slog.New(slog.NewTextHandler(logs, nil))
	}, "P1")
	return s, h, logs
}

// readSession reads client id's file in dir.
func readSession(t *testing.T, dir, id string) sessionFile {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(dir, sessionFileName(id)))
	if err != nil {
		t.Fatal(err)
	}
	f, err := decodeSession(b)
	if err != nil {
		t.Fatal(err)
	}
	return f
}

func publishQoS(t *testing.T, c *mqtttest.Client, qos byte, pid uint16, dup bool, payload string) {
	t.Helper()
	pk := packets.Packet{FixedHeader: packets.FixedHeader{Type: packets.Publish, Qos: qos, Dup: dup}, PacketID: pid,
		TopicName: "q/2", Payload: []byte(payload)}
	if err := c.Write(pk); err != nil {
		t.Fatal(err)
	}
}

// TestQoS2SessionFile: in a persistent session at a broker with a session
// directory, a QoS 2 packet id is in the session's file when its publish
// reaches aerie (so before its PUBREC), and leaves it before its PUBCOMP.
// A broker started again from the directory (a new run: a crash loses
// nothing the file has) takes the session's resent PUBLISH as the same
// aerie publish, answers its PUBREL with PUBCOMP, takes a released packet
// id as a new message, and never reuses a sequence number.
func TestQoS2SessionFile(t *testing.T) {
	dir := t.TempDir()
	s, h, _ := sessionServer(t, dir, 1)
	atRequest := make(chan sessionFile, 10) // the file as each publish reached aerie
	h.mu.Lock()
	h.onRequest = func(m msg.Msg) {
		if _, ok := m.(msg.Publish); ok {
			b, _ := os.ReadFile(filepath.Join(dir, sessionFileName("dev/1")))
			f, _ := decodeSession(b) // none yet: empty
			atRequest <- f
		}
	}
	h.mu.Unlock()
	c, err := mqtttest.Dial(s.Addr(), "dev/1", 5, persistentV5)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	pubs := map[uint16]msg.Publish{}
	for _, pid := range []uint16{7, 9, 8} {
		publishQoS(t, c, 2, pid, false, "m")
		p := h.request(t).m.(msg.Publish)
		if f := <-atRequest; f.in[pid] != p.Seq || f.publisher != p.Publisher || f.limit < p.Seq {
			t.Fatalf("packet id %d reached aerie as %s #%d, the file then held %+v", pid, p.Publisher, p.Seq, f)
		}
		pubs[pid] = p
	}
	for _, pid := range []uint16{7, 9} { // 8 never acknowledged: the crash takes its PUBREC
		h.conn(1).Send(msg.PubAck{Publisher: pubs[pid].Publisher, Seq: pubs[pid].Seq})
	}
	expect(t, c, packets.Pubrec, 7, 0)
	expect(t, c, packets.Pubrec, 9, 0)
	if err := c.Send(packets.Pubrel, 9); err != nil {
		t.Fatal(err)
	}
	expect(t, c, packets.Pubcomp, 9, 0)
	publishQoS(t, c, 1, 10, false, "q1")
	q1 := h.request(t).m.(msg.Publish)
	if f := <-atRequest; f.limit < q1.Seq {
		t.Fatalf("QoS 1 publish #%d reached aerie with the file's bound at %d", q1.Seq, f.limit)
	}
	if f := readSession(t, dir, "dev/1"); len(f.in) != 2 || f.in[7] == 0 || f.in[8] == 0 {
		t.Fatalf("after PUBCOMP 9 the file holds %v, want 7 and 8", f.in)
	}

	// The broker's next run, from the same directory.
	c.Close()
	s2, h2, _ := sessionServer(t, dir, 2)
	c2, err := mqtttest.Dial(s2.Addr(), "dev/1", 5, persistentV5)
	if err != nil {
		t.Fatal(err)
	}
	defer c2.Close()
	publishQoS(t, c2, 2, 8, true, "m")
	if p := h2.request(t).m.(msg.Publish); p.Publisher != pubs[8].Publisher || p.Seq != pubs[8].Seq {
		t.Fatalf("PUBLISH 8 resent after the restart is %s #%d, want %s #%d", p.Publisher, p.Seq, pubs[8].Publisher, pubs[8].Seq)
	}
	h2.conn(1).Send(msg.PubAck{Publisher: pubs[8].Publisher, Seq: pubs[8].Seq, Duplicate: true})
	expect(t, c2, packets.Pubrec, 8, 0)
	if err := c2.Send(packets.Pubrel, 7); err != nil {
		t.Fatal(err)
	}
	expect(t, c2, packets.Pubcomp, 7, 0) // known: not 0x92
	publishQoS(t, c2, 2, 9, false, "new")
	p9 := h2.request(t).m.(msg.Publish)
	if p9.Publisher != pubs[9].Publisher || p9.Seq <= q1.Seq {
		t.Fatalf("a new PUBLISH 9 after the restart is %s #%d: want %s above #%d", p9.Publisher, p9.Seq, pubs[9].Publisher, q1.Seq)
	}
	publishQoS(t, c2, 1, 11, false, "q1")
	if p := h2.request(t).m.(msg.Publish); p.Seq <= p9.Seq {
		t.Fatalf("QoS 1 publish after the restart has #%d, not above #%d", p.Seq, p9.Seq)
	}

	// A client id too long for a file name has a file all the same.
	long := strings.Repeat("/", 300)
	cl, err := mqtttest.Dial(s2.Addr(), long, 5, persistentV5)
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	publishQoS(t, cl, 2, 1, false, "m")
	if p := h2.request(t).m.(msg.Publish); readSession(t, dir, long).in[1] != p.Seq {
		t.Fatalf("publish #%d of a long client id, not in its file", p.Seq)
	}

	// A clean start ends the session: its file goes.
	c2.Close()
	down(t, h2)
	dial(t, s2, "dev/1", 5)
	if _, err := os.Stat(filepath.Join(dir, sessionFileName("dev/1"))); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("file after a clean start: %v", err)
	}
}

// TestQoS2SessionFileBad: a damaged session file is logged and set aside,
// and its client's session goes on as a new publisher; a file that cannot
// be written ends the connection before its publish reaches aerie, and
// the PUBLISH resent on the next connection, once the file can be
// written, is published.
func TestQoS2SessionFileBad(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, sessionFileName("bad"))
	if err := os.WriteFile(path, []byte("AERIESES\x01garbage!"), 0o644); err != nil {
		t.Fatal(err)
	}
	s, h, logs := sessionServer(t, dir, 1)
	if !strings.Contains(logs.String(), "MQTT session file unreadable") {
		t.Fatalf("no error logged for the damaged file: %s", logs.String())
	}
	if _, err := os.Stat(path + ".corrupt"); err != nil {
		t.Fatalf("damaged file not set aside: %v", err)
	}
	c, err := mqtttest.Dial(s.Addr(), "bad", 5, persistentV5)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	publishQoS(t, c, 2, 1, true, "m")
	if p := h.request(t).m.(msg.Publish); p.Seq != 1 || !strings.Contains(p.Publisher, "b.1.") {
		t.Fatalf("publish of the damaged file's session: %s #%d", p.Publisher, p.Seq)
	}

	// A directory that cannot be made: a file stands in its way.
	blocked := filepath.Join(t.TempDir(), "sessions")
	if err := os.WriteFile(blocked, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	s2, h2, logs2 := sessionServer(t, blocked, 1)
	c2, err := mqtttest.Dial(s2.Addr(), "w", 5, persistentV5)
	if err != nil {
		t.Fatal(err)
	}
	defer c2.Close()
	publishQoS(t, c2, 2, 3, false, "m")
	if pk := read(t, c2, packets.Disconnect); pk.ReasonCode != packets.ErrUnspecifiedError.Code {
		t.Fatalf("DISCONNECT %#x", pk.ReasonCode)
	}
	if !strings.Contains(logs2.String(), "MQTT session file not written") {
		t.Fatalf("no error logged for the failed write: %s", logs2.String())
	}
	down(t, h2)
	noRequest(t, h2, "for a publish whose packet id was not written")
	if err := os.Remove(blocked); err != nil {
		t.Fatal(err)
	}
	c3, err := mqtttest.Dial(s2.Addr(), "w", 5, persistentV5)
	if err != nil {
		t.Fatal(err)
	}
	defer c3.Close()
	publishQoS(t, c3, 2, 3, true, "m")
	p := h2.request(t).m.(msg.Publish)
	if f := readSession(t, blocked, "w"); f.in[3] != p.Seq {
		t.Fatalf("resent publish #%d, the file holds %v", p.Seq, f.in)
	}
}

// TestQoS2DeliverSessionFile: a QoS 2 delivery of a persistent session
// at a broker with a session directory is in the session's file as sent
// when its PUBLISH reaches the client, and as received when its PUBREL
// does. After the broker's restart (a new run from the directory, the
// SHB resuming from a durable checkpoint at 10) the session's first
// connection gets PUBREL again for 20 and 30, which the client had
// received (30 completed), and, as the SHB replays from the checkpoint,
// 40, never received, again with its packet id and DUP, then 50 as new:
// nothing twice. The file keeps no delivery the checkpoint in the log
// has passed.
func TestQoS2DeliverSessionFile(t *testing.T) {
	dir := t.TempDir()
	s, h, _ := sessionServer(t, dir, 1)
	persistent := func(pk *packets.Packet) { pk.Connect.Clean = false }
	c, err := mqtttest.Dial(s.Addr(), "d2f", 4, persistent)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if err := c.Write(packets.Packet{FixedHeader: packets.FixedHeader{Type: packets.Subscribe, Qos: 1}, PacketID: 1,
		Filters: packets.Subscriptions{{Filter: "a/b", Qos: 2}}}); err != nil {
		t.Fatal(err)
	}
	sub := h.request(t).m.(msg.Subscribe)
	h.conn(1).Send(msg.SubStarted{Sub: sub.Sub, Token: msg.Token{"P1": 1}})
	read(t, c, packets.Suback)
	ev := func(tk tick.Tick) *msg.Event {
		return msg.NewEvent("P1", tk, "p", uint64(tk), "a.b", msg.Props{}, []byte{byte(tk)})
	}
	key := func(tk tick.Tick) deliveryKey { return deliveryKey{sub.Sub, "P1", tk} }
	out := func() map[deliveryKey]outRec { return readSession(t, dir, "d2f").out }
	for _, tk := range []tick.Tick{10, 20, 30, 40} {
		h.conn(1).Send(msg.Delivery{Sub: sub.Sub, Event: ev(tk)})
	}
	var d [4]packets.Packet
	for i := range d {
		d[i] = read(t, c, packets.Publish)
		if r := out()[key(tick.Tick(10*(i+1)))]; r.pid != d[i].PacketID || d[i].Payload[0] != byte(10*(i+1)) {
			t.Fatalf("PUBLISH %d of %v written, the file then held %+v", d[i].PacketID, d[i].Payload, out())
		}
	}
	for i := range 3 { // 10, 20, 30 received; 10 and 30 completed
		if err := c.Send(packets.Pubrec, d[i].PacketID); err != nil {
			t.Fatal(err)
		}
		expect(t, c, packets.Pubrel, d[i].PacketID, 0)
		if r := out()[key(tick.Tick(10*(i+1)))]; r.state != outReceived {
			t.Fatalf("PUBREL %d written, the file then held %+v", d[i].PacketID, out())
		}
	}
	for _, i := range []int{0, 2} {
		if err := c.Send(packets.Pubcomp, d[i].PacketID); err != nil {
			t.Fatal(err)
		}
	}
	for {
		if a, ok := h.request(t).m.(msg.SubAck); ok && a.Token["P1"] == 10 {
			break
		}
	}
	c.Close()

	s2, h2, _ := sessionServer(t, dir, 2)
	h2.mu.Lock()
	h2.sessions[sessionPrefix("d2f")] = []msg.DurableSub{{Name: string(sub.Sub), Pattern: "a.b", Released: msg.Token{"P1": 10}}}
	h2.mu.Unlock()
	c2, err := mqtttest.Dial(s2.Addr(), "d2f", 4, persistent)
	if err != nil {
		t.Fatal(err)
	}
	defer c2.Close()
	rels := map[uint16]bool{}
	for range 2 {
		rels[read(t, c2, packets.Pubrel).PacketID] = true
	}
	if !rels[d[1].PacketID] || !rels[d[2].PacketID] {
		t.Fatalf("PUBRELs %v after the restart, want %d and %d", rels, d[1].PacketID, d[2].PacketID)
	}
	if r := h2.request(t).m.(msg.Subscribe); r.Sub != sub.Sub {
		t.Fatalf("resumed %+v", r)
	}
	for _, tk := range []tick.Tick{20, 30, 40, 50} { // replayed from the checkpoint
		h2.conn(1).Send(msg.Delivery{Sub: sub.Sub, Event: ev(tk)})
	}
	again := read(t, c2, packets.Publish)
	if again.PacketID != d[3].PacketID || !again.FixedHeader.Dup || again.Payload[0] != 40 {
		t.Fatalf("replayed %d dup=%v payload %v, want 40 again as packet %d with DUP", again.PacketID, again.FixedHeader.Dup, again.Payload, d[3].PacketID)
	}
	if next := read(t, c2, packets.Publish); next.Payload[0] != 50 || next.FixedHeader.Dup {
		t.Fatalf("then %+v, want 50", next)
	}
	// Its write dropped 10, which the checkpoint in the log has passed.
	if o := out(); len(o) != 4 || o[key(50)].state != outSent {
		t.Fatalf("the file holds %+v, want 20 to 50", o)
	}
}

// BenchmarkSessionFileWrite: one write of a session's file (encode,
// write, fsync, rename, directory fsync), as a QoS 2 PUBLISH, PUBREL,
// delivery or PUBREC costs, for a session with 32 QoS 2 packet ids held
// and 0, 256 or 1 024 deliveries in the file (pruneSlack bounds them
// between prunes), or releasedKept released packet ids.
func BenchmarkSessionFileWrite(b *testing.B) {
	for _, c := range []struct {
		name          string
		out, released int
	}{
		{"0", 0, 0}, {"256", pruneSlack, 0}, {"1024", 4 * pruneSlack, 0}, {"released", 0, releasedKept},
	} {
		n := c.out
		b.Run(c.name, func(b *testing.B) {
			s := &Server{opts: Options{SessionDir: b.TempDir(), Host: &fakeHost{}}}
			st := &clientState{persist: true, publisher: "mqtt:dev-1@b.1.1", seq: 1 << 20, limit: 1 << 20,
				in: map[uint16]*inbound{}, out: map[deliveryKey]outRec{}, pruneAt: 1 << 30}
			for i := range 32 {
				st.in[uint16(i+1)] = &inbound{seq: uint64(1<<20 - i), sum: 1<<63 + uint64(i)}
			}
			for i := range c.released {
				st.addReleasedLocked(releasedID{pid: uint16(i + 100), seq: uint64(1<<19 + i), sum: 1<<63 + uint64(i)})
			}
			for i := range n {
				st.out[deliveryKey{"mqtt:dev-1:2:0:site%2F%23", "P1", tick.Tick(1<<40 + i)}] = outRec{pid: uint16(i + 1), state: outReceived}
			}
			st.fileMu.Lock()
			defer st.fileMu.Unlock()
			for b.Loop() {
				if err := s.saveSessionLocked("dev-1", st, 0); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// TestQoS2ReleasedResent: a client that lost the PUBCOMP with its
// connection sends the released PUBLISH again with DUP on its next one
// (paho.mqtt.golang, docs/MQTT.md): after a reconnection, and after the
// broker's restart from its session directory, that PUBLISH is the same
// aerie publish (publisher and sequence number), so its pubend drops it.
// A PUBLISH under a released packet id without DUP, or with another
// message, is a new publish.
func TestQoS2ReleasedResent(t *testing.T) {
	dir := t.TempDir()
	s, h, _ := sessionServer(t, dir, 1)
	c, err := mqtttest.Dial(s.Addr(), "dev/1", 5, persistentV5)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	// complete publishes payload under pid (DUP as given) through its
	// PUBCOMP on conn, aerie answering from host's connection id.
	complete := func(c *mqtttest.Client, h *fakeHost, id shell.ClientID, pid uint16, dup bool, payload string) msg.Publish {
		t.Helper()
		publishQoS(t, c, 2, pid, dup, payload)
		p := h.request(t).m.(msg.Publish)
		h.conn(id).Send(msg.PubAck{Publisher: p.Publisher, Seq: p.Seq})
		expect(t, c, packets.Pubrec, pid, 0)
		if err := c.Send(packets.Pubrel, pid); err != nil {
			t.Fatal(err)
		}
		expect(t, c, packets.Pubcomp, pid, 0)
		return p
	}
	p7 := complete(c, h, 1, 7, false, "m")
	p8 := complete(c, h, 1, 8, false, "m")
	sum := publishSum(packets.Packet{TopicName: "q/2", Payload: []byte("m")})
	if f := readSession(t, dir, "dev/1"); len(f.in) != 0 || !slices.Equal(f.released, []releasedID{{7, p7.Seq, sum}, {8, p8.Seq, sum}}) {
		t.Fatalf("after PUBCOMP 7 and 8 the file holds %v, released %v", f.in, f.released)
	}

	// The same run, the next connection: 7 comes again.
	c.Close()
	down(t, h)
	c2, err := mqtttest.Dial(s.Addr(), "dev/1", 5, persistentV5)
	if err != nil {
		t.Fatal(err)
	}
	defer c2.Close()
	if p := complete(c2, h, 2, 7, true, "m"); p.Publisher != p7.Publisher || p.Seq != p7.Seq {
		t.Fatalf("PUBLISH 7 sent again after its PUBCOMP is %s #%d, want %s #%d", p.Publisher, p.Seq, p7.Publisher, p7.Seq)
	}

	// The broker's next run, from the same directory: 8 comes again.
	c2.Close()
	s2, h2, _ := sessionServer(t, dir, 2)
	c3, err := mqtttest.Dial(s2.Addr(), "dev/1", 5, persistentV5)
	if err != nil {
		t.Fatal(err)
	}
	defer c3.Close()
	if p := complete(c3, h2, 1, 8, true, "m"); p.Publisher != p8.Publisher || p.Seq != p8.Seq {
		t.Fatalf("PUBLISH 8 sent again after its PUBCOMP and the restart is %s #%d, want %s #%d", p.Publisher, p.Seq, p8.Publisher, p8.Seq)
	}
	// New messages under released packet ids: without DUP, or another
	// message.
	seen := map[uint64]bool{p7.Seq: true, p8.Seq: true}
	for _, m := range []struct {
		pid     uint16
		dup     bool
		payload string
	}{{7, false, "m"}, {8, true, "other"}} {
		p := complete(c3, h2, 1, m.pid, m.dup, m.payload)
		if seen[p.Seq] {
			t.Fatalf("PUBLISH %d (DUP %v, %q) after PUBCOMP %d is #%d again: not a new publish", m.pid, m.dup, m.payload, m.pid, p.Seq)
		}
		seen[p.Seq] = true
	}
}

// TestSessionFileVersion1: a file of version 1 (packet ids without a
// digest, no released ones) is read.
func TestSessionFileVersion1(t *testing.T) {
	f, err := decodeSession(seal(append(sessionBody("c", "p", 10, 2, 4, 3, 5, 9, 1, "s", "P1", 3, 1), 1)))
	if err != nil || f.in[4] != 3 || f.in[5] != 9 || len(f.sums) != 0 || len(f.released) != 0 || f.out[deliveryKey{"s", "P1", 3}] != (outRec{1, outReceived}) {
		t.Fatalf("version 1 file: %+v, %v", f, err)
	}
}
