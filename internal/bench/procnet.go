package bench

import (
	"bufio"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"path/filepath"
	"sync"
	"time"

	"github.com/aerie-mq/aerie/client"
	"github.com/aerie-mq/aerie/internal/msg"
)

// subsPerChild is how many subscriber connections one subscribers' child
// holds: 16 000 take four, each well inside a 20 000 open-file limit.
const subsPerChild = 4000

// AerieProcsFactory starts the same networks as AerieFactory (or, with
// bestEffort, AerieBestEffortFactory) with each broker in its own child
// process and the subscribers in others (exe bench-child), so each
// broker's CPU time is its own and the SHB holds one descriptor per
// subscriber connection. The publisher stays in the harness.
//
// With profile set, each broker writes its CPU profile to profile.<role>
// (phb, ib, shb or broker; each run overwrites the last), and under best
// effort to profile.be.<role>, so the two modes' profiles can be compared
// (go tool pprof -diff_base).
func AerieProcsFactory(exe, profile string, bestEffort bool) Factory {
	sys := SysAerie
	if bestEffort {
		sys = SysAerieBestEffort
		if profile != "" {
			profile += ".be"
		}
	}
	return Factory{System: sys, Durable: !bestEffort, Start: func(ctx context.Context, topo Topology, dir string) (Target, error) {
		return startProcNet(ctx, exe, profile, topo, dir, bestEffort)
	}}
}

// procNet is one separate-process network. It owns its children and the
// goroutines that read them.
type procNet struct {
	sys     string
	be      bool
	noAck   bool // Topology.NoAck, under best effort
	exe     string
	profile string
	subBuf  int
	pubAddr string
	subAddr string
	log     *slog.Logger

	brokers []*childProc // named by role: phb, ib, shb (or broker)
	wg      sync.WaitGroup

	mu      sync.Mutex
	subs    []*subsProc
	nsubs   int
	clients []*client.Client
}

func startProcNet(ctx context.Context, exe, profile string, topo Topology, dir string, bestEffort bool) (Target, error) {
	sys := SysAerie
	if bestEffort {
		sys = SysAerieBestEffort
	}
	n := &procNet{sys: sys, be: bestEffort, noAck: bestEffort && topo.NoAck, exe: exe, profile: profile, subBuf: cmp.Or(topo.SubBuffer, 16384),
		log: slog.New(slog.NewTextHandler(io.Discard, nil))}
	if topo.Cuttable || topo.Counted {
		return nil, fmt.Errorf("separate processes have no proxy on the SHB's link: %w", errUnsupported)
	}
	if !topo.Hops3 {
		a, err := n.startBroker(ctx, "broker", brokerSpec{ID: "p1", Routes: routes(""), Clients: true,
			DataDir: filepath.Join(dir, "p1"), SubscriberQueue: 1 << 20})
		if err != nil {
			return nil, n.closeWith(err)
		}
		n.pubAddr, n.subAddr = a.Clients, a.Clients
		return n, nil
	}
	p1, err := n.startBroker(ctx, "phb", brokerSpec{ID: "p1", Routes: routes("", "b1"), Clients: true, DataDir: filepath.Join(dir, "p1")})
	if err != nil {
		return nil, n.closeWith(err)
	}
	b1, err := n.startBroker(ctx, "ib", brokerSpec{ID: "b1", Routes: routes("p1", "s1"), Upstreams: map[msg.NodeID]string{"p1": p1.Broker}})
	if err != nil {
		return nil, n.closeWith(err)
	}
	s1, err := n.startBroker(ctx, "shb", brokerSpec{ID: "s1", Routes: routes("b1"), Clients: true,
		Upstreams: map[msg.NodeID]string{"b1": b1.Broker}, SubscriberQueue: 1 << 20})
	if err != nil {
		return nil, n.closeWith(err)
	}
	n.pubAddr, n.subAddr = p1.Clients, s1.Clients
	return n, nil
}

// startBroker starts a broker child as role and waits for its addresses.
func (n *procNet) startBroker(ctx context.Context, role string, spec brokerSpec) (brokerAddrs, error) {
	spec.BestEffort = n.be
	js, err := json.Marshal(spec)
	if err != nil {
		return brokerAddrs{}, fmt.Errorf("bench: broker %s: %w", spec.ID, err)
	}
	args := []string{"broker", "--spec", string(js)}
	if n.profile != "" {
		args = append(args, "--cpuprofile", n.profile+"."+role)
	}
	c, err := startChild(n.exe, role, args...)
	if err != nil {
		return brokerAddrs{}, err
	}
	n.brokers = append(n.brokers, c)
	got := make(chan brokerAddrs, 1)
	n.wg.Add(1)
	go func() {
		defer n.wg.Done()
		sc := bufio.NewScanner(c.stdout)
		if sc.Scan() {
			var a brokerAddrs
			if json.Unmarshal(sc.Bytes(), &a) == nil {
				got <- a
			}
		}
		io.Copy(io.Discard, c.stdout)
	}()
	select {
	case a := <-got:
		return a, nil
	case <-c.done:
		return brokerAddrs{}, c.failed(errors.New("exited while starting"))
	case <-ctx.Done():
		return brokerAddrs{}, ctx.Err()
	}
}

func (n *procNet) System() string { return n.sys }
func (n *procNet) Durable() bool  { return !n.be }

func (n *procNet) Publisher(ctx context.Context, idx int) (Publisher, error) {
	c, err := client.Dial(ctx, n.pubAddr, client.Options{ID: fmt.Sprintf("bench-pub-%d", idx),
		Pubend: string(benchPubends[idx%len(benchPubends)]), MaxInflight: aerieWindow, Logger: n.log})
	if err != nil {
		return nil, fmt.Errorf("bench: dial %s: %w", n.pubAddr, err)
	}
	n.mu.Lock()
	n.clients = append(n.clients, c)
	n.mu.Unlock()
	return newAeriePub(c, idx, n.noAck), nil
}

// Subscribe opens the next subscriber in a subscribers' child, starting
// one for every subsPerChild.
func (n *procNet) Subscribe(ctx context.Context, f Filter, fn func(Delivery)) (Sub, error) {
	n.mu.Lock()
	i := n.nsubs
	n.nsubs++
	if i/subsPerChild >= len(n.subs) {
		c, err := startChild(n.exe, fmt.Sprintf("subscribers %d", len(n.subs)+1), "subs", "--connect", n.subAddr, "--buffer", fmt.Sprint(n.subBuf))
		if err != nil {
			n.mu.Unlock()
			return nil, err
		}
		n.subs = append(n.subs, newSubsProc(c, &n.wg))
	}
	sp := n.subs[i/subsPerChild]
	n.mu.Unlock()
	return sp.subscribe(ctx, i, f, fn)
}

func (n *procNet) Outage(bool) error {
	return fmt.Errorf("separate processes cannot cut a link: %w", errUnsupported)
}

// ProcCPU is the CPU time so far of each broker (by role) and of the
// subscribers' children together.
func (n *procNet) ProcCPU() (map[string]time.Duration, error) {
	out := map[string]time.Duration{}
	for _, b := range n.brokers {
		d, err := b.cpu()
		if err != nil {
			return nil, err
		}
		out[b.name] = d
	}
	n.mu.Lock()
	subs := n.subs
	n.mu.Unlock()
	for _, s := range subs {
		d, err := s.c.cpu()
		if err != nil {
			return nil, err
		}
		out["subscribers"] += d
	}
	return out, nil
}

func (n *procNet) closeWith(err error) error {
	n.Close()
	return err
}

// Close closes the publishers, stops the subscribers' children, then the
// brokers, and waits for every reader.
func (n *procNet) Close() error {
	n.mu.Lock()
	cs, subs := n.clients, n.subs
	n.clients, n.subs = nil, nil
	n.mu.Unlock()
	for _, c := range cs {
		c.Close()
	}
	for _, s := range subs {
		s.c.stop(5 * time.Second)
	}
	var errs []error
	for i := len(n.brokers) - 1; i >= 0; i-- {
		b := n.brokers[i]
		select {
		case <-b.done:
			errs = append(errs, b.failed(errors.New("exited during the run")))
		default:
		}
		b.stop(5 * time.Second)
	}
	n.wg.Wait()
	return errors.Join(errs...)
}
