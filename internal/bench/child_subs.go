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
	out  chan string
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
	c := &subsChild{addr: *addr, buf: *buf, out: make(chan string, 4096), log: slog.New(slog.NewTextHandler(io.Discard, nil))}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	written := make(chan error, 1)
	go func() { written <- writeLines(ctx, stdout, c.out) }()
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
		c.send(ctx, fmt.Sprintf("err %d dial %s: %v", idx, c.addr, oneLine(err)))
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
		c.send(ctx, fmt.Sprintf("err %d subscribe: %v", idx, oneLine(err)))
		return
	}
	c.send(ctx, fmt.Sprintf("ok %d", idx))
	for ev := range s.Events() {
		d, err := decodePayload(ev.Payload, time.Now().UnixNano())
		if err != nil {
			continue // not ours
		}
		c.send(ctx, fmt.Sprintf("d %d %d %d %d %d", idx, d.Publisher, d.Seq, d.Intended, d.Recv))
	}
	if err := s.Err(); err != nil {
		c.send(ctx, fmt.Sprintf("end %d %v", idx, oneLine(err)))
	}
}

func (c *subsChild) send(ctx context.Context, line string) {
	select {
	case c.out <- line:
	case <-ctx.Done():
	}
}

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

// writeLines writes lines to w, flushing whenever none is waiting.
func writeLines(ctx context.Context, w io.Writer, lines <-chan string) error {
	bw := bufio.NewWriterSize(w, 64<<10)
	for {
		select {
		case l := <-lines:
			bw.WriteString(l)
			bw.WriteByte('\n')
			if len(lines) == 0 {
				if err := bw.Flush(); err != nil {
					return err
				}
			}
		case <-ctx.Done():
			return bw.Flush()
		}
	}
}

func oneLine(err error) string { return strings.ReplaceAll(err.Error(), "\n", "; ") }
