package retention

import (
	"github.com/aerie-mq/aerie/internal/msg"
	"github.com/aerie-mq/aerie/internal/tick"
)

// FetchStart returns the log index from which a read finds every logged
// event of p with a tick at or above lo. It never returns an index below
// the log's first, which the caller clamps to.
func (t *Tracker) FetchStart(p msg.PubendID, lo tick.Tick) uint64 {
	if x := t.ticks[p]; x != nil {
		return x.start(lo)
	}
	return 0
}
