package mlist

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/hashicorp/memberlist"

	"github.com/aerie-mq/aerie/internal/member"
)

// ScaleOptions configures Scale.
type ScaleOptions struct {
	// N members start at once (default 100).
	N int
	// Seeds: how many of the first members serve as seeds (default 3).
	Seeds int
	// Timeout bounds each phase (default 60 s).
	Timeout time.Duration

	// Timing is the memberlist profile (nil: LoopbackTiming).
	Timing func() *memberlist.Config
}

// ScaleReport is what Scale measured.
type ScaleReport struct {
	N int
	// Form: from starting all N members at once until every one of them
	// has installed the same view of all N.
	Form time.Duration
	// Detect: from killing one member (no leave) until every other member
	// has installed a view without it.
	Detect time.Duration
	// DetectFirst: until the first member installed such a view (the
	// elder, normally).
	DetectFirst time.Duration
	// Admit: from starting a new member until every member has installed
	// a view with it.
	Admit time.Duration
	// ViewID is the id of the last view.
	ViewID uint64
}

func (r ScaleReport) String() string {
	return fmt.Sprintf("N=%d form=%v detect(first)=%v detect(all)=%v admit=%v last-view=%d",
		r.N, r.Form.Round(time.Millisecond), r.DetectFirst.Round(time.Millisecond),
		r.Detect.Round(time.Millisecond), r.Admit.Round(time.Millisecond), r.ViewID)
}

// ErrScale: a phase of Scale did not complete.
var ErrScale = errors.New("mlist: scale run failed")

// Scale starts N membership instances on loopback in this process and
// measures the time to form the full view, to detect a crash and to admit a
// joiner (seed 001: Rapid ran out of file descriptors at 71 members on one
// machine; memberlist needs one UDP and one TCP socket per member).
func Scale(ctx context.Context, o ScaleOptions) (ScaleReport, error) {
	if o.N == 0 {
		o.N = 100
	}
	if o.Seeds == 0 {
		o.Seeds = 3
	}
	if o.Timeout == 0 {
		o.Timeout = time.Minute
	}
	c := NewCluster()
	defer c.Close()
	rep := ScaleReport{N: o.N}
	var seeds []string
	create := func(i int, nonce uint64) error {
		b := "m" + strconv.Itoa(i)
		var timing *memberlist.Config
		if o.Timing != nil {
			timing = o.Timing()
		}
		_, err := c.Create(Config{ID: member.ID{Broker: b, BootNonce: nonce}, Seeds: seeds, Timing: timing,
			Meta: member.Meta{Cell: b, Role: "broker"}})
		return err
	}
	// Seeds listen first so that their addresses can go into every config.
	for i := 0; i < o.N; i++ {
		if err := create(i, 1); err != nil {
			return rep, fmt.Errorf("%w: creating member %d: %w", ErrScale, i, err)
		}
		if i < o.Seeds {
			seeds = append(seeds, c.Node("m"+strconv.Itoa(i)).Addr())
		}
	}
	for i := 0; i < o.Seeds; i++ { // the seeds were created before the list was complete
		c.Node("m" + strconv.Itoa(i)).cfg.Seeds = seeds
	}
	start := time.Now()
	for i := 0; i < o.N; i++ {
		c.Start(ctx, "m"+strconv.Itoa(i))
	}
	v, err := waitView(ctx, c, o.Timeout, func(v member.View) bool { return len(v.Members) == o.N })
	if err != nil {
		return rep, fmt.Errorf("%w: forming the view of %d: %w", ErrScale, o.N, err)
	}
	rep.Form = time.Since(start)

	victim := v.Members[len(v.Members)-1].ID
	start = time.Now()
	if err := c.Kill(victim.Broker); err != nil {
		return rep, fmt.Errorf("%w: killing %s: %w", ErrScale, victim, err)
	}
	rep.DetectFirst, rep.Detect, err = waitGone(ctx, c, victim, start, o.Timeout)
	if err != nil {
		return rep, fmt.Errorf("%w: detecting the crash of %s: %w", ErrScale, victim, err)
	}

	start = time.Now()
	if err := create(o.N, 1); err != nil {
		return rep, fmt.Errorf("%w: creating the joiner: %w", ErrScale, err)
	}
	c.Start(ctx, "m"+strconv.Itoa(o.N))
	v, err = waitView(ctx, c, o.Timeout, func(v member.View) bool { return len(v.Members) == o.N })
	if err != nil {
		return rep, fmt.Errorf("%w: admitting a joiner: %w", ErrScale, err)
	}
	rep.Admit = time.Since(start)
	rep.ViewID = v.ID
	return rep, nil
}

// waitView waits until all running members agree on a view satisfying ok.
func waitView(ctx context.Context, c *Cluster, timeout time.Duration, ok func(member.View) bool) (member.View, error) {
	deadline := time.NewTimer(timeout)
	defer deadline.Stop()
	for {
		if v, agreed := c.Agreed(); agreed && ok(v) {
			return v, nil
		}
		select {
		case <-ctx.Done():
			return member.View{}, ctx.Err()
		case <-deadline.C:
			return member.View{}, fmt.Errorf("not within %v", timeout)
		case <-c.Changed():
		}
	}
}

// waitGone waits until every running member installed a view without id;
// it returns how long after start the first and the last did.
func waitGone(ctx context.Context, c *Cluster, id member.ID, start time.Time, timeout time.Duration) (first, all time.Duration, err error) {
	deadline := time.NewTimer(timeout)
	defer deadline.Stop()
	for {
		gone, total := 0, 0
		for _, b := range c.Brokers() {
			total++
			if v, ok := c.Node(b).Current(); ok && !v.Contains(id) {
				gone++
			}
		}
		if gone > 0 && first == 0 {
			first = time.Since(start)
		}
		if gone == total {
			return first, time.Since(start), nil
		}
		select {
		case <-ctx.Done():
			return 0, 0, ctx.Err()
		case <-deadline.C:
			return 0, 0, fmt.Errorf("%d of %d members still list it after %v", total-gone, total, timeout)
		case <-c.Changed():
		}
	}
}
