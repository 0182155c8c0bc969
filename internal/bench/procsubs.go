package bench

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
)

// subsProc is the harness's side of one subscribers' child: it sends the
// child `sub` commands and hands the deliveries it reports to the
// collector's functions (see subsChild for the protocol).
type subsProc struct {
	c *childProc

	mu      sync.Mutex
	waiting map[int]chan error
	fns     map[int]func(Delivery)
	ended   map[int]error
	gone    error // set once the child's stdout ends
}

// newSubsProc starts reading c's reports; wg tracks the reader.
func newSubsProc(c *childProc, wg *sync.WaitGroup) *subsProc {
	s := &subsProc{c: c, waiting: map[int]chan error{}, fns: map[int]func(Delivery){}, ended: map[int]error{}}
	wg.Add(1)
	go func() {
		defer wg.Done()
		s.read()
	}()
	return s
}

// subscribe opens subscriber idx in the child and returns once it is in
// force.
func (s *subsProc) subscribe(ctx context.Context, idx int, f Filter, fn func(Delivery)) (Sub, error) {
	ready := make(chan error, 1)
	s.mu.Lock()
	if s.gone != nil {
		s.mu.Unlock()
		return nil, s.gone
	}
	s.waiting[idx], s.fns[idx] = ready, fn
	keyed := 0
	if f.Keyed {
		keyed = 1
	}
	_, err := fmt.Fprintf(s.c.stdin, "sub %d %d %d\n", idx, keyed, f.Key)
	s.mu.Unlock()
	if err != nil {
		return nil, s.c.failed(fmt.Errorf("subscriber %d: %w", idx, err))
	}
	select {
	case err := <-ready:
		if err != nil {
			return nil, err
		}
		return &procSub{s: s, idx: idx}, nil
	case <-ctx.Done():
		return nil, fmt.Errorf("bench: subscriber %d: %w", idx, ctx.Err())
	}
}

// read dispatches the child's lines until its stdout ends.
func (s *subsProc) read() {
	sc := bufio.NewScanner(s.c.stdout)
	for sc.Scan() {
		s.line(sc.Text())
	}
	err := s.c.failed(errors.New("the subscribers' child stopped"))
	s.mu.Lock()
	s.gone = err
	for idx, ch := range s.waiting {
		ch <- err
		delete(s.waiting, idx)
	}
	s.mu.Unlock()
}

func (s *subsProc) line(l string) {
	kind, rest, _ := strings.Cut(l, " ")
	if kind == "d" {
		s.delivery(rest)
		return
	}
	idxS, text, _ := strings.Cut(rest, " ")
	idx, _ := strconv.Atoi(idxS)
	s.mu.Lock()
	defer s.mu.Unlock()
	switch kind {
	case "ok", "err":
		var err error
		if kind == "err" {
			err = fmt.Errorf("bench: subscriber %d: %s", idx, text)
		}
		if ch := s.waiting[idx]; ch != nil {
			ch <- err
			delete(s.waiting, idx)
		}
	case "end":
		s.ended[idx] = errors.New(text)
	}
}

// delivery parses "IDX PUB SEQ INTENDED RECV" and calls idx's function.
func (s *subsProc) delivery(rest string) {
	var v [5]int64
	for i := range v {
		var f string
		f, rest, _ = strings.Cut(rest, " ")
		v[i], _ = strconv.ParseInt(f, 10, 64)
	}
	s.mu.Lock()
	fn := s.fns[int(v[0])]
	s.mu.Unlock()
	if fn != nil {
		fn(Delivery{Publisher: uint32(v[1]), Seq: uint64(v[2]), Intended: v[3], Recv: v[4]})
	}
}

// procSub is one subscriber in a child; its connection closes with the
// child.
type procSub struct {
	s   *subsProc
	idx int
}

func (p *procSub) Close() error { return nil }

func (p *procSub) Err() error {
	p.s.mu.Lock()
	defer p.s.mu.Unlock()
	if err := p.s.ended[p.idx]; err != nil {
		return err
	}
	return p.s.gone
}
