package main

import (
	"bufio"
	"bytes"
	"cmp"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aerie-mq/aerie/client"
	"github.com/aerie-mq/aerie/internal/proc"
)

// TestKill9ReplicatedPHBEachMember runs a replicated PHB cell of three
// `aerie broker` processes (default raft_clients, forward) feeding an SHB,
// and two `aerie pub` processes, each given all three members' addresses,
// each publishing 4 000 events at 100/s under its own client id and topic.
// While they publish, every member in turn is SIGKILLed and started again
// with the same config and data directory, the leader of the moment first;
// the next kill waits until the restarted member has caught up with the
// leader's store and both publishers' events are delivered again. Both
// publishers must exit 0 with "published 4000 acked 4000", and the
// subscriber must get every event exactly once, in order per publisher
// (and per pubend tick).
//
// Then a third `aerie pub` publishes and two of the three members are
// killed (the leader among them): while two are down its ack count must
// not move, nothing of it is delivered, and it must say why (the
// survivor's reason, no serving leader); when one member returns,
// publishing resumes, the publisher exits 0 with every event acked, and
// every event is delivered exactly once, in order.
//
// It found a leader that logged a forwarded client's later publishes
// before earlier ones it had refused a moment before, while elected but
// not serving yet (docs/known-issues/forward-reorder.md).
func TestKill9ReplicatedPHBEachMember(t *testing.T) { testEachMember(t, "") }

// TestKill9ReplicatedPHBEachMemberRedirected is the same with members that
// redirect (raft_clients = "redirect"): the publishers reach the leader
// themselves, moving on through their address lists.
func TestKill9ReplicatedPHBEachMemberRedirected(t *testing.T) { testEachMember(t, "redirect") }

// testEachMember runs the scenario with raft_clients = mode ("": the
// default).
func testEachMember(t *testing.T, mode string) {
	if testing.Short() {
		t.Skip("builds and runs processes")
	}
	f := newProcFixture(t)
	if keep := os.Getenv("AERIE_RAFT_LOGS"); keep != "" { // a directory to keep the logs and data in
		f.dir = filepath.Join(keep, cmp.Or(mode, "default"))
		if err := os.MkdirAll(f.dir, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	cell := startReplicatedCell(f, mode)
	ids, https := cell.ids, cell.https
	ctx, cancel := context.WithTimeout(context.Background(), 240*time.Second)
	defer cancel()
	waitLeader(t, ctx, https, "")

	sub, err := f.dial(ctx, cell.shbClients, "sub").Subscribe(ctx, ">")
	if err != nil {
		t.Fatal(err)
	}
	got := collectPublishers(sub)
	addrs := strings.Join([]string{cell.clients["p1"], cell.clients["p2"], cell.clients["p3"]}, ",")

	const count, rate = 4000, 100
	names := []string{"pub-a", "pub-b"}
	pubs := map[string]*pubProc{}
	for _, name := range names {
		pubs[name] = startPubProc(t, ctx, f, name, addrs, "orders."+name, count, rate)
	}
	began := time.Now()

	// Each member in turn, the current leader first.
	var killed []string
	for round := 1; round <= len(ids); round++ {
		for _, name := range names { // mid-stream: a fifth more of each delivered
			got.waitCount(t, ctx, name, round*count/5)
		}
		for _, name := range names {
			if n := got.count(name); n >= count || pubs[name].exited() {
				t.Fatalf("%s had finished (%d delivered) before kill %d: the run does not span the kills", name, n, round)
			}
		}
		current := waitLeader(t, ctx, https, "")
		victim := current // first the leader, then the others in turn
		if round > 1 {
			for _, id := range ids {
				if !slices.Contains(killed, id) {
					victim = id
					break
				}
			}
		}
		killed = append(killed, victim)
		before := map[string]int{}
		for _, name := range names {
			before[name] = got.count(name)
		}
		f.kill(victim)
		at := time.Now()
		next := waitLeader(t, ctx, https, victim)
		t.Logf("kill %d at %v: %s (leader %s); %s serves %v later; delivered %v", round, at.Sub(began).Round(time.Millisecond),
			victim, current, next, time.Since(at).Round(time.Millisecond), before)
		f.start(victim)
		waitCaughtUp(t, ctx, https, victim)
		for _, name := range names { // the cell serves both publishers again
			got.waitCount(t, ctx, name, got.count(name)+50)
		}
		t.Logf("kill %d: %s back and caught up, both publishers delivered again, %v after the kill", round, victim,
			time.Since(at).Round(time.Millisecond))
	}
	for _, name := range names {
		pubs[name].mustAckAll(t, ctx, count)
		got.waitCount(t, ctx, name, count)
		got.inOrder(t, name, count)
	}
	t.Logf("each member killed in turn (%v): %d events of each publisher acked and delivered once, in order, in %v",
		killed, count, time.Since(began).Round(time.Millisecond))

	// Two of three down: no acks, a reason, and publishing resumes when one
	// member returns.
	const name, count2 = "pub-c", 2000
	pc := startPubProc(t, ctx, f, name, addrs, "orders."+name, count2, rate)
	got.waitCount(t, ctx, name, 200)
	current := waitLeader(t, ctx, https, "")
	var others []string
	for _, id := range ids {
		if id != current {
			others = append(others, id)
		}
	}
	errMark := pc.stderrLines()
	f.kill(current)
	f.kill(others[0])
	downAt := time.Now()
	waitNotServing(t, ctx, https[others[1]])
	// Acks of batches committed before the kills have arrived by now (the
	// survivor stopped serving an election timeout after it lost its
	// majority). From the next progress line on the count must stay put
	// while the publisher keeps sending, for three more lines, and the
	// publisher must have said why.
	mark := pc.progressLines()
	frozen := pc.waitProgress(t, ctx, mark+1)
	delivered := got.count(name)
	last := pc.waitProgress(t, ctx, mark+4)
	msgCtx, msgCancel := context.WithTimeout(ctx, 30*time.Second) // a bound, not a synchronisation
	defer msgCancel()
	reason := pc.waitStderr(t, msgCtx, errMark, noLeaderMessage)
	for _, p := range pc.progressSince(mark + 1) {
		if p.acked != frozen.acked {
			t.Fatalf("%s: %d acked, then %d while two of three members were down", name, frozen.acked, p.acked)
		}
	}
	if last.sent <= frozen.sent && last.sent < count2 {
		t.Errorf("%s stopped sending while the cell was down (%d sent, then %d)", name, frozen.sent, last.sent)
	}
	if n := got.count(name); n != delivered {
		t.Fatalf("%s: %d delivered, then %d while two of three members were down", name, delivered, n)
	}
	t.Logf("two members down (%s, %s) for %v: %s held at %d acked (%d sent); it says: %s", current, others[0],
		time.Since(downAt).Round(time.Millisecond), name, frozen.acked, last.sent, reason)
	f.start(others[0])
	back := time.Now()
	next := waitLeader(t, ctx, https, "")
	pc.waitAcked(t, ctx, frozen.acked+1)
	t.Logf("%s back: %s serves, acks resume %v after the restart", others[0], next, time.Since(back).Round(time.Millisecond))
	pc.mustAckAll(t, ctx, count2)
	got.waitCount(t, ctx, name, count2)
	got.inOrder(t, name, count2)
	for _, name := range names { // nothing more of the first two
		got.inOrder(t, name, count)
	}
}

// noLeaderMessage is what a publisher must say while its cell has no
// serving leader: a standby member's reason for closing it.
var noLeaderMessage = regexp.MustCompile(`(does not lead|had no serving leader).*replicated PHB cell|replicated PHB cell .*(no serving leader|try another member)`)

// waitCaughtUp waits until member id answers /status as a voter of its
// first generation (a SIGKILL loses nothing it fsynced, so it must not
// rejoin as a new member) that knows a leader, and its store holds every
// record the serving leader's store held when it was first asked.
func waitCaughtUp(t *testing.T, ctx context.Context, https map[string]string, id string) {
	t.Helper()
	leader := waitLeader(t, ctx, https, id)
	target := memberStatus(t, ctx, https[leader]).Raft.StoreNext
	tk := time.NewTicker(20 * time.Millisecond)
	defer tk.Stop()
	for {
		if st, ok := tryStatus(ctx, https[id]); ok && st.Raft != nil {
			r := st.Raft
			if r.ID > 255 || r.Rejoins > 0 {
				t.Fatalf("%s rejoined as a new member (Raft id %d) after a SIGKILL", id, r.ID)
			}
			if r.Leader != 0 && slices.Contains(r.Voters, r.ID) && r.StoreNext >= target {
				return
			}
		}
		select {
		case <-ctx.Done():
			t.Fatalf("%s never caught up with the leader's store (next %d): %v", id, target, ctx.Err())
		case <-tk.C:
		}
	}
}

// pubCollector records, per publisher (client id), the "seq" property of
// every event a subscription delivers, in order, and the first tick that
// arrives twice or out of order at its pubend.
type pubCollector struct {
	mu    sync.Mutex
	seqs  map[string][]int64
	ticks map[string][]uint64
	at    map[string][]time.Time // arrival times
	last  map[string]uint64      // per pubend
	err   error
}

func collectPublishers(sub *client.Subscription) *pubCollector {
	c := &pubCollector{seqs: map[string][]int64{}, ticks: map[string][]uint64{}, at: map[string][]time.Time{}, last: map[string]uint64{}}
	go func() {
		for ev := range sub.Events() {
			c.mu.Lock()
			if c.err == nil {
				switch seq, ok := ev.Props.Int("seq"); {
				case ev.Gap != nil:
					c.err = fmt.Errorf("gap %+v", *ev.Gap)
				case !ok:
					c.err = fmt.Errorf("%s@%d from %q has no seq", ev.Pubend, ev.Tick, ev.Publisher)
				case ev.Tick <= c.last[ev.Pubend]:
					c.err = fmt.Errorf("%s@%d (%s seq %d) after %d: duplicate or out of order", ev.Pubend, ev.Tick, ev.Publisher, seq, c.last[ev.Pubend])
				default:
					c.last[ev.Pubend] = ev.Tick
					c.seqs[ev.Publisher] = append(c.seqs[ev.Publisher], seq)
					c.ticks[ev.Publisher] = append(c.ticks[ev.Publisher], ev.Tick)
					c.at[ev.Publisher] = append(c.at[ev.Publisher], time.Now())
				}
			}
			c.mu.Unlock()
		}
		c.mu.Lock()
		if c.err == nil {
			c.err = fmt.Errorf("the subscription ended: %v", sub.Err())
		}
		c.mu.Unlock()
	}()
	return c
}

// maxGap returns the longest time between two consecutive deliveries of
// pub's events, the later one at or after from.
func (c *pubCollector) maxGap(pub string, from time.Time) time.Duration {
	c.mu.Lock()
	defer c.mu.Unlock()
	var out time.Duration
	at := c.at[pub]
	for i := 1; i < len(at); i++ {
		if !at[i].Before(from) {
			out = max(out, at[i].Sub(at[i-1]))
		}
	}
	return out
}

func (c *pubCollector) count(pub string) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.seqs[pub])
}

// waitCount waits until n events of pub have arrived.
func (c *pubCollector) waitCount(t *testing.T, ctx context.Context, pub string, n int) {
	t.Helper()
	tk := time.NewTicker(20 * time.Millisecond)
	defer tk.Stop()
	for {
		c.mu.Lock()
		have, err := len(c.seqs[pub]), c.err
		c.mu.Unlock()
		if err != nil {
			t.Fatal(err)
		}
		if have >= n {
			return
		}
		select {
		case <-ctx.Done():
			t.Fatalf("the subscriber got %d of %d events of %s", have, n, pub)
		case <-tk.C:
		}
	}
}

// inOrder fails the test unless pub's events are exactly seq 1, 2, … n,
// each once, in publish order.
func (c *pubCollector) inOrder(t *testing.T, pub string, n int) {
	t.Helper()
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.err != nil {
		t.Fatal(c.err)
	}
	seqs := c.seqs[pub]
	for i, seq := range seqs {
		if seq != int64(i+1) {
			t.Fatalf("%s: event %d has seq %d (tick %d, after %d): want every event once, in publish order; delivered seqs %s",
				pub, i+1, seq, c.ticks[pub][i], c.ticks[pub][max(i-1, 0)], runs(seqs))
		}
	}
	if len(seqs) != n {
		t.Fatalf("%s: %d events delivered, want %d", pub, len(seqs), n)
	}
}

// runs writes seqs as ascending runs: "1-200 854-2000 201-853".
func runs(seqs []int64) string {
	var b strings.Builder
	for i := 0; i < len(seqs); {
		j := i
		for j+1 < len(seqs) && seqs[j+1] == seqs[j]+1 {
			j++
		}
		fmt.Fprintf(&b, " %d-%d", seqs[i], seqs[j])
		i = j + 1
	}
	return strings.TrimSpace(b.String())
}

// pubProc is an `aerie pub` process: its stdout, its stderr lines (also
// in DIR/<name>.pub.log) and the progress lines among them.
type pubProc struct {
	name   string
	cmd    *exec.Cmd
	stdout bytes.Buffer // read once done is closed
	done   chan struct{}
	err    error // cmd.Wait's, once done is closed

	mu       sync.Mutex
	stderr   []string
	progress []pubProgress
}

type pubProgress struct{ sent, acked int }

var progressLine = regexp.MustCompile(`^pub: (\d+) sent (\d+) acked`)

func startPubProc(t *testing.T, ctx context.Context, f *procFixture, name, addrs, topic string, count, rate int) *pubProc {
	t.Helper()
	p := &pubProc{name: name, done: make(chan struct{})}
	p.cmd = exec.CommandContext(ctx, f.bin, "pub", "--connect", addrs, "--wait-for-broker", "60s", "--id", name, "--topic", topic,
		"--count", strconv.Itoa(count), "--rate", strconv.Itoa(rate), "--timeout", "2m")
	p.cmd.SysProcAttr = proc.Attr()
	p.cmd.Stdout = &p.stdout
	errPipe, err := p.cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	logf, err := os.Create(filepath.Join(f.dir, name+".pub.log"))
	if err != nil {
		t.Fatal(err)
	}
	if err := p.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	read := make(chan struct{})
	go func() {
		defer close(read)
		defer logf.Close()
		sc := bufio.NewScanner(errPipe)
		for sc.Scan() {
			line := sc.Text()
			fmt.Fprintln(logf, line)
			p.mu.Lock()
			p.stderr = append(p.stderr, line)
			if m := progressLine.FindStringSubmatch(line); m != nil {
				sent, _ := strconv.Atoi(m[1])
				acked, _ := strconv.Atoi(m[2])
				p.progress = append(p.progress, pubProgress{sent, acked})
			}
			p.mu.Unlock()
		}
	}()
	go func() {
		<-read // Wait closes the pipe: read it to the end first
		p.err = p.cmd.Wait()
		close(p.done)
	}()
	t.Cleanup(func() {
		p.cmd.Process.Kill()
		<-p.done
	})
	return p
}

func (p *pubProc) exited() bool {
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}

func (p *pubProc) progressLines() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return len(p.progress)
}

func (p *pubProc) progressSince(i int) []pubProgress {
	p.mu.Lock()
	defer p.mu.Unlock()
	return slices.Clone(p.progress[i:])
}

// poll calls cond under p.mu every 20 ms until it holds, failing with
// what when ctx ends or the process exits first.
func (p *pubProc) poll(t *testing.T, ctx context.Context, what string, cond func() bool) {
	t.Helper()
	tk := time.NewTicker(20 * time.Millisecond)
	defer tk.Stop()
	for {
		p.mu.Lock()
		ok := cond()
		p.mu.Unlock()
		if ok {
			return
		}
		select {
		case <-ctx.Done():
			t.Fatalf("%s: waiting for %s: %v\n%s", p.name, what, ctx.Err(), p.tail())
		case <-p.done:
			p.mu.Lock()
			ok := cond()
			p.mu.Unlock()
			if !ok {
				t.Fatalf("%s exited (%v) while waiting for %s:\n%s%s", p.name, p.err, what, p.stdout.String(), p.tail())
			}
			return
		case <-tk.C:
		}
	}
}

// waitProgress waits for progress line n (1-based) and returns it.
func (p *pubProc) waitProgress(t *testing.T, ctx context.Context, n int) pubProgress {
	t.Helper()
	p.poll(t, ctx, fmt.Sprintf("progress line %d", n), func() bool { return len(p.progress) >= n })
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.progress[n-1]
}

// waitAcked waits for a progress line with at least n acked.
func (p *pubProc) waitAcked(t *testing.T, ctx context.Context, n int) {
	t.Helper()
	p.poll(t, ctx, fmt.Sprintf("%d acked", n), func() bool {
		return len(p.progress) > 0 && p.progress[len(p.progress)-1].acked >= n
	})
}

func (p *pubProc) stderrLines() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return len(p.stderr)
}

// waitStderr waits for a stderr line after the first from that matches
// re and returns it.
func (p *pubProc) waitStderr(t *testing.T, ctx context.Context, from int, re *regexp.Regexp) string {
	t.Helper()
	var line string
	p.poll(t, ctx, fmt.Sprintf("a line matching %q", re), func() bool {
		for _, l := range p.stderr[from:] {
			if re.MatchString(l) {
				line = l
				return true
			}
		}
		return false
	})
	return line
}

// tail is the last stderr lines, for a failure.
func (p *pubProc) tail() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return strings.Join(p.stderr[max(0, len(p.stderr)-20):], "\n")
}

// mustAckAll waits for the process to exit and fails the test unless it
// exited 0 with every one of count events acknowledged.
func (p *pubProc) mustAckAll(t *testing.T, ctx context.Context, count int) {
	t.Helper()
	select {
	case <-p.done:
	case <-ctx.Done():
		t.Fatalf("%s did not exit: %v\n%s", p.name, ctx.Err(), p.tail())
	}
	out := p.stdout.String()
	if p.err != nil || !strings.Contains(out, fmt.Sprintf("published %d acked %d ", count, count)) {
		t.Fatalf("%s: %v, want exit 0 and every event acked:\n%s%s", p.name, p.err, out, p.tail())
	}
	t.Logf("%s: %s", p.name, strings.TrimSpace(out))
}
