package msg

import (
	"github.com/aerie-mq/aerie/internal/tick"
)

// EventBlocks carves the events a PHB builds, Event structs and encodings
// alike, from blocks shared by the events after them, one allocation for
// many events where NewEvent makes two per event (they were 2 of the 2.3
// allocations per event of a PHB's publish path, and with them the
// garbage collector's work per event). The zero value is ready to use; it
// is not safe for concurrent use.
//
// What a block pins: a block stays in memory while any event carved from
// it does, and the Events keep their encodings' blocks. One EventBlocks
// serves one pubend (stream.Pubend), whose events are built in tick order
// and let go in tick order too (acked in best-effort mode at once; in GD
// mode made durable, then trimmed from the caches from the oldest tick), so
// what is held beyond the live events is the part of the oldest block whose
// events are gone and the unused rest of the newest: two blocks per pubend
// at most, up to 40 KiB. Blocks start small (2 KiB of bytes, 8 Events)
// and double up to their largest as a pubend publishes, so a pubend that
// published a few events pins a few KiB, not 40; an event too large for a
// fair share of a block gets memory of its own, as from NewEvent.
type EventBlocks struct {
	enc    []byte  // the current block of encodings: bytes from len on are free
	events []Event // the current block of Events: from len on are free
}

// SmallAllocMax is the largest allocation the Go runtime serves from its
// size classes (32 KiB less its 8-byte malloc header): a larger one is a
// large object, given pages of its own, zeroed and freed page by page,
// which costs several times as much per byte. Blocks and frames that are
// allocated per burst of events stay within it.
const SmallAllocMax = 32<<10 - 8

const (
	encBlockMin   = 2 << 10
	encBlockMax   = SmallAllocMax
	encOwnMin     = encBlockMax / 8
	eventBlockMin = 8
	eventBlockMax = 64 // 8 KiB of 128-byte Events
)

// NewEvent is msg.NewEvent, the result carved from the blocks.
func (k *EventBlocks) NewEvent(pubend PubendID, t tick.Tick, publisher string, seq uint64, topic string, props Props, payload []byte) *Event {
	if len(k.events) == cap(k.events) {
		k.events = make([]Event, 0, min(max(2*cap(k.events), eventBlockMin), eventBlockMax))
	}
	k.events = k.events[:len(k.events)+1]
	ev := &k.events[len(k.events)-1]
	n := eventBound(pubend, publisher, topic, props, payload)
	if n > encOwnMin {
		buildEvent(ev, make([]byte, 0, n), pubend, t, publisher, seq, topic, props, payload)
		return ev
	}
	if cap(k.enc)-len(k.enc) < n {
		// The rest of the block (under encOwnMin bytes, an eighth of the
		// largest) is left unused.
		k.enc = make([]byte, 0, max(min(max(2*cap(k.enc), encBlockMin), encBlockMax), n))
	}
	at := len(k.enc)
	// Capped at the bound: the encoding cannot run into the bytes after
	// it, which the next event takes.
	used := buildEvent(ev, k.enc[at:at:at+n], pubend, t, publisher, seq, topic, props, payload)
	k.enc = k.enc[:at+used]
	return ev
}
