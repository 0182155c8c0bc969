package config

import (
	"fmt"
	"strconv"
	"strings"
)

// scale is a family of units for a positive quantity written as a number
// and a suffix (a size, a bandwidth; docs/CONFIG.md): its units, longest
// suffix first, so that "MiB" is not read as "B"; the largest value it
// takes; and the error that explains the format.
type scale struct {
	units []struct {
		suffix string
		bytes  int64
	}
	max float64
	err error
	// sep is put between the value and err in an error message.
	sep string
}

// parse reads s. Zero, negative, and anything else malformed is an error.
func (sc scale) parse(s string) (int64, error) {
	t := strings.TrimSpace(s)
	for _, u := range sc.units {
		num, ok := strings.CutSuffix(t, u.suffix)
		if !ok {
			continue
		}
		v, err := strconv.ParseFloat(strings.TrimSpace(num), 64)
		if err != nil || !(v > 0) || v*float64(u.bytes) > sc.max {
			return 0, fmt.Errorf("%q%s%w", s, sc.sep, sc.err)
		}
		b := int64(v * float64(u.bytes))
		if b < 1 {
			least := sc.units[len(sc.units)-1].suffix
			return 0, fmt.Errorf("%q is below 1 %s: %w", s, least, sc.err)
		}
		return b, nil
	}
	return 0, fmt.Errorf("%q%s%w", s, sc.sep, sc.err)
}

// format writes b in the largest unit that divides it exactly, so that
// parse reads back the same value.
func (sc scale) format(b int64) string {
	for _, u := range sc.units {
		if b%u.bytes == 0 {
			return fmt.Sprintf("%d%s", b/u.bytes, u.suffix)
		}
	}
	return fmt.Sprintf("%d%s", b, sc.units[len(sc.units)-1].suffix)
}
