package bench

import (
	"bufio"
	"context"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/aerie-mq/aerie/client"
)

// The subscribers' child holds many subscriber connections to one SHB, so
// that the SHB's process has one descriptor per connection and the harness
// none. Its protocol, one line each way:
//
//	stdin:  sub IDX KEYED KEY       open subscriber IDX (KEYED 1: selector k = KEY)
//	stdout: ok IDX                  it is in force
//	        err IDX MESSAGE         it could not be opened
//	        end IDX MESSAGE         it ended on its own
//	        d IDX PUB SEQ INTENDED RECV   one delivery (Unix ns times)
//
// Stdin's EOF closes every connection and ends the child.
type subsChild struct {
	addr string
	buf  int
	out  *lineQueue
	log  *slog.Logger

	wg      sync.WaitGroup // the subscribers' goroutines
	mu      sync.Mutex
	clients []*client.Client
	closed  bool
}

func runSubsChild(ctx context.Context, args []string, stdin io.Reader, stdout io.Writer) error {
	fs := flag.NewFlagSet("subs", flag.ContinueOnError)
	addr := fs.String("connect", "", "the SHB's client address")
	buf := fs.Int("buffer", 64, "client-side event buffer per subscription")
	if err := fs.Parse(args); err != nil {
		return err
	}
	c := &subsChild{addr: *addr, buf: *buf, out: newLineQueue(), log: slog.New(slog.NewTextHandler(io.Discard, nil))}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	written := make(chan error, 1)
	go func() { written <- c.out.writeTo(ctx, stdout) }()
	sc := bufio.NewScanner(stdin)
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) != 4 || f[0] != "sub" {
			return fmt.Errorf("unexpected command %q", sc.Text())
		}
		idx, _ := strconv.Atoi(f[1])
		key, _ := strconv.Atoi(f[3])
		c.wg.Add(1)
		go c.subscribe(ctx, idx, Filter{Keyed: f[2] == "1", Key: key})
	}
	cancel()
	c.close()
	<-written
	return sc.Err()
}

// subscribe opens subscriber idx and reports its deliveries until it ends.
func (c *subsChild) subscribe(ctx context.Context, idx int, f Filter) {
	defer c.wg.Done()
	cl, err := client.Dial(ctx, c.addr, client.Options{SubscriptionBuffer: c.buf, Logger: c.log})
	if err != nil {
		c.send(fmt.Sprintf("err %d dial %s: %v", idx, c.addr, oneLine(err)))
		return
	}
	c.mu.Lock()
	closed := c.closed
	if !closed {
		c.clients = append(c.clients, cl)
	}
	c.mu.Unlock()
	if closed {
		cl.Close()
		return
	}
	sel := ""
	if f.Keyed {
		sel = fmt.Sprintf("k = %d", f.Key)
	}
	s, err := cl.SubscribeSelector(ctx, "bench.>", sel)
	if err != nil {
		c.send(fmt.Sprintf("err %d subscribe: %v", idx, oneLine(err)))
		return
	}
	c.send(fmt.Sprintf("ok %d", idx))
	for ev := range s.Events() {
		d, err := decodePayload(ev.Payload, time.Now().UnixNano())
		if err != nil {
			continue // not ours
		}
		c.send(fmt.Sprintf("d %d %d %d %d %d", idx, d.Publisher, d.Seq, d.Intended, d.Recv))
	}
	if err := s.Err(); err != nil {
		c.send(fmt.Sprintf("end %d %v", idx, oneLine(err)))
	}
}

// send queues a line for stdout without ever blocking: a subscription
// held up behind a slow harness would stop reading its connection, and
// the connection's read deadline would then close it.
func (c *subsChild) send(line string) { c.out.push(line) }

// close closes every connection and waits for the subscribers' goroutines.
func (c *subsChild) close() {
	c.mu.Lock()
	cs := c.clients
	c.clients, c.closed = nil, true
	c.mu.Unlock()
	for _, cl := range cs {
		cl.Close()
	}
	c.wg.Wait()
}

// lineQueue is an unbounded queue of lines with one writer.
type lineQueue struct {
	mu    sync.Mutex
	lines []string
	more  chan struct{}
}

func newLineQueue() *lineQueue { return &lineQueue{more: make(chan struct{}, 1)} }

func (q *lineQueue) push(l string) {
	q.mu.Lock()
	q.lines = append(q.lines, l)
	q.mu.Unlock()
	select {
	case q.more <- struct{}{}:
	default:
	}
}

func (q *lineQueue) take() []string {
	q.mu.Lock()
	defer q.mu.Unlock()
	ls := q.lines
	q.lines = nil
	return ls
}

// writeTo writes the queued lines to w as they come, in batches, until
// ctx ends, then what is left.
func (q *lineQueue) writeTo(ctx context.Context, w io.Writer) error {
	bw := bufio.NewWriterSize(w, 64<<10)
	for {
		done := false
		select {
		case <-q.more:
		case <-ctx.Done():
			done = true
		}
		for _, l := range q.take() {
			bw.WriteString(l)
			bw.WriteByte('\n')
		}
		if err := bw.Flush(); err != nil || done {
			return err
		}
	}
}

func oneLine(err error) string { return strings.ReplaceAll(err.Error(), "\n", "; ") }
