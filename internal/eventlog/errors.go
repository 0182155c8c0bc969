package eventlog

import (
	"errors"
	"fmt"
)

var (
	// ErrCorrupt reports a frame that is invalid and cannot be a torn tail.
	// The wrapping error names the file and byte offset.
	ErrCorrupt = errors.New("eventlog: corrupt record")

	// ErrRecordTooLarge is returned by Append for a payload longer than
	// Options.MaxRecordBytes.
	ErrRecordTooLarge = errors.New("eventlog: record too large")

	// ErrEmptyRecord is returned by Append for an empty payload; see the
	// package documentation for why empty frames are not allowed.
	ErrEmptyRecord = errors.New("eventlog: empty record")

	// ErrFailed wraps the first write, fsync or segment-creation error.
	// After it the log refuses every Append and Sync: once an fsync has
	// failed the kernel may have dropped the dirty pages, so retrying could
	// report durability that does not exist. Close and reopen (ideally
	// after a process restart) to recover.
	ErrFailed = errors.New("eventlog: log failed")

	// ErrClosed is returned by operations on a closed Log.
	ErrClosed = errors.New("eventlog: log closed")

	// ErrTruncated is returned by Replay for an index that TruncateFront
	// already removed.
	ErrTruncated = errors.New("eventlog: index truncated")

	// ErrOutOfRange is returned by Replay for an index past NextIndex.
	ErrOutOfRange = errors.New("eventlog: index out of range")

	// ErrInvalidOptions is returned by Open for negative or oversized
	// Options.
	ErrInvalidOptions = errors.New("eventlog: invalid options")
)

// corruptAt builds an ErrCorrupt error naming file and offset, the two
// things an operator needs to look at the damage.
func corruptAt(path string, off int64, format string, args ...any) error {
	return fmt.Errorf("%w: %s: offset %d: %s", ErrCorrupt, path, off, fmt.Sprintf(format, args...))
}
