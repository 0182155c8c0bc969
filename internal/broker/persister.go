package broker

import (
	"runtime"
	"time"

	"github.com/aerie-mq/aerie/internal/gd"
	"github.com/aerie-mq/aerie/internal/lattrace"
	"github.com/aerie-mq/aerie/internal/msg"
	"github.com/aerie-mq/aerie/internal/shell"
	"github.com/aerie-mq/aerie/internal/storage"
)

// The persister goroutine owns the event log (storage.Store) while the
// broker runs: it appends and fsyncs one batch at a time (group commit:
// the shell hands over everything that queued during the previous fsync),
// reads events back for nacks, and trims — none of which blocks the loop.
// Jobs run in the order the loop handed them over; each completion goes
// back to the loop, which reports it to the shell.

// job is one piece of work for the persister.
type job interface {
	run(st *storage.Store) completion
}

// completion is a finished job, reported to the shell on the loop.
type completion interface {
	report(sh *shell.Broker) error
}

type appendJob struct {
	recs  []msg.Record
	stats *diskStats
	hop   int // on the bench's traced path (lattrace), or -1
}

type persisted struct {
	first uint64
	err   error
	recs  []msg.Record // for the bench's latency breakdown (lattrace) only
}

func (j appendJob) run(st *storage.Store) completion {
	first, err := st.Append(j.recs)
	if err == nil {
		// Let the frames the loop just queued leave before the fsync. The
		// loop hands this batch over right after queuing the frames of the
		// last one (knowledge downstream, acks), so the writers it woke
		// wait in this P's run queue behind the persister; a goroutine in
		// fsync keeps its P until the runtime's monitor takes it back (20
		// µs to 10 ms later), and with the other P busy those frames left
		// only after the fsync: 270–290 µs of the p50 at 10 000 msgs/s
		// was the PHB's frame to the IB waiting on the next fsync
		// (docs/bench-history/2026-11-27-latency-breakdown.md).
		runtime.Gosched()
		if j.hop >= 0 {
			markRecs(lattrace.Slot(j.hop, lattrace.FsyncStart), j.recs)
		}
		began := time.Now()
		err = st.Sync()
		j.stats.commit(len(j.recs), time.Since(began))
	}
	if j.hop >= 0 {
		markRecs(lattrace.Slot(j.hop, lattrace.FsyncEnd), j.recs)
		return persisted{first: first, err: err, recs: j.recs}
	}
	return persisted{first: first, err: err}
}

// markRecs marks the events of recs at slot (lattrace).
func markRecs(slot int, recs []msg.Record) {
	now := time.Now().UnixNano()
	for _, r := range recs {
		if r.Event != nil {
			lattrace.MarkAt(slot, r.Event.Payload, now)
		}
	}
}

// markPersisted marks the events of a completed append as taken by the
// loop (lattrace).
func markPersisted(hop int, c completion) {
	if p, ok := c.(persisted); ok {
		markRecs(lattrace.Slot(hop, lattrace.Persisted), p.recs)
	}
}

func (c persisted) report(sh *shell.Broker) error { return sh.Persisted(c.first, c.err) }

type fetchJob struct {
	f    gd.Fetch
	from []uint64
}

type fetched struct{ f gd.Fetched }

func (j fetchJob) run(st *storage.Store) completion {
	evs, err := st.Fetch(j.f.Pubend, j.f.Ranges, j.from)
	return fetched{gd.Fetched{Pubend: j.f.Pubend, Events: evs, Err: err}}
}

func (c fetched) report(sh *shell.Broker) error {
	sh.Fetched(c.f)
	return nil
}

type trimJob struct {
	cut  uint64
	snap []msg.Record
}

type trimmed struct {
	first, dropped uint64
	err            error
}

func (j trimJob) run(st *storage.Store) completion {
	first, dropped, err := st.Trim(j.cut, j.snap)
	return trimmed{first, dropped, err}
}

func (c trimmed) report(sh *shell.Broker) error {
	sh.Trimmed(c.first, c.dropped, c.err)
	return nil
}

func (n *Node) persister() {
	defer n.wg.Done()
	for j := range n.jobs {
		c := j.run(n.store)
		n.disk.logBytes.Store(n.store.Size())
		n.disk.free.Store(diskRoom(n.opts.DataDir))
		n.done <- c
	}
}

// persisterSeam is the shell's Durability: it queues jobs for the
// persister. The shell keeps at most one append and one trim out, and the
// engine one fetch per hosted pubend, so the queue never fills.
type persisterSeam struct{ n *Node }

func (p persisterSeam) Append(recs []msg.Record) {
	if p.n.traceHop >= 0 {
		markRecs(lattrace.Slot(p.n.traceHop, lattrace.Handed), recs)
	}
	p.n.jobs <- appendJob{recs, p.n.disk, p.n.traceHop}
}

func (p persisterSeam) Fetch(f gd.Fetch, from []uint64) { p.n.jobs <- fetchJob{f, from} }

func (p persisterSeam) Trim(cut uint64, snap []msg.Record) { p.n.jobs <- trimJob{cut, snap} }

// ReopenLog: the shell asks it after an append failed for want of room,
// once no append is out (shell.Reopener).
func (p persisterSeam) ReopenLog() { p.n.jobs <- reopenJob{} }

// NoRoom classifies a failed append (shell.Reopener).
func (p persisterSeam) NoRoom(err error) (string, bool) { return storage.NoRoom(err) }

// reopenJob reopens the event log after a failed append (the disk was
// full): storage.Store.Reopen keeps what was durable before the failure.
type reopenJob struct{}

type reopened struct{ err error }

func (reopenJob) run(st *storage.Store) completion { return reopened{st.Reopen()} }

func (c reopened) report(sh *shell.Broker) error { return sh.LogReopened(c.err) }
