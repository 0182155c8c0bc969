package bench

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"time"

	"github.com/aerie-mq/aerie/internal/proc"
)

// The mosquitto peer's systems: Debian's mosquitto broker as a child
// process, one broker, persistence off (mosquitto writes its persistence
// file every autosave interval, never per message: an acknowledged
// message lives in its memory only), QoS 1 and QoS 2.
const (
	SysMosquitto     = "mosquitto"
	SysMosquittoQoS2 = "mosquitto-qos2"
)

// MosquittoFactories are the mosquitto peer's systems (--peer mosquitto).
func MosquittoFactories() []Factory {
	f := func(sys string) Factory {
		return Factory{System: sys, OneBroker: true, Start: func(ctx context.Context, topo Topology, dir string) (Target, error) {
			if topo.Hops3 {
				return nil, fmt.Errorf("bench: mosquitto runs as one broker only: %w", errUnsupported)
			}
			return startMosquitto(ctx, dir, sys)
		}}
	}
	return []Factory{f(SysMosquitto), f(SysMosquittoQoS2)}
}

// mosquittoPath finds the broker: on PATH, else where Debian installs it
// (/usr/sbin, often not on a user's PATH).
func mosquittoPath() (string, error) {
	if p, err := exec.LookPath("mosquitto"); err == nil {
		return p, nil
	}
	const debian = "/usr/sbin/mosquitto"
	if _, err := os.Stat(debian); err == nil {
		return debian, nil
	}
	return "", errors.New("bench: --peer mosquitto: no mosquitto broker on PATH or at /usr/sbin/mosquitto (Debian: apt-get install mosquitto)")
}

// mosquittoConf: no limit on in-flight or queued messages (as aerie's
// SHB queues for a subscriber here), so a slow subscriber is never
// dropped from; anonymous clients on the loopback listener only.
const mosquittoConf = `listener %d 127.0.0.1
allow_anonymous true
persistence false
max_inflight_messages 0
max_queued_messages 0
max_queued_bytes 0
log_dest none
`

func startMosquitto(ctx context.Context, dir, sys string) (Target, error) {
	bin, err := mosquittoPath()
	if err != nil {
		return nil, err
	}
	var ports proc.Ports
	port, err := ports.Port()
	if err != nil {
		return nil, fmt.Errorf("bench: mosquitto port: %w", err)
	}
	conf := filepath.Join(dir, "mosquitto.conf")
	if err := os.WriteFile(conf, []byte(fmt.Sprintf(mosquittoConf, port)), 0o644); err != nil {
		return nil, fmt.Errorf("bench: mosquitto config: %w", err)
	}
	cmd := exec.Command(bin, "-c", conf)
	out := &tailBuffer{max: 4096}
	cmd.Stdout, cmd.Stderr = out, out
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("bench: starting %s: %w", bin, err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	stop := func() error {
		_ = cmd.Process.Kill()
		<-exited
		return nil
	}
	addr := fmt.Sprintf("127.0.0.1:%d", port)
	if err := waitListening(ctx, addr, exited); err != nil {
		stop()
		return nil, fmt.Errorf("bench: mosquitto on %s: %w (its output: %q)", addr, err, out.String())
	}
	m := &mqttTarget{sys: sys, qos: mqttSystemQoS(sys), pubAddr: addr, subAddr: addr, stop: stop}
	return &mosquittoTarget{mqttTarget: m, pid: cmd.Process.Pid}, nil
}

// mosquittoTarget counts the broker child's CPU with the harness's
// (procCPUer), so its CPU per event is the whole system's as for the
// in-process systems.
type mosquittoTarget struct {
	*mqttTarget
	pid int
}

func (m *mosquittoTarget) ProcCPU() (map[string]time.Duration, error) {
	d, err := procCPU(m.pid)
	if err != nil {
		return nil, fmt.Errorf("bench: mosquitto: %w", err)
	}
	return map[string]time.Duration{"broker": d}, nil
}

// waitListening dials addr until it accepts, the process exits, or 10 s
// pass.
func waitListening(ctx context.Context, addr string, exited <-chan error) error {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	for {
		var d net.Dialer
		c, err := d.DialContext(ctx, "tcp", addr)
		if err == nil {
			return c.Close()
		}
		select {
		case err := <-exited:
			return fmt.Errorf("exited before accepting connections: %v", err)
		case <-ctx.Done():
			return fmt.Errorf("not accepting connections: %w", err)
		case <-tick.C:
		}
	}
}
