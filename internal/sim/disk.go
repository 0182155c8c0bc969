package sim

import (
	"math/rand/v2"

	"github.com/aerie-mq/aerie/internal/msg"
)

// disk is a simulated record store: appended records are volatile until
// sync; a crash keeps the synced records and a random prefix of the rest
// (a write may reach the platter before its fsync is acknowledged).
type disk struct {
	synced   []msg.Record
	unsynced []msg.Record
}

func (d *disk) append(recs []msg.Record) { d.unsynced = append(d.unsynced, recs...) }

func (d *disk) sync() {
	d.synced = append(d.synced, d.unsynced...)
	d.unsynced = nil
}

func (d *disk) crash(rng *rand.Rand) {
	keep := 0
	if n := len(d.unsynced); n > 0 {
		keep = rng.IntN(n + 1)
	}
	d.synced = append(d.synced, d.unsynced[:keep]...)
	d.unsynced = nil
}

func (d *disk) recover() []msg.Record { return append([]msg.Record(nil), d.synced...) }
