// Package eventlog is an append-only, segmented, checksummed record log over
// a vfs.FS. The publisher-hosting broker writes every published event to it
// once and acknowledges only after Sync, so the package is built around one
// rule: a record is durable exactly when a Sync that covers it returned nil.
//
// # On-disk format
//
// A log is a directory of segment files and two mark files (see Synced
// marks). Each segment is named after the
// index of its first record, as a 20-digit zero-padded decimal, so that a
// lexical directory listing is also index order:
//
//	<dir>/
//	  00000000000000000000.log   records 0 .. 4711
//	  00000000000000004712.log   records 4712 .. 9000
//	  00000000000000009001.log   records 9001 ..      (active: appends go here)
//	  synced.0, synced.1         how far Syncs made the active segment durable
//
// A segment is a plain sequence of frames, with no file header, so that a
// crash can only ever leave a prefix of valid frames plus a torn tail:
//
//	 0               4               8                      8+length
//	+---------------+---------------+------------------------+
//	| length uint32 | crc32c uint32 | payload (length bytes) |  frame 0
//	+---------------+---------------+------------------------+
//	| length uint32 | crc32c uint32 | payload ...            |  frame 1
//	+---------------+---------------+-------------------------
//
// Both integers are little-endian. crc32c is CRC-32 with the Castagnoli
// polynomial, over the payload only. length is at least 1 (an all-zero
// region, as some filesystems leave after a crash, would otherwise decode
// as valid empty records) and at most Options.MaxRecordBytes. Payloads are
// opaque: callers encode their own records.
//
// # Segments and durability
//
// A segment is sealed once appending the next frame would take it past
// Options.SegmentBytes (a single frame larger than that gets a segment of
// its own). The sealed segment is fsynced before its successor is created,
// and the directory is fsynced after the creation; so whenever a segment is
// durable, every segment before it is complete and durable, and only the
// last segment can have a torn tail.
//
// # Synced marks
//
// Beside its segments a log keeps two small files, synced.0 and synced.1.
// After each Sync it appends to one of them a 20-byte mark: the base of
// the active segment and how many of its bytes that fsync made durable
// (two little-endian uint64s and their crc32c). They are never fsynced, so
// a group commit costs one fsync still: a mark is written after the fsync
// it describes returned, so it can lag behind what is durable (a crash may
// lose the latest marks, and a torn mark fails its checksum and is
// ignored) but never runs ahead. The files take turns, each rewritten from
// empty once it holds 64 KiB of marks, so a crash after a switch still
// finds the other's last mark.
//
// # Recovery
//
// Open reads and checks every frame; with Options.LazySealed, only the last
// segment's, and a sealed segment is checked when it is read (Replay,
// Verify), as a log of gigabytes is not read whole at every start. A bad frame (short, with an
// impossible length, or with a checksum mismatch) is a torn tail from a
// crash when it is in the last segment, starts at or past the synced
// length of the latest surviving mark, and no valid frame follows it at
// any later offset: it is truncated and described in the returned
// Recovery. Any other bad frame is corruption of data that may have been
// acknowledged, and so is a last segment shorter than its mark or missing
// altogether: Open refuses them with an error wrapping ErrCorrupt that
// names the file and byte offset (for damage below the mark, that
// acknowledged records are damaged), and leaves the files untouched for
// an operator to inspect. Without a surviving mark the rule is the torn
// tail's alone, so bit rot in records synced just before a power loss is
// still taken for a torn write.
//
// A Log is not safe for concurrent use and starts no goroutines; the caller
// serialises access (typically one storage loop that appends a batch, calls
// Sync once for the whole batch — group commit — and then acknowledges).
package eventlog
