package main

import (
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	paho "github.com/eclipse/paho.mqtt.golang"
	"github.com/mochi-mqtt/server/v2/packets"

	"github.com/aerie-mq/aerie/internal/mqtt/mqtttest"
)

// TestMQTTQoS2Kill9Publisher: a paho QoS 2 publisher with a persistent
// session at the PHB p1 keeps up to 32 publishes in flight; once 150 are
// complete, and again once 300 are, p1 is killed with kill -9 and
// started again. paho reconnects and resends every PUBLISH it had in
// flight with DUP, those whose PUBCOMP the kill took included (it keeps
// the PUBLISH, not the PUBREL). The persistent session's file under p1's
// data (docs/MQTT.md, Quality of service) makes each resent PUBLISH the
// same aerie publish, whether its packet id was held or released, so a
// QoS 2 subscriber at the SHB s1 gets every one of the 400 messages
// exactly once. The last message, published once
// every other is complete, comes after any repeat could (one client's
// publishes go to one pubend, delivered in its order).
func TestMQTTQoS2Kill9Publisher(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs processes")
	}
	_, procs, mq, _ := mqttNet(t)
	const n, window = 400, 32
	var mu sync.Mutex
	count := map[int]int{}
	how := map[int][]string{} // packet id and DUP of each arrival, for the failure message
	end := make(chan struct{})
	onMsg := func(_ paho.Client, m paho.Message) {
		if string(m.Payload()) == "end" {
			close(end)
			return
		}
		i, err := strconv.Atoi(string(m.Payload()))
		if err != nil {
			t.Errorf("payload %q", m.Payload())
			return
		}
		mu.Lock()
		count[i]++
		how[i] = append(how[i], fmt.Sprintf("packet %d dup %v", m.MessageID(), m.Duplicate()))
		mu.Unlock()
	}
	sub := paho.NewClient(paho.NewClientOptions().AddBroker("tcp://" + mq["s1"]).SetClientID("q2k-sub").
		SetCleanSession(false).SetAutoReconnect(true).SetConnectTimeout(5 * time.Second).SetDefaultPublishHandler(onMsg))
	if tok := sub.Connect(); !tok.WaitTimeout(20*time.Second) || tok.Error() != nil {
		t.Fatalf("connect subscriber: %v", tok.Error())
	}
	defer sub.Disconnect(100)
	if tok := sub.Subscribe("q2k/#", 2, onMsg); !tok.WaitTimeout(30*time.Second) || tok.Error() != nil {
		t.Fatalf("subscribe: %v", tok.Error())
	}

	pub := paho.NewClient(paho.NewClientOptions().AddBroker("tcp://" + mq["p1"]).SetClientID("q2k-pub").
		SetCleanSession(false).SetAutoReconnect(true).SetConnectRetry(true).
		SetMaxReconnectInterval(200 * time.Millisecond).SetConnectTimeout(5 * time.Second))
	if tok := pub.Connect(); !tok.WaitTimeout(20*time.Second) || tok.Error() != nil {
		t.Fatalf("connect publisher: %v", tok.Error())
	}
	defer pub.Disconnect(100)
	complete := func(i int, tok paho.Token) {
		t.Helper()
		if !tok.WaitTimeout(90 * time.Second) {
			t.Fatalf("publish %d never completed", i)
		}
		if err := tok.Error(); err != nil {
			// paho wrote it to the connection the kill broke: it keeps
			// it and resends it once reconnected, ahead of what it
			// publishes next (the check below sees it arrive).
			t.Logf("publish %d: %v", i, err)
		}
	}
	toks := make([]paho.Token, n+1)
	for i := 1; i <= n; i++ {
		if i > window {
			complete(i-window, toks[i-window])
		}
		if i-window == 150 || i-window == 300 {
			procs.kill("p1") // publishes i-window+1 … i-1 in flight
			procs.start("p1")
		}
		toks[i] = pub.Publish("q2k/x", 2, false, strconv.Itoa(i))
	}
	for i := n - window + 1; i <= n; i++ {
		complete(i, toks[i])
	}
	complete(n+1, pub.Publish("q2k/x", 2, false, "end"))
	select {
	case <-end:
	case <-time.After(120 * time.Second):
		t.Fatal("the last message never arrived")
	}
	if _, err := os.Stat(filepath.Join(filepath.Dir(procs.cfg), "data", "p1", "mqtt-sessions")); err != nil {
		t.Errorf("no session directory at the PHB: %v", err)
	}
	mu.Lock()
	defer mu.Unlock()
	for i := 1; i <= n; i++ {
		if count[i] != 1 {
			t.Errorf("message %d arrived %d times: %v", i, count[i], how[i])
		}
	}
}

// q2Receiver is an MQTT 3.1.1 QoS 2 receiver as the specification has
// it (Method B, [MQTT-4.3.3-2]): a PUBLISH whose packet id it holds is
// acknowledged and not delivered again; PUBREL frees the id. Its session
// (clean session 0) and the ids it holds outlive its connections. The
// common clients do not do this for a resent PUBLISH: paho Go delivers it
// again, libmosquitto 2.0 queues it a second time and delivers the copy
// at the id's next PUBREL (docs/MQTT.md, Quality of service).
type q2Receiver struct {
	addr, id string
	c        *mqtttest.Client
	held     map[uint16]bool
}

// connect (re)connects, waiting for a restarting broker.
func (r *q2Receiver) connect(t *testing.T) {
	t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for {
		c, err := mqtttest.Dial(r.addr, r.id, 4, func(pk *packets.Packet) { pk.Connect.Clean = false })
		if err == nil && c.Connack.ReasonCode == 0 {
			r.c = c
			return
		}
		if c != nil {
			c.Close()
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s never connected to %s: %v", r.id, r.addr, err)
		}
		time.Sleep(50 * time.Millisecond) // polling a process we cannot be told about
	}
}

// next returns the next message delivered, reconnecting when the
// connection is lost.
func (r *q2Receiver) next(t *testing.T) string {
	t.Helper()
	for {
		pk, err := r.c.Read(60 * time.Second)
		if err == nil {
			switch pk.FixedHeader.Type {
			case packets.Publish:
				fresh := pk.FixedHeader.Qos < 2 || !r.held[pk.PacketID]
				switch pk.FixedHeader.Qos {
				case 2:
					r.held[pk.PacketID] = true
					err = r.c.Send(packets.Pubrec, pk.PacketID)
				case 1:
					err = r.c.Ack(pk.PacketID)
				}
				if err == nil && fresh {
					return string(pk.Payload)
				}
			case packets.Pubrel:
				delete(r.held, pk.PacketID)
				err = r.c.Send(packets.Pubcomp, pk.PacketID)
			}
		}
		if err != nil {
			if ne, ok := err.(net.Error); ok && ne.Timeout() {
				t.Fatalf("%s: nothing for 60 s", r.id)
			}
			r.c.Close()
			r.connect(t)
		}
	}
}

// TestMQTTQoS2Kill9Subscriber: a QoS 2 receiver with a persistent session
// (q2Receiver) at the SHB s1, a paho QoS 2 publisher at the PHB p1 with
// up to 32 publishes in flight. Once the receiver has 100 of the 300
// messages, s1 is killed with kill -9 and started again; the receiver
// reconnects. The session's QoS 2 deliveries beyond its checkpoint are
// in its file under s1's data (docs/MQTT.md, Quality of service): what
// the client had received gets PUBREL again, what it may have had goes
// again with its packet id, so it gets every message exactly once.
func TestMQTTQoS2Kill9Subscriber(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs processes")
	}
	_, procs, mq, _ := mqttNet(t)
	r := &q2Receiver{addr: mq["s1"], id: "q2s-sub", held: map[uint16]bool{}}
	r.connect(t)
	defer func() { r.c.Close() }()
	if ack, err := r.c.Subscribe(2, nil, "q2s/#"); err != nil || ack.ReasonCodes[0] != 2 {
		t.Fatalf("SUBACK %v, %v", ack.ReasonCodes, err)
	}
	const n, window = 300, 32
	pub := paho.NewClient(paho.NewClientOptions().AddBroker("tcp://" + mq["p1"]).SetClientID("q2s-pub").
		SetCleanSession(false).SetAutoReconnect(true).SetConnectTimeout(5 * time.Second))
	if tok := pub.Connect(); !tok.WaitTimeout(20*time.Second) || tok.Error() != nil {
		t.Fatalf("connect publisher: %v", tok.Error())
	}
	defer pub.Disconnect(100)
	published := make(chan error, 1)
	go func() { // the publisher goes on through the SHB's crash
		toks := make([]paho.Token, n+2)
		wait := func(i int) error {
			if !toks[i].WaitTimeout(90*time.Second) || toks[i].Error() != nil {
				return fmt.Errorf("publish %d never completed: %v", i, toks[i].Error())
			}
			return nil
		}
		for i := 1; i <= n; i++ {
			if i > window {
				if err := wait(i - window); err != nil {
					published <- err
					return
				}
			}
			toks[i] = pub.Publish("q2s/x", 2, false, strconv.Itoa(i))
		}
		for i := n - window + 1; i <= n; i++ {
			if err := wait(i); err != nil {
				published <- err
				return
			}
		}
		toks[n+1] = pub.Publish("q2s/x", 2, false, "end") // after every other: after any repeat
		published <- wait(n + 1)
	}()
	count := map[int]int{}
	for got := 0; ; {
		l := r.next(t)
		if l == "end" {
			break
		}
		i, err := strconv.Atoi(l)
		if err != nil {
			t.Fatalf("payload %q", l)
		}
		count[i]++
		if got++; got == 100 {
			procs.kill("s1")
			procs.start("s1")
		}
	}
	if err := <-published; err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(filepath.Dir(procs.cfg), "data", "s1", "mqtt-sessions")); err != nil {
		t.Errorf("no session directory at the SHB: %v", err)
	}
	for i := 1; i <= n; i++ {
		if count[i] != 1 {
			t.Errorf("message %d delivered %d times", i, count[i])
		}
	}
}

// TestMQTTSessionCorruptFile: a QoS 2 publisher's session file at the PHB
// is damaged while the PHB is down; started again, the PHB logs it as
// unreadable, sets it aside as .corrupt, and serves as before: the same
// client id reconnects with its session and its QoS 2 publishes reach a
// subscriber (docs/MQTT.md, Quality of service: that session goes on at
// least once).
func TestMQTTSessionCorruptFile(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs processes")
	}
	_, procs, mq, _ := mqttNet(t)
	got := make(chan string, 10)
	sub := mqttClient(t, mq["s1"], "sc-sub")
	defer sub.Disconnect(100)
	if tok := sub.Subscribe("sc/#", 2, func(_ paho.Client, m paho.Message) { got <- string(m.Payload()) }); !tok.WaitTimeout(30*time.Second) || tok.Error() != nil {
		t.Fatalf("subscribe: %v", tok.Error())
	}
	publish := func(payload string) {
		t.Helper()
		pub := paho.NewClient(paho.NewClientOptions().AddBroker("tcp://" + mq["p1"]).SetClientID("sc-pub").
			SetCleanSession(false).SetAutoReconnect(false).SetConnectTimeout(5 * time.Second))
		if tok := pub.Connect(); !tok.WaitTimeout(20*time.Second) || tok.Error() != nil {
			t.Fatalf("connect publisher: %v", tok.Error())
		}
		defer pub.Disconnect(100)
		if tok := pub.Publish("sc/x", 2, false, payload); !tok.WaitTimeout(30*time.Second) || tok.Error() != nil {
			t.Fatalf("publish %s: %v", payload, tok.Error())
		}
		select {
		case p := <-got:
			if p != payload {
				t.Fatalf("got %q, want %q", p, payload)
			}
		case <-time.After(60 * time.Second):
			t.Fatalf("%s never arrived", payload)
		}
	}
	publish("before")
	procs.kill("p1")
	path := filepath.Join(filepath.Dir(procs.cfg), "data", "p1", "mqtt-sessions", "sc-pub.session")
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("the publisher's session file: %v", err)
	}
	b[len(b)/2] ^= 0xff
	if err := os.WriteFile(path, b, 0o644); err != nil {
		t.Fatal(err)
	}
	procs.start("p1")
	waitListening(t, mq["p1"])
	publish("after")
	log, err := os.ReadFile(procs.logPath("p1"))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(log), "MQTT session file unreadable") || !strings.Contains(string(log), "checksum") {
		t.Fatalf("the PHB did not log the damaged session file:\n%s", log)
	}
	if aside, err := os.ReadFile(path + ".corrupt"); err != nil || string(aside) != string(b) {
		t.Fatalf("the damaged file was not set aside as it was: %v", err)
	}
}
