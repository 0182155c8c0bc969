package sim

import (
	"github.com/aerie-mq/aerie/internal/msg"
	"github.com/aerie-mq/aerie/internal/retention"
)

// checkRestored checks a pubend host's restore against its log read whole
// (recs): every event acknowledged to a publisher is still logged unless
// released (the oracle's Recovered, I9), and the engine, restored from
// the segment summaries and the last segment (storage.Open), holds
// exactly the logged events above its release point: as many, of the same
// sizes. A summary that was torn, stale or wrong and used anyway shows
// here.
func (w *world) checkRestored(n *node, recs []msg.Record, ld retention.Loaded) {
	w.sums.summarised += ld.Summarised
	w.sums.read += ld.Read
	byPubend := map[msg.PubendID][]*msg.Event{}
	for _, r := range recs {
		if r.Event != nil {
			byPubend[r.Pubend] = append(byPubend[r.Pubend], r.Event)
		}
	}
	for _, p := range n.broker.Pubends {
		w.orc.Recovered(p, byPubend[p], releasedIn(ld.Records, p))
	}
	for _, st := range n.sh.Engine().ReleaseStates() {
		if !st.Hosted {
			continue
		}
		var events int
		var bytes int64
		for _, ev := range byPubend[st.Pubend] {
			if ev.Tick > st.Final {
				events++
				bytes += int64(msg.EventSize(ev.Topic, ev.Props, ev.Payload))
			}
		}
		if st.RetainedEvents != events || st.RetainedBytes != bytes {
			w.orc.Violate("I9", "%s restored pubend %s with %d events of %d bytes above its release point %d; its log holds %d of %d",
				n.id, st.Pubend, st.RetainedEvents, st.RetainedBytes, st.Final, events, bytes)
		}
	}
}
