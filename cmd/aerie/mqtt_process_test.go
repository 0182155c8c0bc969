package main

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"net"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	paho "github.com/eclipse/paho.mqtt.golang"
)

// mqttNet writes and starts p1 (pubends) → b1 → s1 as `aerie broker`
// processes, with MQTT listeners at p1 and s1 and a data directory at s1;
// it returns the MQTT and
// client addresses by broker.
func mqttNet(t *testing.T) (bin string, procs *procFixture, mqttAddr, clientAddr map[string]string) {
	procs = newProcFixture(t)
	bin, addr := procs.bin, procs.addr
	mqttAddr, clientAddr = map[string]string{}, map[string]string{}
	cfg := ""
	for _, id := range []string{"p1", "b1", "s1"} {
		cfg += fmt.Sprintf("[[broker]]\nid = %q\nlisten = %q\n", id, addr())
		if id != "b1" {
			mqttAddr[id], clientAddr[id] = addr(), addr()
			cfg += fmt.Sprintf("clients = %q\nmqtt = %q\n", clientAddr[id], mqttAddr[id])
		}
		if id == "p1" {
			cfg += "data = \"data/p1\"\npubends = [\"P1\", \"P2\"]\n"
		}
		if id == "s1" {
			cfg += "data = \"data/s1\"\n" // MQTT persistent sessions are kept there
		}
		cfg += "\n"
	}
	cfg += "[[link]]\nup = \"p1\"\ndown = \"b1\"\n[[link]]\nup = \"b1\"\ndown = \"s1\"\n"
	procs.writeConfig(cfg)
	for _, id := range []string{"p1", "b1", "s1"} {
		procs.start(id)
	}
	for _, id := range []string{"p1", "s1"} {
		waitListening(t, mqttAddr[id])
	}
	return bin, procs, mqttAddr, clientAddr
}

// waitListening waits until addr accepts connections (a starting process).
func waitListening(t *testing.T, addr string) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		c, err := net.DialTimeout("tcp", addr, time.Second)
		if err == nil {
			c.Close()
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s never listened: %v", addr, err)
		}
		time.Sleep(20 * time.Millisecond) // polling a process we cannot be told about
	}
}

// TestMQTTMosquitto: Debian's mosquitto clients against aerie brokers.
// mosquitto_sub at the SHB receives what `aerie pub` publishes at the PHB,
// topic-mapped; `aerie sub --selector "region = 'EU'"` receives exactly
// the `mosquitto_pub -V mqttv5 -D publish user-property region EU`
// messages, at QoS 1 and at QoS 0.
func TestMQTTMosquitto(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs processes")
	}
	for _, tool := range []string{"mosquitto_sub", "mosquitto_pub", "stdbuf"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Skipf("%s not found: install Debian's mosquitto-clients (apt-get install -y mosquitto-clients) to run this test", tool)
		}
	}
	bin, _, mq, cl := mqttNet(t)
	hostPort := func(a string) (string, string) { h, p, _ := net.SplitHostPort(a); return h, p }
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()

	// mosquitto_sub at s1; -d prints the SUBACK, which aerie sends once
	// the subscription is in force (stdbuf: line by line into the pipe).
	h, p := hostPort(mq["s1"])
	msub := exec.CommandContext(ctx, "stdbuf", "-oL", "mosquitto_sub", "-h", h, "-p", p, "-i", "msub", "-q", "1", "-t", "orders/#", "-v", "-d", "-C", "3")
	out, err := msub.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := msub.Start(); err != nil {
		t.Fatal(err)
	}
	lines := make(chan string, 100)
	go func() {
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			lines <- sc.Text()
		}
		close(lines)
	}()
	subscribed := false
	for l := range lines {
		if strings.Contains(l, "received SUBACK") {
			subscribed = true
			break
		}
	}
	if !subscribed {
		t.Fatalf("mosquitto_sub ended without a SUBACK: %v", msub.Wait())
	}
	if pub, err := exec.CommandContext(ctx, bin, "pub", "--connect", cl["p1"], "--wait-for-broker", "60s", "--topic", "orders.eu", "--count", "3", "--size", "4").CombinedOutput(); err != nil {
		t.Fatalf("aerie pub: %v\n%s", err, pub)
	}
	var got []string
	for l := range lines {
		if !strings.HasPrefix(l, "Client ") && !strings.HasPrefix(l, "Subscribed ") { // -d's own lines
			got = append(got, l)
		}
	}
	if err := msub.Wait(); err != nil {
		t.Fatalf("mosquitto_sub: %v (got %q)", err, got)
	}
	if len(got) != 3 || got[0] != "orders/eu abcd" {
		t.Fatalf("mosquitto_sub printed %q, want 3 lines \"orders/eu abcd\"", got)
	}

	// MQTT 5 user properties, selected by `aerie sub --selector`.
	asub := exec.CommandContext(ctx, bin, "sub", "--connect", cl["s1"], "--wait-for-broker", "60s", "--topic", ">", "--selector", "region = 'EU'", "--count", "2", "--json", "--timeout", "60s")
	stderr, err := asub.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	var stdout strings.Builder
	asub.Stdout = &stdout
	if err := asub.Start(); err != nil {
		t.Fatal(err)
	}
	sc := bufio.NewScanner(stderr)
	for sc.Scan() && !strings.HasPrefix(sc.Text(), "subscribed") {
	}
	go func() {
		for sc.Scan() {
		}
	}()
	h, p = hostPort(mq["p1"])
	for i, region := range []string{"EU", "US", "EU"} {
		qos := []string{"1", "1", "0"}[i] // the last asks its pubend for no ack: delivered all the same
		args := []string{"-h", h, "-p", p, "-V", "mqttv5", "-q", qos, "-t", "sensors/t1", "-m", fmt.Sprint(i), "-D", "publish", "user-property", "region", region}
		if out, err := exec.CommandContext(ctx, "mosquitto_pub", args...).CombinedOutput(); err != nil {
			t.Fatalf("mosquitto_pub: %v\n%s", err, out)
		}
	}
	if err := asub.Wait(); err != nil {
		t.Fatalf("aerie sub: %v\n%s", err, stdout.String())
	}
	var evs []struct {
		Topic   string
		Props   map[string]any
		Payload string
	}
	for l := range strings.Lines(stdout.String()) {
		var ev struct {
			Topic   string
			Props   map[string]any
			Payload string
		}
		if err := json.Unmarshal([]byte(l), &ev); err != nil {
			t.Fatalf("aerie sub --json: %v: %q", err, l)
		}
		evs = append(evs, ev)
	}
	if len(evs) != 2 || evs[0].Payload != "0" || evs[1].Payload != "2" {
		t.Fatalf("aerie sub got %+v, want the two EU messages 0 and 2", evs)
	}
	for _, ev := range evs {
		if ev.Topic != "sensors.t1" || ev.Props["region"] != "EU" {
			t.Fatalf("aerie sub got %+v", ev)
		}
	}
}

// TestMQTTKill9SHB: an MQTT QoS 1 subscriber at the SHB, an MQTT QoS 1
// publisher at the PHB. The SHB is killed with kill -9 and restarted; the
// subscriber (paho, reconnecting on its own) subscribes again. It has
// every message published before the kill and after its new SUBACK, each
// once and in order; the messages published while it was away are not
// owed to it (no persistent session, docs/MQTT.md). Every publish was
// acknowledged.
func TestMQTTKill9SHB(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs processes")
	}
	_, procs, mq, _ := mqttNet(t)
	var mu sync.Mutex
	var got []int
	more := make(chan struct{}, 1)
	resubscribed := make(chan struct{}, 10)
	onMsg := func(_ paho.Client, m paho.Message) {
		i, err := strconv.Atoi(string(m.Payload()))
		if err != nil {
			t.Errorf("payload %q", m.Payload())
			return
		}
		mu.Lock()
		got = append(got, i)
		mu.Unlock()
		select {
		case more <- struct{}{}:
		default:
		}
	}
	opts := paho.NewClientOptions().AddBroker("tcp://" + mq["s1"]).SetClientID("kill9-sub").SetCleanSession(true).
		SetAutoReconnect(true).SetMaxReconnectInterval(200 * time.Millisecond).SetConnectTimeout(5 * time.Second).
		SetOnConnectHandler(func(c paho.Client) {
			// Each (re)connection subscribes again; tell the test once
			// the SUBACK is in.
			go func() {
				tok := c.Subscribe("seq/#", 1, onMsg)
				if tok.WaitTimeout(30*time.Second) && tok.Error() == nil {
					resubscribed <- struct{}{}
				}
			}()
		})
	sub := paho.NewClient(opts)
	if tok := sub.Connect(); !tok.WaitTimeout(20*time.Second) || tok.Error() != nil {
		t.Fatalf("connect: %v", tok.Error())
	}
	defer sub.Disconnect(100)
	waitSignal := func(ch chan struct{}, what string) {
		select {
		case <-ch:
		case <-time.After(60 * time.Second):
			t.Fatalf("timed out waiting for %s", what)
		}
	}
	waitSignal(resubscribed, "the first SUBACK")
	pubOpts := paho.NewClientOptions().AddBroker("tcp://" + mq["p1"]).SetClientID("kill9-pub").SetCleanSession(true).SetAutoReconnect(false)
	pub := paho.NewClient(pubOpts)
	if tok := pub.Connect(); !tok.WaitTimeout(20*time.Second) || tok.Error() != nil {
		t.Fatalf("connect publisher: %v", tok.Error())
	}
	defer pub.Disconnect(100)
	publish := func(from, to int) {
		for i := from; i <= to; i++ {
			if tok := pub.Publish("seq/x", 1, false, strconv.Itoa(i)); !tok.WaitTimeout(30*time.Second) || tok.Error() != nil {
				t.Fatalf("publish %d not acknowledged: %v", i, tok.Error())
			}
		}
	}
	waitFor := func(last int) {
		for {
			mu.Lock()
			done := len(got) > 0 && got[len(got)-1] >= last
			mu.Unlock()
			if done {
				return
			}
			waitSignal(more, fmt.Sprintf("message %d", last))
		}
	}
	publish(1, 200)
	waitFor(200)
	procs.kill("s1")
	publish(201, 300) // durable at the PHB; the SHB is down
	procs.start("s1")
	waitSignal(resubscribed, "the SUBACK after the restart")
	publish(301, 500)
	waitFor(500)

	mu.Lock()
	defer mu.Unlock()
	seen := map[int]bool{}
	for k, i := range got {
		if seen[i] || (k > 0 && i <= got[k-1]) {
			t.Fatalf("message %d arrived twice or out of order: %v", i, got)
		}
		seen[i] = true
	}
	for i := 1; i <= 500; i++ {
		if !seen[i] && (i <= 200 || i > 300) {
			t.Fatalf("message %d never arrived", i)
		}
	}
}
