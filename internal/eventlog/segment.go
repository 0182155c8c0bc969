package eventlog

import (
	"fmt"
	"path/filepath"
	"strconv"
	"strings"
)

// segment is one file of the log; base is the index of its first record.
type segment struct {
	base uint64
	path string
	// marks is a sparse in-memory index of the segment: the byte offset of
	// one frame roughly every markEvery bytes, so that Replay from an index
	// in the middle of a big segment reads about markEvery bytes before it,
	// not the whole segment (issue 3: NACK retransmissions read only what
	// they need). Rebuilt by Open's scan; never written to disk.
	marks    []mark
	nextMark int64 // offset at or past which the next frame gets a mark
	size     int64 // bytes, once sealed (the active segment's: Log.activeSize)
}

// mark says that the frame of record index starts at byte offset off.
type mark struct {
	index uint64
	off   int64
}

// markEvery is the spacing of segment marks: 64 KiB of reading at most
// before the wanted record, for 16 bytes of memory per 64 KiB of log.
const markEvery = 64 << 10

// note records a mark for the frame of record index at offset off, when it
// is due.
func (s *segment) note(index uint64, off int64) {
	if off >= s.nextMark {
		s.marks = append(s.marks, mark{index, off})
		s.nextMark = off + markEvery
	}
}

// seek returns the last mark at or before index (the segment start if none).
func (s *segment) seek(index uint64) mark {
	m := mark{index: s.base}
	for lo, hi := 0, len(s.marks); lo < hi; {
		mid := (lo + hi) / 2
		if s.marks[mid].index <= index {
			m = s.marks[mid]
			lo = mid + 1
		} else {
			hi = mid
		}
	}
	return m
}

const segmentSuffix = ".log"

func segmentName(base uint64) string { return fmt.Sprintf("%020d%s", base, segmentSuffix) }

// parseSegmentName reports the base index of a segment file name. Other
// names (editor backups, operator notes) are not segments and are ignored.
func parseSegmentName(name string) (uint64, bool) {
	digits, ok := strings.CutSuffix(name, segmentSuffix)
	if !ok || len(digits) != 20 {
		return 0, false
	}
	for _, c := range digits {
		if c < '0' || c > '9' {
			return 0, false
		}
	}
	base, err := strconv.ParseUint(digits, 10, 64)
	return base, err == nil
}

func newSegment(dir string, base uint64) segment {
	return segment{base: base, path: filepath.Join(dir, segmentName(base))}
}
