package member

import (
	"fmt"
	"time"

	"github.com/aerie-mq/aerie/internal/tick"
)

// Config configures one member's view layer. Zero durations take the
// defaults named beside them.
type Config struct {
	// Self is this member: its incarnation and static metadata.
	Self Member
	// JoinSettle (default 1 s) is how long after its first Step a member
	// that has heard of no live view waits before the member with the
	// smallest name bootstraps one. It must exceed the time the failure
	// detector needs to report concurrently started members to each other
	// (seed join plus gossip): on loopback memberlist joins in a few ms and
	// the adapter retries joins every ≤ 200 ms.
	JoinSettle time.Duration
	// RetransmitInterval (default 250 ms) is how often the elder re-announces
	// its view to members that have not acknowledged it. Views are sent over
	// a reliable stream, so this only matters for a member that was briefly
	// unreachable; short enough that it catches up within one detection
	// period.
	RetransmitInterval time.Duration
	// UnknownGrace (default 5 s) is how long a view member that this
	// member's failure detector has never reported counts as alive. A
	// joiner's detector learns the live members when it joins, but while
	// a large cluster starts, news of every member takes seconds to spread;
	// after the grace the member is taken to have died before we joined.
	UnknownGrace time.Duration
	// ViewBundling (default 0: none) is how long the elder lets changes
	// accumulate before it issues a view: during a concurrent start of N
	// members one view admits many of them instead of N views each sent to
	// every member (JGroups' view bundling). It delays every view change by
	// up to this much plus a TickInterval.
	ViewBundling time.Duration
	// ProbeTimeout (default 250 ms) is how often a member taking over from
	// a dead elder asks again the members that have not answered its probe
	// (a probe or its answer may be lost). It waits for every member until
	// the failure detector declares it dead: issuing without an answer is
	// how a successor reused the id of a view a live member had installed.
	ProbeTimeout time.Duration
	// ForgetAfter (default 1 min) is how long a failed or departed member is
	// remembered after the failure detector reported it: long enough to tell
	// crash from leave in views issued meanwhile, bounded so churn does not
	// grow the state.
	ForgetAfter time.Duration
	// YieldTimeout (default 1 s) bounds how long an elder that yielded to
	// a conflicting elder waits for that elder's view before it issues
	// views again. The rival may never issue one: it may have installed a
	// view of ours that excludes it (the two clusters disagree on which
	// view descends from which) and be waiting to be admitted by us
	// (internal/sim seed 32 found this deadlock). Well above ViewBundling
	// plus ProbeTimeout, so a rival that does take over is not raced.
	YieldTimeout time.Duration
	// TickInterval (default 50 ms) is how often the runtime should Step a
	// Tick. Nothing inside depends on it beyond the resolution of the
	// intervals above.
	TickInterval time.Duration
	// Unfenced (tests only) switches fencing off: the member issues views
	// whatever part of its view it sees, and always reports Quorate while
	// it has a view. The simulator's mutation test uses it to show that its
	// oracle catches a minority that acts as the cluster.
	Unfenced bool
}

func (c Config) withDefaults() Config {
	if c.JoinSettle == 0 {
		c.JoinSettle = time.Second
	}
	if c.RetransmitInterval == 0 {
		c.RetransmitInterval = 250 * time.Millisecond
	}
	if c.UnknownGrace == 0 {
		c.UnknownGrace = 5 * time.Second
	}
	if c.ProbeTimeout == 0 {
		c.ProbeTimeout = 250 * time.Millisecond
	}
	if c.YieldTimeout == 0 {
		c.YieldTimeout = time.Second
	}
	if c.ForgetAfter == 0 {
		c.ForgetAfter = time.Minute
	}
	if c.TickInterval == 0 {
		c.TickInterval = 50 * time.Millisecond
	}
	return c
}

type peerState uint8

const (
	stateAlive peerState = iota + 1
	stateSuspect
	stateFailed
	stateLeft
)

// peer is what the failure detector last said about another member.
type peer struct {
	meta    Meta
	state   peerState
	since   tick.Time
	leaving bool // it said Bye: its death is a leave
}

// Ready is what the member asks its runtime to do.
type Ready struct {
	// Installed: views installed since the last Advance, in id order.
	Installed []Change
	// Excluded: the id of a view that does not contain this member and made
	// it drop its installed view (the elder's failure detector declared it
	// failed); 0 if none. The member waits to be admitted again.
	Excluded uint64
	// Send: messages to other members, in order.
	Send []Envelope
}

// Membership is one member's view layer. It is not safe for concurrent
// use: one goroutine (the adapter's loop, or the simulator) drives it.
type Membership struct {
	cfg  Config
	self Member

	started bool
	start   tick.Time
	now     tick.Time

	fd map[ID]*peer // the failure detector's reports; never contains self
	// newest caches newestAlive; nil when fd's ids or cur's members changed.
	newest map[string]uint64

	listed    map[ID]tick.Time // when each member of cur first appeared in a view here
	cur       View             // the last view installed here (ID 0: none yet)
	installed bool             // false before the first view and after exclusion
	quorate   bool             // installed, and the detector sees a majority of cur (fence.go)
	maxSeen   uint64
	heard     View // the newest view heard of that does not contain self

	// Elder state.
	acked        map[ID]bool
	lastAnnounce tick.Time
	bump         bool      // a conflict this member wins: issue a fresh view
	yieldTo      ID        // a conflicting elder this member yielded to...
	yieldAt      uint64    // ...while its installed view had this id...
	yieldSince   tick.Time // ...since then
	pending      bool      // the elder has seen a change it has not issued yet...
	pendingSince tick.Time // ...since then
	takeoverAt   uint64    // the view id at which this member probed the others
	probeStart   tick.Time
	answered     map[ID]bool

	ready Ready
}

// New returns a member that has installed no view yet.
func New(cfg Config) *Membership {
	cfg = cfg.withDefaults()
	return &Membership{cfg: cfg, self: cfg.Self, fd: map[ID]*peer{}, acked: map[ID]bool{}}
}

// Step feeds one input observed at now. Times must not go backwards.
func (m *Membership) Step(now tick.Time, in Input) error {
	if !m.started {
		m.started, m.start = true, now
	}
	if now > m.now {
		m.now = now
	}
	switch in := in.(type) {
	case Alive:
		m.observe(in.Member.ID, stateAlive, &in.Member.Meta)
	case Suspect:
		m.observe(in.ID, stateSuspect, nil)
	case Failed:
		m.observe(in.ID, stateFailed, nil)
	case Departed:
		m.observe(in.ID, stateLeft, nil)
	case Recv:
		if err := m.recv(in.From, in.Msg); err != nil {
			return err
		}
	case Tick:
		m.forget()
		m.reconcile()
		m.retransmit()
	default:
		return fmt.Errorf("%w: %T", ErrBadInput, in)
	}
	m.reconcile()
	m.updateQuorum(m.newestAlive())
	return nil
}

// HasReady says whether Ready has anything to do.
func (m *Membership) HasReady() bool {
	return len(m.ready.Installed) > 0 || len(m.ready.Send) > 0 || m.ready.Excluded != 0
}

// Ready returns what to do; Advance(rd) must follow.
func (m *Membership) Ready() Ready { return m.ready }

// Advance says rd was acted on.
func (m *Membership) Advance(rd Ready) {
	m.ready.Installed = m.ready.Installed[len(rd.Installed):]
	m.ready.Send = m.ready.Send[len(rd.Send):]
	if m.ready.Excluded == rd.Excluded {
		m.ready.Excluded = 0
	}
	if len(m.ready.Installed) == 0 {
		m.ready.Installed = nil
	}
	if len(m.ready.Send) == 0 {
		m.ready.Send = nil
	}
}

// Self is this member.
func (m *Membership) Self() Member { return m.self }

// View returns the installed view; false before the first one and while
// excluded.
func (m *Membership) View() (View, bool) { return m.cur, m.installed }

// Elder returns the member this one currently takes for the elder: the
// first member of its view that has not failed or left.
func (m *Membership) Elder() (Member, bool) {
	if !m.installed {
		return Member{}, false
	}
	newest := m.newestAlive()
	for _, mem := range m.cur.Members {
		if m.live(mem.ID, newest) {
			return mem, true
		}
	}
	return Member{}, false
}

// IsElder says whether this member is the elder and issues views.
func (m *Membership) IsElder() bool { return m.amElder(m.newestAlive()) }

// Leave tells the other members that this member is leaving gracefully;
// send the resulting Ready before stopping the failure detector.
func (m *Membership) Leave() {
	sent := map[ID]bool{}
	for _, mem := range m.cur.Members {
		sent[mem.ID] = true
		m.send(mem.ID, Message{Kind: Bye})
	}
	for id, p := range m.fd {
		if !sent[id] && (p.state == stateAlive || p.state == stateSuspect) {
			m.send(id, Message{Kind: Bye})
		}
	}
}

// LocalState is what this member offers a joiner that joins through it (the
// failure detector's state exchange): its view, or the view it heard of.
func (m *Membership) LocalState() (View, bool) {
	if m.installed {
		return m.cur, true
	}
	return m.heard, m.heard.ID > 0
}

func (m *Membership) observe(id ID, s peerState, meta *Meta) {
	if id == m.self.ID {
		return // we know we are alive; memberlist refutes suspicion itself
	}
	p := m.fd[id]
	if p == nil {
		p = &peer{}
		m.fd[id] = p
		m.newest = nil
	}
	if meta != nil {
		p.meta = *meta
	}
	if s == stateFailed && p.leaving {
		s = stateLeft
	}
	if p.state != s {
		p.state, p.since = s, m.now
	}
}

// forget drops failed and departed members after ForgetAfter unless the
// installed view still lists them (then the elder has yet to remove them).
func (m *Membership) forget() {
	for id, p := range m.fd {
		gone := p.state == stateFailed || p.state == stateLeft
		if gone && m.now.Sub(p.since) > m.cfg.ForgetAfter && !m.cur.Contains(id) {
			delete(m.fd, id)
			m.newest = nil
		}
	}
}

func (m *Membership) send(to ID, msg Message) {
	if to == m.self.ID {
		return
	}
	m.ready.Send = append(m.ready.Send, Envelope{To: to, Msg: msg})
}

func announce(v View) Message { return Message{Kind: Announce, View: &v} }

func (m *Membership) install(v View) {
	prev := View{}
	if m.cur.ID > 0 {
		prev = m.cur
	}
	newest := m.newestAlive()
	c := diff(prev, v, func(id ID) (left, crashed bool) {
		p := m.fd[id]
		gone := !m.live(id, newest)
		left = p != nil && (p.state == stateLeft || p.leaving && gone)
		return left, !left && gone
	})
	m.ready.Installed = append(m.ready.Installed, c)
	listed := make(map[ID]tick.Time, len(v.Members))
	for _, mem := range v.Members {
		if t, ok := m.listed[mem.ID]; ok {
			listed[mem.ID] = t
		} else {
			listed[mem.ID] = m.now
		}
	}
	m.listed = listed
	m.cur, m.installed = v, true
	m.newest = nil
	if v.ID > m.maxSeen {
		m.maxSeen = v.ID
	}
	m.acked = map[ID]bool{m.self.ID: true}
	m.yieldAt = 0
}
