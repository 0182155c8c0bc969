package node

import (
	"github.com/aerie-mq/aerie/internal/gd"
	"github.com/aerie-mq/aerie/internal/msg"
)

// RunJobs runs the shell's queued reads and trims, reporting each, after
// syncing the store they read. An error means the store's disk failed:
// the member must stop (crash-only).
func (n *Node) RunJobs() error {
	if len(n.jobs) == 0 {
		return nil
	}
	if err := n.syncStore(); err != nil {
		return err
	}
	for len(n.jobs) > 0 {
		j := n.jobs[0]
		n.jobs = n.jobs[1:]
		j()
	}
	return nil
}

// Append implements shell.Durability: propose the batch, even while
// earlier ones are not committed yet (the shell bounds how many).
// Persisted comes from Sync once it is committed and applied, or with an
// error if the leadership ends first.
func (n *Node) Append(recs []msg.Record) {
	if !n.serving {
		n.jobs = append(n.jobs, func() {
			if n.sh != nil {
				_ = n.sh.Persisted(0, ErrNotServing)
			}
		})
		return
	}
	first, err := n.rep.Propose(recs)
	if err == nil {
		n.flow.Proposed++
		n.flow.ProposedRecords += uint64(len(recs))
	}
	if err != nil {
		n.jobs = append(n.jobs, func() {
			if n.sh != nil {
				_ = n.sh.Persisted(0, err)
			}
		})
		return
	}
	n.outs = append(n.outs, batch{first: first, n: len(recs)})
}

// Fetch implements shell.Durability: read events back from the local
// store, which holds every committed batch up to what was applied.
func (n *Node) Fetch(f gd.Fetch, from []uint64) {
	n.jobs = append(n.jobs, func() {
		evs, err := n.store.Fetch(f.Pubend, f.Ranges, from)
		if n.sh != nil {
			n.sh.Fetched(gd.Fetched{Pubend: f.Pubend, Events: evs, Err: err})
		}
	})
}

// Trim implements shell.Durability on the local store, and proposes what
// it dropped as a trim entry so that every member trims its own store the
// same way (raftphb/trim.go): followers hear nothing of the release
// protocol. A trim entry lost with a leadership costs nothing but a later
// trim; the next leader proposes its own.
func (n *Node) Trim(cut uint64, snap []msg.Record) {
	n.jobs = append(n.jobs, func() {
		first, dropped, err := n.store.Trim(cut, snap)
		if err == nil && dropped > 0 && n.serving && !n.cfg.Mutation.has(MutLeaderTrimOnly) {
			if perr := n.rep.ProposeTrim(cut, snap); perr == nil {
				n.trimsProposed++
			}
		}
		if n.sh != nil {
			n.sh.Trimmed(first, dropped, err)
		}
	})
}
