package msg

import (
	"fmt"
	"strings"

	"github.com/aerie-mq/aerie/internal/tick"
)

// Record is what a pubend persists. An Event record logs one publish; a HWM
// record raises the high-water mark that bounds every announced silence
// (docs/CONCEPTS.md P2): after a restart the pubend allocates above it.
//
// A Meta record summarises a pubend at a point of its log: it is what a
// snapshot holds, so that log segments below the release point can be
// dropped without losing the high-water mark or publisher deduplication.
//
// A Durable record is not about a pubend (Pubend is empty): it is an SHB's
// state of one durable subscription. Records of every kind share one log
// per broker, whatever its role.
type Record struct {
	Pubend  PubendID
	Event   *Event         // an event record
	Meta    *PubendMeta    // a metadata record
	Filter  *FilterVersion // a filter-version record
	Durable *DurableSub    // a durable subscription's state at its SHB
	HWM     tick.Tick      // a HWM record (when the others are nil)
}

// DurableSub is what an SHB keeps durably for one durable subscription
// (Gryphon DS, DSN 2003 §4.1): its clause, and released(s,p) — the
// checkpoint token its subscriber last acknowledged — from which the SHB's
// release floor is the minimum (§3). A later record for the same Name
// replaces an earlier one; Deleted ends the subscription.
type DurableSub struct {
	Name              string
	Pattern, Selector string
	Released          Token
	Deleted           bool
}

// FilterVersion is one version of a pubend's filter edge towards cell Down:
// from tick From on the edge passes the union of the clauses (All: every
// event). Reset forgets every earlier version (the downstream restarted).
// A pubend logs each version before any event it filters is announced, so
// that after a crash it renders every old tick exactly as before (an S it
// sent is never contradicted by a D: docs/CONCEPTS.md I7). Member and Inc record
// the downstream broker whose summary or restart caused the version, and
// its incarnation, so that a restarted pubend recognises a reconnection.
type FilterVersion struct {
	Down      NodeID
	From      tick.Tick
	Reset     bool
	All       bool
	Patterns  []string
	Selectors []string // "" where a clause has no selector
	// Delta: Patterns and Selectors are the clauses added to the previous
	// version of the same pubend towards Down, and Remove those taken from
	// it (a large edge logs what changed, not the whole union again).
	Delta  bool
	Remove []Clause
	Member NodeID
	Inc    uint64
	Seq    uint64 // the pubend's version number: restore skips what it has
}

// PubendMeta is a pubend's durable state apart from its events: every tick
// up to HWM is decided, every tick up to Final is released (L), and Dedup
// lists the publisher sequence numbers remembered for idempotent retries.
type PubendMeta struct {
	HWM, Final tick.Tick
	Dedup      []DedupEntry
}

// DedupEntry: publish (Publisher, Seq) was logged at Tick.
type DedupEntry struct {
	Publisher string
	Seq       uint64
	Tick      tick.Tick
}

func (r Record) String() string {
	if r.Event != nil {
		return fmt.Sprintf("Rec{%v}", r.Event)
	}
	if r.Meta != nil {
		return fmt.Sprintf("Rec{%s meta HWM=%d final=%d dedup=%d}", r.Pubend, r.Meta.HWM, r.Meta.Final, len(r.Meta.Dedup))
	}
	if d := r.Durable; d != nil {
		if d.Deleted {
			return fmt.Sprintf("Rec{durable %s deleted}", d.Name)
		}
		return fmt.Sprintf("Rec{durable %s %s %q released %v}", d.Name, d.Pattern, d.Selector, d.Released)
	}
	if f := r.Filter; f != nil {
		what := "all"
		if f.Delta {
			d := SummaryDelta{All: f.All, Remove: f.Remove}
			for i := range f.Patterns {
				d.Add = append(d.Add, Clause{f.Patterns[i], f.Selectors[i]})
			}
			what = "change{" + strings.TrimPrefix(d.String(), "SummaryDelta{#0 ")
		} else if !f.All {
			what = Summary{Patterns: f.Patterns, Selectors: f.Selectors}.String()
		}
		return fmt.Sprintf("Rec{%s filter#%d to %s from %d: %s}", r.Pubend, f.Seq, f.Down, f.From, what)
	}
	return fmt.Sprintf("Rec{%s HWM=%d}", r.Pubend, r.HWM)
}
