package mlist

import (
	"context"
	"sync"

	"github.com/aerie-mq/aerie/internal/member"
)

// sender sends view-layer messages over memberlist's reliable (TCP)
// channel, off the Run loop: a send to a dead member may block up to the
// TCP timeout. Announcements are coalesced per destination (only the newest
// view matters), so a slow host never builds a backlog of stale views; the
// elder's retransmissions cover anything lost.
type sender struct {
	mu       sync.Mutex
	announce map[member.ID][]byte
	other    []envelope
	order    []member.ID // destinations with a pending announcement, FIFO
	wake     chan struct{}
}

func newSender() *sender {
	return &sender{announce: map[member.ID][]byte{}, wake: make(chan struct{}, 1)}
}

func (s *sender) put(to member.ID, kind member.Kind, b []byte) {
	s.mu.Lock()
	if kind == member.Announce {
		if _, ok := s.announce[to]; !ok {
			s.order = append(s.order, to)
		}
		s.announce[to] = b
	} else {
		s.other = append(s.other, envelope{to: to, msg: b})
	}
	s.mu.Unlock()
	s.signal()
}

// next takes one pending message, small ones first, and says whether
// more are pending.
func (s *sender) next() (e envelope, ok, more bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.other) > 0 {
		e, s.other = s.other[0], s.other[1:]
		return e, true, len(s.other) > 0 || len(s.order) > 0
	}
	for len(s.order) > 0 {
		to := s.order[0]
		s.order = s.order[1:]
		if b, ok := s.announce[to]; ok {
			delete(s.announce, to)
			return envelope{to: to, msg: b}, true, len(s.order) > 0
		}
	}
	return envelope{}, false, false
}

func (s *sender) signal() {
	select {
	case s.wake <- struct{}{}:
	default:
	}
}

// senders is how many sends run at once: one slow (dead) destination must
// not hold up the others.
const senders = 4

func (n *Node) sendLoop(ctx context.Context) {
	var wg sync.WaitGroup
	for range senders {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				e, ok, more := n.out.next()
				if !ok {
					select {
					case <-ctx.Done():
						return
					case <-n.out.wake:
						continue
					}
				}
				if more {
					n.out.signal() // another worker may take the rest
				}
				if to := n.d.node(e.to); to != nil {
					_ = n.ml.SendReliable(to, e.msg) // lost: retransmitted by the elder
				}
			}
		}()
	}
	wg.Wait()
}
