package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	paho "github.com/eclipse/paho.mqtt.golang"
)

// Retained messages across a broker's kill -9 (docs/MQTT.md, Retained
// messages): the store of a broker with data is a file, fed by a durable
// subscription resumed from its checkpoint.

// mqttClient connects a clean paho client to addr.
func mqttClient(t *testing.T, addr, id string) paho.Client {
	t.Helper()
	c := paho.NewClient(paho.NewClientOptions().AddBroker("tcp://" + addr).SetClientID(id).SetCleanSession(true).
		SetAutoReconnect(false).SetConnectTimeout(5 * time.Second))
	if tok := c.Connect(); !tok.WaitTimeout(20*time.Second) || tok.Error() != nil {
		t.Fatalf("connect %s to %s: %v", id, addr, tok.Error())
	}
	return c
}

// publishRetained publishes payloads by topic at addr, retained, at QoS 1,
// in the order given; each is acknowledged (durable at its pubend).
func publishRetained(t *testing.T, addr, id string, msgs [][2]string) {
	t.Helper()
	pub := mqttClient(t, addr, id)
	defer pub.Disconnect(100)
	for _, m := range msgs {
		if tok := pub.Publish(m[0], 1, true, m[1]); !tok.WaitTimeout(30*time.Second) || tok.Error() != nil {
			t.Fatalf("publish %s not acknowledged: %v", m[0], tok.Error())
		}
	}
}

// awaitRetained waits until a new subscriber to topic at addr gets payload
// as its retained message. One publisher's messages go to one pubend and
// reach a store in order, so once its last one is retained there every
// earlier one is too.
func awaitRetained(t *testing.T, addr, topic, payload string) {
	t.Helper()
	deadline := time.Now().Add(90 * time.Second)
	for i := 0; ; i++ {
		p := retainedOf(t, addr, fmt.Sprintf("await-%d", i), topic)
		if p == payload {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s never retained %q at %s (last: %q)", topic, payload, addr, p)
		}
	}
}

// retainedOf is the retained message a new subscriber to topic at addr
// gets within 2 s ("": none).
func retainedOf(t *testing.T, addr, id, topic string) string {
	t.Helper()
	got := make(chan string, 10)
	c := mqttClient(t, addr, id)
	defer c.Disconnect(100)
	tok := c.Subscribe(topic, 1, func(_ paho.Client, m paho.Message) {
		if m.Retained() {
			got <- string(m.Payload())
		}
	})
	if !tok.WaitTimeout(30*time.Second) || tok.Error() != nil {
		t.Fatalf("subscribe %s at %s: %v", topic, addr, tok.Error())
	}
	select {
	case p := <-got:
		return p
	case <-time.After(2 * time.Second): // polling a store we cannot be told about
		return ""
	}
}

// awaitWatching waits until the retained watch of the broker at addr is
// in force: a retained message published at pubAddr from then on reaches
// its store. A broker's first watch starts as a new durable subscription
// some moments after the broker: what the pubends released before then
// is not caught up (docs/MQTT.md, Retained messages).
func awaitWatching(t *testing.T, addr, pubAddr string) {
	t.Helper()
	deadline := time.Now().Add(90 * time.Second)
	for i := 0; ; i++ {
		ready := fmt.Sprint(i)
		publishRetained(t, pubAddr, "ready-pub", [][2]string{{"mark/ready", ready}})
		if retainedOf(t, addr, "ready-"+ready, "mark/ready") == ready {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("the retained watch at %s never took a retained message", addr)
		}
	}
}

// retainedUnder subscribes a new client to filter at addr and returns the
// retained messages it gets, by topic, failing on any topic given twice.
// The retained messages of a subscription come right after its SUBACK,
// ahead of live ones: so once a live message published at pubAddr after
// the SUBACK (topic end) arrives, every retained one has.
func retainedUnder(t *testing.T, addr, filter, pubAddr, end string) map[string]string {
	t.Helper()
	var mu sync.Mutex
	got := map[string]string{}
	var twice []string
	ended := make(chan struct{})
	c := mqttClient(t, addr, "retained-reader")
	defer c.Disconnect(100)
	tok := c.Subscribe(filter, 1, func(_ paho.Client, m paho.Message) {
		mu.Lock()
		defer mu.Unlock()
		switch {
		case m.Topic() == end && !m.Retained():
			close(ended)
		case m.Retained():
			if _, ok := got[m.Topic()]; ok {
				twice = append(twice, m.Topic())
			}
			got[m.Topic()] = string(m.Payload())
		}
	})
	if !tok.WaitTimeout(30*time.Second) || tok.Error() != nil {
		t.Fatalf("subscribe %s: %v", filter, tok.Error())
	}
	pub := mqttClient(t, pubAddr, "end-pub")
	defer pub.Disconnect(100)
	if tok := pub.Publish(end, 1, false, "end"); !tok.WaitTimeout(30*time.Second) || tok.Error() != nil {
		t.Fatalf("publish %s: %v", end, tok.Error())
	}
	select {
	case <-ended:
	case <-time.After(60 * time.Second):
		t.Fatalf("the live %s never arrived", end)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(twice) > 0 {
		t.Fatalf("retained messages delivered twice: %v", twice)
	}
	return got
}

func checkRetained(t *testing.T, got, want map[string]string) {
	t.Helper()
	for topic, p := range want {
		if got[topic] != p {
			t.Errorf("%s: retained %q, want %q", topic, got[topic], p)
		}
	}
	for topic := range got {
		if _, ok := want[topic]; !ok {
			t.Errorf("%s: retained %q, want none", topic, got[topic])
		}
	}
	if t.Failed() {
		t.Fatalf("got %d retained messages, want %d", len(got), len(want))
	}
}

// TestMQTTRetainedKill9: 210 topics retained at the PHB, 50 of them
// replaced and 10 cleared; once the SHB's store has them, the SHB is
// killed with kill -9 and started again. A new wildcard subscriber there
// gets exactly the 200 retained messages, each once, with its last value.
func TestMQTTRetainedKill9(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs processes")
	}
	_, procs, mq, _ := mqttNet(t)
	var msgs [][2]string
	want := map[string]string{}
	for i := range 210 {
		topic := fmt.Sprintf("ret/%03d", i)
		msgs = append(msgs, [2]string{topic, fmt.Sprintf("first %d", i)})
		want[topic] = fmt.Sprintf("first %d", i)
	}
	for i := range 50 {
		topic := fmt.Sprintf("ret/%03d", i*4)
		msgs = append(msgs, [2]string{topic, fmt.Sprintf("second %d", i*4)})
		want[topic] = fmt.Sprintf("second %d", i*4)
	}
	for i := 200; i < 210; i++ {
		topic := fmt.Sprintf("ret/%03d", i)
		msgs = append(msgs, [2]string{topic, ""}) // clears it
		delete(want, topic)
	}
	msgs = append(msgs, [2]string{"mark/kill9", "last"})
	awaitWatching(t, mq["s1"], mq["p1"])
	publishRetained(t, mq["p1"], "ret-pub", msgs)
	awaitRetained(t, mq["s1"], "mark/kill9", "last")
	checkRetained(t, retainedUnder(t, mq["s1"], "ret/#", mq["p1"], "ret/end"), want)

	procs.kill("s1")
	procs.start("s1")
	waitListening(t, mq["s1"])
	awaitRetained(t, mq["s1"], "mark/kill9", "last")
	checkRetained(t, retainedUnder(t, mq["s1"], "ret/#", mq["p1"], "ret/end"), want)
	logRetained(t, procs, "s1")
}

// logRetained shows what broker id logged of its retained store: whether
// a restart read it from its file (the write it needs after the last
// change usually, not surely, precedes the kill; the catch-up covers the
// rest either way).
func logRetained(t *testing.T, procs *procFixture, id string) {
	t.Helper()
	b, err := os.ReadFile(procs.logPath(id))
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range strings.Split(string(b), "\n") {
		if strings.Contains(l, "MQTT retained") {
			t.Log(l)
		}
	}
}

// TestMQTTRetainedWhileDown: with the SHB down (kill -9), 100 topics are
// retained at the PHB; started again, the SHB catches them up from the
// PHB's log through its durable watch, and a new subscriber there gets
// them, with what was retained before the kill.
func TestMQTTRetainedWhileDown(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs processes")
	}
	_, procs, mq, _ := mqttNet(t)
	awaitWatching(t, mq["s1"], mq["p1"])
	publishRetained(t, mq["p1"], "before-pub", [][2]string{{"down/before", "kept"}})
	awaitRetained(t, mq["s1"], "down/before", "kept")

	procs.kill("s1")
	want := map[string]string{"down/before": "kept"}
	var msgs [][2]string
	for i := range 100 {
		topic := fmt.Sprintf("down/%03d", i)
		msgs = append(msgs, [2]string{topic, fmt.Sprintf("while down %d", i)})
		want[topic] = fmt.Sprintf("while down %d", i)
	}
	msgs = append(msgs, [2]string{"mark/down", "last"})
	publishRetained(t, mq["p1"], "down-pub", msgs)
	procs.start("s1")
	waitListening(t, mq["s1"])
	awaitRetained(t, mq["s1"], "mark/down", "last")
	checkRetained(t, retainedUnder(t, mq["s1"], "down/#", mq["p1"], "down/end"), want)
	logRetained(t, procs, "s1")
}

// TestMQTTRetainedCorruptFile: the SHB's retained store file is damaged
// while it is down; started again, it logs the file as unreadable, sets it
// aside as mqtt-retained.corrupt, and its store is rebuilt from the logs:
// its watch takes retained messages again, and the SHB serves as before.
func TestMQTTRetainedCorruptFile(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs processes")
	}
	_, procs, mq, _ := mqttNet(t)
	awaitWatching(t, mq["s1"], mq["p1"])
	publishRetained(t, mq["p1"], "c-pub", [][2]string{{"c/a", "A"}, {"mark/c", "1"}})
	awaitRetained(t, mq["s1"], "mark/c", "1")
	procs.kill("s1")
	path := filepath.Join(filepath.Dir(procs.cfg), "data", "s1", "mqtt-retained")
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("the SHB's retained store file: %v", err)
	}
	b[len(b)/2] ^= 0xff
	if err := os.WriteFile(path, b, 0o644); err != nil {
		t.Fatal(err)
	}
	procs.start("s1")
	waitListening(t, mq["s1"])
	publishRetained(t, mq["p1"], "c-pub2", [][2]string{{"mark/c", "2"}})
	awaitRetained(t, mq["s1"], "mark/c", "2")
	log, err := os.ReadFile(procs.logPath("s1"))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(log), "MQTT retained store file unreadable") || !strings.Contains(string(log), "checksum") {
		t.Fatalf("the SHB did not log its damaged retained store file:\n%s", log)
	}
	if aside, err := os.ReadFile(path + ".corrupt"); err != nil || string(aside) != string(b) {
		t.Fatalf("the damaged file was not set aside as it was: %v", err)
	}
	logRetained(t, procs, "s1")
}
