package sim

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"strings"

	"github.com/aerie-mq/aerie/internal/eventlog"
	"github.com/aerie-mq/aerie/internal/msg"
	"github.com/aerie-mq/aerie/internal/retention"
	"github.com/aerie-mq/aerie/internal/storage"
	"github.com/aerie-mq/aerie/internal/vfs"
)

// disk is a PHB's storage in the simulator: the broker's own store (the
// event log and its snapshot, storage.Store) over the crashable
// in-memory filesystem. Appended records are volatile until sync; a crash
// keeps the synced bytes and a random prefix of the rest, so torn tails
// happen and recovery must repair them.
type disk struct {
	opts    eventlog.Options
	fs      *vfs.MemFS
	store   *storage.Store
	torn    int    // torn tails repaired on recovery
	trimmed uint64 // records dropped by retention
}

const (
	diskDir  = "/data/pubends"
	snapPath = "/data/pubends.snapshot"
)

// Small segments so that rolling and trimming happen in every run.
var diskOpts = eventlog.Options{SegmentBytes: 4 << 10}

// scaleDiskOpts are the segments of large networks (--topology scale): a
// PHB there logs filter versions of up to a million clauses, and 4 KiB
// segments made tens of thousands of files, each roll syncing a directory
// that lists them all (a quarter of a 100 000-subscription run's CPU).
var scaleDiskOpts = eventlog.Options{SegmentBytes: 4 << 20}

// newDisk returns an empty disk with segments as opts says; recover opens
// its store.
func newDisk(opts eventlog.Options) *disk {
	d := &disk{opts: opts, fs: vfs.NewMem()}
	if err := d.fs.MkdirAll(diskDir); err != nil {
		panic(err)
	}
	return d
}

// recover opens the store (after a crash: reopens it) and returns what a
// restarting broker restores from.
func (d *disk) recover() (retention.Loaded, error) {
	st, ld, rec, err := storage.Open(d.fs, diskDir, snapPath, d.opts)
	if err != nil {
		return retention.Loaded{}, err
	}
	if rec.TornTail {
		d.torn++
	}
	d.store = st
	return ld, nil
}

// append writes recs (volatile until sync) and returns the first's index.
func (d *disk) append(recs []msg.Record) uint64 {
	first, err := d.store.Append(recs)
	if err != nil {
		panic(fmt.Sprintf("sim: append: %v", err))
	}
	return first
}

// sync makes the appended records durable; an error (an injected I/O
// fault) leaves the log failed, as after a real failed fsync.
func (d *disk) sync() error { return d.store.Sync() }

// failNextSync makes the next fsync of the log fail.
func (d *disk) failNextSync() {
	d.fs.InjectError(vfs.OpSync, "", errors.New("sim: injected fsync failure"))
}

// trim runs the broker's retention (snapshot, then drop released segments).
func (d *disk) trim(cut uint64, snap []msg.Record) (first, dropped uint64, err error) {
	first, dropped, err = d.store.Trim(cut, snap)
	d.trimmed += dropped
	return first, dropped, err
}

func (d *disk) crash(rng, sums *rand.Rand) {
	crashFS(d.fs, rng, sums)
	d.store = nil
}

// crashFS crashes fsys (a power loss). At half the crashes, drawn from
// sums, the kernel had written the segment summaries back (they are
// written without an fsync): they survive whole where their names do, and
// the restart takes its sealed segments from them; at the others a crash
// tears them.
func crashFS(fsys *vfs.MemFS, rng, sums *rand.Rand) {
	if sums.IntN(2) == 0 {
		fsys.WriteBack(isSummary)
	}
	fsys.CrashWith(crashRng(rng, sums))
}

func isSummary(name string) bool {
	return strings.HasSuffix(name, ".sum") || strings.HasSuffix(name, ".sum.tmp")
}

// crashRng draws a crash's torn bytes from rng, but for the segment
// summaries (internal/storage), which came later, from sums: every other
// file crashes as in the runs before them.
func crashRng(rng, sums *rand.Rand) func(name string) *rand.Rand {
	return func(name string) *rand.Rand {
		if isSummary(name) {
			return sums
		}
		return rng
	}
}
