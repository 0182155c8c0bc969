package eventlog

import (
	"fmt"
	"math"
)

const (
	// DefaultSegmentBytes is the segment size used when Options.SegmentBytes
	// is zero.
	DefaultSegmentBytes = 64 << 20
	// DefaultMaxRecordBytes is the payload limit used when
	// Options.MaxRecordBytes is zero.
	DefaultMaxRecordBytes = 16 << 20
)

// Options configures a Log. The zero value selects the defaults.
type Options struct {
	// SegmentBytes is the size past which the active segment is sealed and
	// a new one started. Smaller segments let TruncateFront release space
	// sooner; larger ones mean fewer files.
	SegmentBytes int64

	// MaxRecordBytes bounds a payload's length. Open also rejects frames
	// claiming to be longer, so it must not be lowered for an existing log.
	MaxRecordBytes int

	// DropSynced has each Sync advise the OS to drop the segments' synced
	// bytes from its page cache (vfs.CacheDropper; a no-op on other
	// filesystems). For a log written once and read back rarely, such as
	// a PHB's event log (read only for nacks beyond the payload cache and
	// at a restart): its writes then reuse a few cache pages rather than
	// filling the page cache with new ones, which on the benchmark's
	// machine took write(2) from about 2 to 0.6 ns per byte
	// (docs/bench-history/2026-11-27-gd-cost-per-broker.md). Reads of
	// dropped bytes go to the disk.
	DropSynced bool

	// LazySealed has Open check only the last segment's frames: a sealed
	// segment (fsynced before its successor was created, never written
	// again) is checked when it is read (Replay) or verified (Verify).
	// Its record count comes from the segment names. Open then reads
	// one segment whatever the log holds, where it read them all: a PHB
	// keeping millions of events for an away durable subscriber restarts
	// in a time that does not depend on them (internal/storage).
	LazySealed bool

	// Base is the index of the first record of a log that Open creates
	// (default 0); an existing log keeps its indexes. A log installed from
	// another log's copy (a replicated PHB member catching up from its
	// leader's store) starts where that copy starts.
	Base uint64
}

func (o Options) withDefaults() (Options, error) {
	if o.SegmentBytes == 0 {
		o.SegmentBytes = DefaultSegmentBytes
	}
	if o.MaxRecordBytes == 0 {
		o.MaxRecordBytes = DefaultMaxRecordBytes
	}
	if o.SegmentBytes < 0 {
		return o, fmt.Errorf("%w: SegmentBytes %d is negative", ErrInvalidOptions, o.SegmentBytes)
	}
	// The frame length field is a uint32.
	if o.MaxRecordBytes < 0 || uint64(o.MaxRecordBytes) > math.MaxUint32 {
		return o, fmt.Errorf("%w: MaxRecordBytes %d is outside [0, 2^32)", ErrInvalidOptions, o.MaxRecordBytes)
	}
	return o, nil
}
