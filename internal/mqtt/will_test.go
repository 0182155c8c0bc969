package mqtt

import (
	"errors"
	"path/filepath"
	"testing"
	"time"

	"github.com/mochi-mqtt/server/v2/packets"

	"github.com/aerie-mq/aerie/internal/auth"
	"github.com/aerie-mq/aerie/internal/mqtt/mqtttest"
	"github.com/aerie-mq/aerie/internal/msg"
)

func withWill(topic string, delay uint32, persistent bool) func(*packets.Packet) {
	return func(pk *packets.Packet) {
		pk.Connect.WillFlag, pk.Connect.WillTopic, pk.Connect.WillPayload, pk.Connect.WillQos = true, topic, []byte("bye"), 1
		pk.Connect.WillProperties.WillDelayInterval = delay
		pk.Connect.WillProperties.User = []packets.UserProperty{{Key: "why", Val: "lost"}}
		if persistent {
			pk.Connect.Clean = false
			pk.Properties.SessionExpiryInterval, pk.Properties.SessionExpiryIntervalFlag = 3600, true
		}
	}
}

// willPublished waits for the will's publish to reach aerie and answers
// it as the pubend would.
func willPublished(t *testing.T, h *fakeHost, topic string) msg.Publish {
	t.Helper()
	for {
		r := h.request(t)
		p, ok := r.m.(msg.Publish)
		if !ok {
			continue
		}
		if p.Topic != topic || string(p.Payload) != "bye" || p.NoAck {
			t.Fatalf("will reached aerie as %+v, want %s bye", p, topic)
		}
		if v, _ := p.Props.Get("why"); v.Str() != "lost" {
			t.Fatalf("will properties %v", p.Props)
		}
		h.conn(r.id).Send(msg.PubAck{Publisher: p.Publisher, Seq: p.Seq})
		return p
	}
}

func noRequest(t *testing.T, h *fakeHost, what string) {
	t.Helper()
	select {
	case r := <-h.reqs:
		t.Fatalf("%s: %+v reached aerie", what, r.m)
	case <-time.After(300 * time.Millisecond):
	}
}

// TestWill: a will is published through aerie when the connection ends
// without DISCONNECT or with DISCONNECT 0x04, not after a DISCONNECT
// 0x00; with a will delay, after it, unless the session is resumed first,
// and at once if a new session replaces it.
func TestWill(t *testing.T) {
	s, h := startFake(t, "P1")
	c, err := mqtttest.Dial(s.Addr(), "w1", 5, withWill("gone/w1", 0, false))
	if err != nil || c.Connack.ReasonCode != 0 {
		t.Fatalf("CONNACK %#x, %v", c.Connack.ReasonCode, err)
	}
	c.Close() // no DISCONNECT
	willPublished(t, h, "gone.w1")

	for _, tc := range []struct {
		code byte
		will bool
	}{{0x00, false}, {0x04, true}} {
		c, err := mqtttest.Dial(s.Addr(), "w2", 5, withWill("gone/w2", 0, false))
		if err != nil {
			t.Fatal(err)
		}
		if err := c.Write(packets.Packet{FixedHeader: packets.FixedHeader{Type: packets.Disconnect}, ReasonCode: tc.code}); err != nil {
			t.Fatal(err)
		}
		if tc.will {
			willPublished(t, h, "gone.w2")
		} else {
			noRequest(t, h, "DISCONNECT 0x00")
		}
		c.Close()
	}

	// A delayed will, the session resumed before the delay: none.
	c, err = mqtttest.Dial(s.Addr(), "w3", 5, withWill("gone/w3", 3600, true))
	if err != nil {
		t.Fatal(err)
	}
	c.Close()
	c, err = mqtttest.Dial(s.Addr(), "w3", 5, withWill("gone/w3", 3600, true))
	if err != nil {
		t.Fatal(err)
	}
	noRequest(t, h, "delayed will, session resumed")
	// The same client starts a new session: the waiting will goes now.
	c.Close()
	c, err = mqtttest.Dial(s.Addr(), "w3", 5, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	willPublished(t, h, "gone.w3")

	// A short delay passes: published.
	c4, err := mqtttest.Dial(s.Addr(), "w4", 5, withWill("gone/w4", 1, true))
	if err != nil {
		t.Fatal(err)
	}
	c4.Close()
	willPublished(t, h, "gone.w4")
}

// TestWillRefused: a will aerie cannot publish is refused in the CONNACK:
// $SYS (0x90), a topic the user may not publish to (0x87; 3.1.1 0x05).
func TestWillRefused(t *testing.T) {
	perms, err := auth.NewPerms("dev", []string{"ok.>"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	s, _ := startFakeOpts(t, func(o *Options) {
		o.Authenticate = func(user, password string) (*auth.Perms, error) {
			if user != "dev" {
				return nil, errors.New("no such user")
			}
			return perms, nil
		}
	}, "P1")
	login := func(topic string) func(*packets.Packet) {
		return func(pk *packets.Packet) {
			withWill(topic, 0, false)(pk)
			pk.Connect.UsernameFlag, pk.Connect.Username = true, []byte("dev")
			pk.Connect.PasswordFlag, pk.Connect.Password = true, []byte("pw")
		}
	}
	for _, tc := range []struct {
		topic   string
		version byte
		code    byte
	}{{"ok/x", 5, 0}, {"$SYS/x", 5, 0x90}, {"no/x", 5, 0x87}, {"no/x", 4, 0x05}} {
		c, err := mqtttest.Dial(s.Addr(), "wr", tc.version, login(tc.topic))
		if err != nil {
			t.Fatal(err)
		}
		c.Close()
		if c.Connack.ReasonCode != tc.code {
			t.Errorf("will to %s (v%d): CONNACK %#x, want %#x", tc.topic, tc.version, c.Connack.ReasonCode, tc.code)
		}
	}
	c, err := mqtttest.Dial(s.Addr(), "wr", 5, nil)
	if err != nil {
		t.Fatal(err)
	}
	c.Close()
	if c.Connack.ReasonCode != 0x86 {
		t.Errorf("no credentials: CONNACK %#x, want 0x86", c.Connack.ReasonCode)
	}
}

// TestBadInput: a second CONNECT is a protocol error (DISCONNECT 0x82 in
// MQTT 5) that publishes the will; a packet above the maximum packet size
// closes that connection; a bystander's connection is untouched.
func TestBadInput(t *testing.T) {
	s, h := startFake(t, "P1")
	other := dial(t, s, "bystander", 5)
	c, err := mqtttest.Dial(s.Addr(), "twice", 5, withWill("gone/twice", 0, false))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	again := packets.Packet{FixedHeader: packets.FixedHeader{Type: packets.Connect}, ProtocolVersion: 5,
		Connect: packets.ConnectParams{ProtocolName: []byte("MQTT"), ClientIdentifier: "twice", Clean: true, Keepalive: 30}}
	if err := c.Write(again); err != nil {
		t.Fatal(err)
	}
	if pk := read(t, c, packets.Disconnect); pk.ReasonCode != 0x82 {
		t.Fatalf("second CONNECT: DISCONNECT %#x, want 0x82", pk.ReasonCode)
	}
	willPublished(t, h, "gone.twice")

	big, err := mqtttest.Dial(s.Addr(), "big", 5, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer big.Close()
	// A PUBLISH header announcing 5 MiB: refused before it is read.
	if err := big.WriteRaw([]byte{0x30, 0x80, 0x80, 0xc0, 0x02}); err != nil {
		t.Fatal(err)
	}
	if _, err := big.ReadType(packets.Publish, 5*time.Second); err == nil {
		t.Fatal("the connection survived an oversized packet")
	}
	if _, err := other.Publish("still/here", 0, nil); err != nil {
		t.Fatal(err)
	}
	for {
		if p, ok := h.request(t).m.(msg.Publish); ok && p.Topic == "still.here" {
			break
		}
	}
}

// TestWillFiles: a will is a file while its connection is up, removed
// when settled (DISCONNECT 0x00, or published and acknowledged); a
// server that starts with a will file left (its broker crashed)
// publishes it and removes it.
func TestWillFiles(t *testing.T) {
	dir := t.TempDir()
	files := func() []string {
		t.Helper()
		m, err := filepath.Glob(filepath.Join(dir, "*.will"))
		if err != nil {
			t.Fatal(err)
		}
		return m
	}
	s, h := startFakeOpts(t, func(o *Options) { o.WillDir = dir }, "P1")
	c, err := mqtttest.Dial(s.Addr(), "wf", 5, withWill("gone/wf", 0, false))
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Write(packets.Packet{FixedHeader: packets.FixedHeader{Type: packets.Pingreq}}); err != nil {
		t.Fatal(err)
	}
	read(t, c, packets.Pingresp) // the session is established: its will is on disk
	if n := len(files()); n != 1 {
		t.Fatalf("%d will files with a connection up, want 1", n)
	}
	if err := c.Write(packets.Packet{FixedHeader: packets.FixedHeader{Type: packets.Disconnect}}); err != nil {
		t.Fatal(err)
	}
	down(t, h)
	if n := len(files()); n != 0 {
		t.Fatalf("%d will files after DISCONNECT 0x00, want 0", n)
	}

	// A previous run's will, left by a crash.
	if _, err := s.saveWill("crashed", storedWill{ClientID: "crashed", Topic: "gone/crashed", Payload: []byte("bye"),
		User: [][2]string{{"why", "lost"}}, QoS: 1}); err != nil {
		t.Fatal(err)
	}
	_, h2 := startFakeOpts(t, func(o *Options) { o.WillDir = dir }, "P1")
	willPublished(t, h2, "gone.crashed")
	down(t, h2) // the will's client, once acknowledged
	if n := len(files()); n != 0 {
		t.Fatalf("%d will files after publishing the previous run's, want 0", n)
	}
}
