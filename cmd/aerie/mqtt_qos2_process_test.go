package main

import (
	"bufio"
	"context"
	"net"
	"os/exec"
	"strings"
	"testing"
	"time"
)

// TestMQTTMosquittoQoS2: mosquitto_pub at QoS 2 at the PHB, mosquitto_sub
// at QoS 2 at the SHB two hops away, with topics MQTT allows and aerie
// words do not (a leading '/', empty levels, a '.' inside a level) and a
// '$' topic, which '#' must not match and '$dev/+' must. Each message
// arrives once, at QoS 2, in order, its topic unchanged.
func TestMQTTMosquittoQoS2(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs processes")
	}
	for _, tool := range []string{"mosquitto_sub", "mosquitto_pub", "stdbuf"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Skipf("%s not found: install Debian's mosquitto-clients (apt-get install -y mosquitto-clients) to run this test", tool)
		}
	}
	_, _, mq, _ := mqttNet(t)
	hostPort := func(a string) (string, string) { h, p, _ := net.SplitHostPort(a); return h, p }
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	h, p := hostPort(mq["s1"])
	msub := exec.CommandContext(ctx, "stdbuf", "-oL", "mosquitto_sub", "-h", h, "-p", p, "-i", "msub2", "-q", "2",
		"-t", "#", "-t", "$dev/+", "-v", "-d", "-C", "4")
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
	for l := range lines {
		if strings.Contains(l, "received SUBACK") {
			break
		}
	}
	h, p = hostPort(mq["p1"])
	want := []string{"/TopicA m1", "$dev/x m2", "a//b/ m3", "v/1.5 m4"}
	for _, w := range want {
		topic, payload, _ := strings.Cut(w, " ")
		args := []string{"-h", h, "-p", p, "-i", "mpub2", "-q", "2", "-t", topic, "-m", payload}
		if out, err := exec.CommandContext(ctx, "mosquitto_pub", args...).CombinedOutput(); err != nil {
			t.Fatalf("mosquitto_pub -q 2 -t %s: %v\n%s", topic, err, out)
		}
	}
	var got []string
	qos2 := 0
	for l := range lines {
		switch {
		case strings.Contains(l, "received PUBLISH (d0, q2"):
			qos2++
		case strings.HasPrefix(l, "Client ") || strings.HasPrefix(l, "Subscribed "): // -d's own lines
		default:
			got = append(got, l)
		}
	}
	if err := msub.Wait(); err != nil {
		t.Fatalf("mosquitto_sub: %v (got %q)", err, got)
	}
	if strings.Join(got, "|") != strings.Join(want, "|") || qos2 != len(want) {
		t.Fatalf("mosquitto_sub printed %q (%d at QoS 2), want %q, each at QoS 2", got, qos2, want)
	}
}

// startMosquittoSub starts mosquitto_sub with args (and -d) and returns
// once its SUBACK is in, with the lines it prints after.
func startMosquittoSub(t *testing.T, ctx context.Context, args ...string) (*exec.Cmd, <-chan string) {
	t.Helper()
	cmd := exec.CommandContext(ctx, "stdbuf", append([]string{"-oL", "mosquitto_sub", "-d"}, args...)...)
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
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
	for l := range lines {
		if strings.Contains(l, "received SUBACK") {
			return cmd, lines
		}
	}
	t.Fatalf("mosquitto_sub %q ended without a SUBACK: %v", args, cmd.Wait())
	return nil, nil
}

// TestMQTTMosquittoWill: a client at the PHB with a will, killed (its
// connection ends without DISCONNECT): the will reaches a subscriber at
// the SHB two hops away, once.
func TestMQTTMosquittoWill(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs processes")
	}
	for _, tool := range []string{"mosquitto_sub", "stdbuf"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Skipf("%s not found: install Debian's mosquitto-clients (apt-get install -y mosquitto-clients) to run this test", tool)
		}
	}
	_, _, mq, _ := mqttNet(t)
	hostPort := func(a string) (string, string) { h, p, _ := net.SplitHostPort(a); return h, p }
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	h, p := hostPort(mq["s1"])
	watcher, lines := startMosquittoSub(t, ctx, "-h", h, "-p", p, "-i", "watcher", "-q", "1", "-t", "status/#", "-v", "-C", "1")
	h, p = hostPort(mq["p1"])
	dev, _ := startMosquittoSub(t, ctx, "-h", h, "-p", p, "-i", "dev1", "-t", "cmd/dev1",
		"--will-topic", "status/dev1", "--will-payload", "offline", "--will-qos", "1")
	if err := dev.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	_ = dev.Wait()
	var got []string
	for l := range lines {
		if !strings.HasPrefix(l, "Client ") && !strings.HasPrefix(l, "Subscribed ") { // -d's own lines
			got = append(got, l)
		}
	}
	if err := watcher.Wait(); err != nil {
		t.Fatalf("mosquitto_sub: %v (got %q)", err, got)
	}
	if len(got) != 1 || got[0] != "status/dev1 offline" {
		t.Fatalf("the watcher got %q, want the will \"status/dev1 offline\"", got)
	}
}

// TestMQTTMosquittoRetained: `mosquitto_pub -r` at a broker, then a new
// `mosquitto_sub` there gets the retained message, flagged retained; an
// empty retained payload clears it.
func TestMQTTMosquittoRetained(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs processes")
	}
	for _, tool := range []string{"mosquitto_sub", "mosquitto_pub", "stdbuf"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Skipf("%s not found: install Debian's mosquitto-clients (apt-get install -y mosquitto-clients) to run this test", tool)
		}
	}
	_, _, mq, _ := mqttNet(t)
	h, p, _ := net.SplitHostPort(mq["p1"])
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	for _, args := range [][]string{{"-t", "state/a", "-m", "on"}, {"-t", "state/b", "-m", "off"}, {"-t", "state/b", "-n"}, {"-t", "state/c", "-m", "last"}} {
		args = append([]string{"-h", h, "-p", p, "-q", "1", "-r"}, args...)
		if out, err := exec.CommandContext(ctx, "mosquitto_pub", args...).CombinedOutput(); err != nil {
			t.Fatalf("mosquitto_pub %q: %v\n%s", args, err, out)
		}
	}
	sub, lines := startMosquittoSub(t, ctx, "-h", h, "-p", p, "-q", "1", "-t", "state/#", "-v", "-C", "2")
	var got []string
	retained := 0
	for l := range lines {
		switch {
		case strings.Contains(l, "received PUBLISH (d0, q1, r1"):
			retained++
		case strings.HasPrefix(l, "Client ") || strings.HasPrefix(l, "Subscribed "):
		default:
			got = append(got, l)
		}
	}
	if err := sub.Wait(); err != nil {
		t.Fatalf("mosquitto_sub: %v (got %q)", err, got)
	}
	if strings.Join(got, "|") != "state/a on|state/c last" || retained != 2 {
		t.Fatalf("mosquitto_sub got %q (%d with the retain flag), want the retained \"state/a on\" and \"state/c last\"", got, retained)
	}
}

// TestMQTTWillKill9: a client with a will at the PHB; the PHB is killed
// with kill -9 and started again: the will, kept on disk while the
// connection was up, is published then, and reaches a subscriber at the
// SHB once.
func TestMQTTWillKill9(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs processes")
	}
	for _, tool := range []string{"mosquitto_sub", "stdbuf"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Skipf("%s not found: install Debian's mosquitto-clients (apt-get install -y mosquitto-clients) to run this test", tool)
		}
	}
	_, procs, mq, _ := mqttNet(t)
	hostPort := func(a string) (string, string) { h, p, _ := net.SplitHostPort(a); return h, p }
	ctx, cancel := context.WithTimeout(context.Background(), 120*time.Second)
	defer cancel()
	h, p := hostPort(mq["s1"])
	watcher, lines := startMosquittoSub(t, ctx, "-h", h, "-p", p, "-i", "watcher9", "-q", "1", "-t", "status/#", "-v", "-C", "1")
	h, p = hostPort(mq["p1"])
	dev, _ := startMosquittoSub(t, ctx, "-h", h, "-p", p, "-i", "dev9", "-t", "cmd/dev9",
		"--will-topic", "status/dev9", "--will-payload", "offline", "--will-qos", "1")
	procs.kill("p1")
	_ = dev.Process.Kill()
	_ = dev.Wait()
	procs.start("p1")
	var got []string
	for l := range lines {
		if !strings.HasPrefix(l, "Client ") && !strings.HasPrefix(l, "Subscribed ") {
			got = append(got, l)
		}
	}
	if err := watcher.Wait(); err != nil {
		t.Fatalf("mosquitto_sub: %v (got %q)", err, got)
	}
	if len(got) != 1 || got[0] != "status/dev9 offline" {
		t.Fatalf("the watcher got %q, want the will \"status/dev9 offline\"", got)
	}
}
