package gd

import (
	"github.com/aerie-mq/aerie/internal/msg"
)

// Best-effort mode (Config.BestEffort) is the baseline of seed 000 §4.1:
// "no knowledge accumulation, curiosity propagation, message logging, or
// retransmission; only sends downstream D tick messages". The pubend
// assigns a tick and acks at once without logging; every broker forwards
// each event down the edges whose filter it passes and hands it to the
// local subscriptions it matches; nothing is remembered, so a lost message
// is lost. Subscriptions still widen filters and get a start tick, as in GD,
// so the two modes differ only in what guaranteed delivery costs. It exists
// to measure that cost (aerie bench, workload "overhead"); no user should
// run it for data that matters.

// publishBestEffort: tick, ack (unless the publish asks for none),
// forward, deliver — no record, no fsync.
func (e *Engine) publishBestEffort(ps *pstream, m msg.Publish) {
	a := ps.pub.Assign(e.now, m)
	if a.Event == nil {
		e.stats.DuplicatePublishes++
		if e.acks(m) {
			e.toClient(msg.PubAck{Pubend: m.Pubend, Publisher: m.Publisher, Seq: m.Seq, Tick: a.DupTick, Duplicate: true})
		}
		return
	}
	ps.pub.MadeDurable(a.Event) // nothing to wait for: drop it from Pending
	ps.pub.Announced = a.Event.Tick
	ps.published++
	if e.acks(m) {
		e.toClient(e.pubAckMsg(msg.PubAck{Pubend: m.Pubend, Publisher: m.Publisher, Seq: m.Seq, Tick: a.Event.Tick}))
	}
	e.forwardBestEffort(ps, a.Event)
}

// onKnowledgeBestEffort passes an event on; silence and finals carry
// nothing in this mode.
func (e *Engine) onKnowledgeBestEffort(from msg.NodeID, m msg.Knowledge) {
	ps := e.pstreamOf(m.Pubend)
	if ps == nil || ps.pub != nil || e.cellOfNode(from) != ps.up || m.Event == nil {
		return
	}
	e.forwardBestEffort(ps, m.Event)
}

// onKnowledgeRunBestEffort passes on each event of a run.
func (e *Engine) onKnowledgeRunBestEffort(from msg.NodeID, r *msg.KnowledgeRun) {
	ps := e.pstreamOf(r.Pubend)
	if ps == nil || ps.pub != nil || e.cellOfNode(from) != ps.up {
		return
	}
	for _, ev := range r.Events {
		e.forwardBestEffort(ps, ev)
	}
}

func (e *Engine) forwardBestEffort(ps *pstream, ev *msg.Event) {
	for _, o := range ps.outs {
		if o.PassesAt(ev.Tick, ev) {
			e.sendDown(ps.id, o.Down, e.knowledgeMsg(msg.Knowledge{Pubend: ps.id, Start: ev.Tick, VTick: ev.Tick, End: ev.Tick, Event: ev}))
		}
	}
	if len(ps.subs) > 0 {
		e.deliverEvent(ps, ev)
	}
}
