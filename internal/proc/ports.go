package proc

import (
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"strconv"
	"strings"
)

// Ports hands out loopback ports for configs written before the processes
// that bind them start (real-process tests, the experiment). The usual
// trick, bind :0 and close, races: the kernel hands the same port to the
// next :0 bind or outgoing connection of any process, e.g. a parallel
// test. Ports therefore picks at random *below* the kernel's ephemeral
// range, which the kernel never allocates, checks that TCP and UDP both
// bind (a gossip address needs both), and never returns a port twice. Two
// processes picking the same port in the same instant remain possible but
// rare (about 20 000 candidates). The zero value is ready to use; it is not
// safe for concurrent use.
type Ports struct {
	given map[int]bool
}

// Addr returns "127.0.0.1:port" for a port that was free for TCP and UDP.
func (p *Ports) Addr() (string, error) {
	port, err := p.Port()
	if err != nil {
		return "", err
	}
	return net.JoinHostPort("127.0.0.1", strconv.Itoa(port)), nil
}

// Port returns a port that was free for TCP and UDP on 127.0.0.1.
func (p *Ports) Port() (int, error) {
	if p.given == nil {
		p.given = map[int]bool{}
	}
	lo, hi := 10000, ephemeralLow()
	if hi-lo < 1000 { // an unusual ephemeral range: fall back to the kernel's choice
		return kernelPort()
	}
	for range 200 {
		port := lo + rand.N(hi-lo)
		if p.given[port] || !free(port) {
			continue
		}
		p.given[port] = true
		return port, nil
	}
	return 0, fmt.Errorf("failover: no free loopback port found in [%d, %d)", lo, hi)
}

// free says whether port binds for TCP and UDP on 127.0.0.1 right now.
func free(port int) bool {
	addr := net.JoinHostPort("127.0.0.1", strconv.Itoa(port))
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return false
	}
	defer ln.Close()
	pc, err := net.ListenPacket("udp", addr)
	if err != nil {
		return false
	}
	pc.Close()
	return true
}

// ephemeralLow is the first port of the kernel's ephemeral range (Linux;
// 32768 elsewhere or when unreadable, the common default).
func ephemeralLow() int {
	b, err := os.ReadFile("/proc/sys/net/ipv4/ip_local_port_range")
	if err != nil {
		return 32768
	}
	f := strings.Fields(string(b))
	if len(f) == 0 {
		return 32768
	}
	v, err := strconv.Atoi(f[0])
	if err != nil {
		return 32768
	}
	return v
}

func kernelPort() (int, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, fmt.Errorf("failover: %w", err)
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port, nil
}
