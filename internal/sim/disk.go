package sim

import (
	"errors"
	"fmt"
	"math/rand/v2"

	"github.com/aerie-mq/aerie/internal/eventlog"
	"github.com/aerie-mq/aerie/internal/gd"
	"github.com/aerie-mq/aerie/internal/msg"
	"github.com/aerie-mq/aerie/internal/retention"
	"github.com/aerie-mq/aerie/internal/vfs"
)

// disk is a PHB's storage in the simulator: the real event log over the
// crashable in-memory filesystem. Appended records are volatile until sync;
// a crash keeps the synced bytes and a random prefix of the rest, so torn
// tails happen and recovery must repair them.
type disk struct {
	fs      *vfs.MemFS
	log     *eventlog.Log
	buf     []byte
	tr      retention.Tracker
	first   uint64 // log index of the batch being synced
	torn    int    // torn tails repaired on recovery
	trimmed uint64 // records dropped by retention
}

const (
	diskDir  = "/data/pubends"
	snapPath = "/data/pubends.snapshot"
)

// Small segments so that rolling and trimming happen in every run.
var diskOpts = eventlog.Options{SegmentBytes: 4 << 10}

func newDisk() *disk {
	d := &disk{fs: vfs.NewMem()}
	if err := d.fs.MkdirAll(diskDir); err != nil {
		panic(err)
	}
	if _, err := d.open(); err != nil {
		panic(err)
	}
	return d
}

func (d *disk) open() ([]msg.Record, error) {
	l, rec, err := eventlog.Open(d.fs, diskDir, diskOpts)
	if err != nil {
		return nil, fmt.Errorf("open event log: %w", err)
	}
	if rec.TornTail {
		d.torn++
	}
	d.log = l
	d.tr = retention.Tracker{}
	return retention.Load(d.fs, snapPath, l, &d.tr)
}

func (d *disk) append(recs []msg.Record) {
	d.first = d.log.NextIndex()
	for _, r := range recs {
		var err error
		d.buf, err = msg.EncodeRecord(d.buf[:0], r)
		if err == nil {
			_, err = d.log.Append(d.buf)
		}
		if err != nil {
			panic(fmt.Sprintf("sim: append %v: %v", r, err))
		}
	}
}

// sync makes the batch durable; an error (an injected I/O fault) leaves the
// log failed, as after a real failed fsync.
func (d *disk) sync(recs []msg.Record) error {
	if err := d.log.Sync(); err != nil {
		return err
	}
	for i, r := range recs {
		d.tr.Appended(d.first+uint64(i), r)
	}
	return nil
}

// fetch reads a pubend's events back from the log (gd.Fetch).
func (d *disk) fetch(f gd.Fetch) ([]*msg.Event, error) {
	from := make([]uint64, len(f.Ranges))
	for i, r := range f.Ranges {
		from[i] = d.tr.FetchStart(f.Pubend, r.Lo)
	}
	return retention.Fetch(d.log, f.Pubend, f.Ranges, from)
}

// failNextSync makes the next fsync of the log fail.
func (d *disk) failNextSync() {
	d.fs.InjectError(vfs.OpSync, "", errors.New("sim: injected fsync failure"))
}

// trim runs the broker's retention (snapshot, then drop released segments).
func (d *disk) trim(eng retention.Engine) error {
	n, err := retention.Trim(d.fs, snapPath, d.log, &d.tr, eng)
	d.trimmed += n
	return err
}

func (d *disk) crash(rng *rand.Rand) {
	d.fs.Crash(rng)
	d.log = nil
}

// recover reopens the log after a crash and returns its records.
func (d *disk) recover() ([]msg.Record, error) { return d.open() }
