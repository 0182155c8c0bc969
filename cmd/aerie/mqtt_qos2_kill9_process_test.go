package main

import (
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"testing"
	"time"

	paho "github.com/eclipse/paho.mqtt.golang"
)

// TestMQTTQoS2Kill9Publisher: a paho QoS 2 publisher with a persistent
// session at the PHB p1 keeps up to 32 publishes in flight; once 150 are
// complete, and again once 300 are, p1 is killed with kill -9 and
// started again. paho reconnects
// and resends what it had in flight: PUBLISH with DUP for those without
// PUBREC, PUBREL for the others. The persistent session's file under
// p1's data (docs/MQTT.md, Quality of service) makes each resent PUBLISH
// the same aerie publish, so a QoS 2 subscriber at the SHB s1 gets every
// one of the 400 messages exactly once. The last message, published once
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
		if !tok.WaitTimeout(90*time.Second) || tok.Error() != nil {
			t.Fatalf("publish %d never completed: %v", i, tok.Error())
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
			t.Errorf("message %d arrived %d times", i, count[i])
		}
	}
}
