package ccreal

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"sync"
	"time"

	"github.com/aerie-mq/aerie/internal/broker"
	"github.com/aerie-mq/aerie/internal/faultnet"
)

// pollEvery is the sampling period of /status (the simulator's trace
// samples every 100 ms; four polls a second are plenty for curves
// averaged over a second and cheap for a loaded machine).
const pollEvery = 250 * time.Millisecond

// poller samples p1, b1, s1 and s2 from its own goroutine until stopped.
type poller struct {
	hc     *http.Client
	n      *network
	proxy  *faultnet.Proxy
	began  time.Time
	cancel context.CancelFunc
	done   chan struct{}
	mu     sync.Mutex
	polls  []Poll
}

func startPoller(ctx context.Context, n *network, proxy *faultnet.Proxy, began time.Time) *poller {
	ctx, cancel := context.WithCancel(ctx)
	p := &poller{hc: &http.Client{Timeout: time.Second}, n: n, proxy: proxy, began: began, cancel: cancel, done: make(chan struct{})}
	go p.run(ctx)
	return p
}

func (p *poller) run(ctx context.Context) {
	defer close(p.done)
	t := time.NewTicker(pollEvery)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		s := p.sample()
		p.mu.Lock()
		p.polls = append(p.polls, s)
		p.mu.Unlock()
	}
}

// sample reads the three brokers; one that does not answer leaves its
// fields unknown.
func (p *poller) sample() Poll {
	s := Poll{At: time.Since(p.began), S1Lag: -1, S2Lag: -1}
	_, s.LinkBytes = p.proxy.Forwarded()
	if st, err := p.status("p1"); err == nil {
		s.P1Decreases = st.Stats.RateDecreases
		for _, c := range st.Congestion {
			s.Limit, s.Held, s.Delivered, s.HasCC = c.Limit, c.Held, c.Delivered, true
		}
	}
	if st, err := p.status("b1"); err == nil {
		s.B1ToS2, s.B1Retrans = st.Forwarded["s2"], st.Stats.Retransmissions
	}
	if st, err := p.status("s1"); err == nil {
		s.S1Lag = lag(st)
	}
	if st, err := p.status("s2"); err == nil {
		s.S2Lag, s.S2Nacks, s.S2NackTicks, s.S2UCAs = lag(st), st.Stats.NacksSent, st.Stats.NackTicksSent, st.Stats.UCAsSent
		for _, c := range st.Congestion {
			s.S2Recovering, s.S2Window = c.Recovering, c.NackWindow
		}
	}
	return s
}

// lag is how far the broker's doubt horizon on P1 is behind its clock;
// -1 before its stream has started.
func lag(st broker.Status) time.Duration {
	for _, ss := range st.Streams {
		if ss.Pubend == "P1" && ss.DoubtHorizon > 0 {
			return time.Since(time.UnixMilli(ss.DoubtHorizon.Millis()))
		}
	}
	return -1
}

func (p *poller) status(id string) (broker.Status, error) {
	resp, err := p.hc.Get("http://" + p.n.addrs[id].http + "/status")
	if err != nil {
		return broker.Status{}, fmt.Errorf("ccreal: status of %s: %w", id, err)
	}
	defer resp.Body.Close()
	var sts []broker.Status
	if err := json.NewDecoder(resp.Body).Decode(&sts); err != nil {
		return broker.Status{}, fmt.Errorf("ccreal: status of %s: %w", id, err)
	}
	if len(sts) != 1 {
		return broker.Status{}, errNoStatus
	}
	return sts[0], nil
}

// stop ends the polling and returns the samples.
func (p *poller) stop() []Poll {
	p.cancel()
	<-p.done
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]Poll(nil), p.polls...)
}
