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
