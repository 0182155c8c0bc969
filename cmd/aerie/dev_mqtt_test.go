package main

import (
	"bufio"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	paho "github.com/eclipse/paho.mqtt.golang"
)

// TestDevMQTT: `aerie dev --mqtt` gives every broker an MQTT listener and
// prints its address; an MQTT subscriber at an SHB gets what an MQTT
// publisher at the PHB publishes at QoS 2.
func TestDevMQTT(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs a process")
	}
	f := newProcFixture(t)
	base := f.port()
	cmd := exec.Command(f.bin, "dev", "--mqtt", "--dir", t.TempDir(), "--http", "", "--base-port", strconv.Itoa(base))
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = cmd.Stdout
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = cmd.Process.Signal(syscall.SIGINT)
		_ = cmd.Wait()
	})
	mqttAddr := map[string]string{}
	sc := bufio.NewScanner(out)
	var printed []string
	for sc.Scan() {
		l := sc.Text()
		printed = append(printed, l)
		if fs := strings.Fields(l); len(fs) == 3 && fs[1] == "mqtt" {
			mqttAddr[fs[0]] = fs[2]
		}
		if strings.Contains(l, "mosquitto_pub") {
			break
		}
	}
	go func() {
		for sc.Scan() {
		}
	}()
	if len(mqttAddr) != 4 || mqttAddr["p1"] == "" || mqttAddr["s2"] == "" {
		t.Fatalf("aerie dev --mqtt printed MQTT ports %v; output:\n%s", mqttAddr, strings.Join(printed, "\n"))
	}
	connect := func(id, addr string) paho.Client {
		c := paho.NewClient(paho.NewClientOptions().AddBroker("tcp://" + addr).SetClientID(id).
			SetAutoReconnect(false).SetConnectTimeout(10 * time.Second))
		if tok := c.Connect(); !tok.WaitTimeout(20*time.Second) || tok.Error() != nil {
			t.Fatalf("%s at %s: %v", id, addr, tok.Error())
		}
		t.Cleanup(func() { c.Disconnect(100) })
		return c
	}
	got := make(chan string, 10)
	sub := connect("dev-sub", mqttAddr["s2"])
	if tok := sub.Subscribe("orders/#", 2, func(_ paho.Client, m paho.Message) { got <- m.Topic() + " " + string(m.Payload()) }); !tok.WaitTimeout(20*time.Second) || tok.Error() != nil {
		t.Fatalf("subscribe: %v", tok.Error())
	}
	pub := connect("dev-pub", mqttAddr["p1"])
	if tok := pub.Publish("orders/eu", 2, false, "hello"); !tok.WaitTimeout(20*time.Second) || tok.Error() != nil {
		t.Fatalf("publish: %v", tok.Error())
	}
	select {
	case m := <-got:
		if m != "orders/eu hello" {
			t.Fatalf("got %q", m)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("the subscriber at s2 got nothing")
	}
}
