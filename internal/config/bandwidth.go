package config

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
)

// bandwidthUnits are the units of a link's bandwidth (docs/CONFIG.md): KB and
// MB are powers of 1000, KiB and MiB of 1024.
var bandwidthUnits = []struct {
	suffix string
	bytes  int64
}{{"MiB/s", 1 << 20}, {"KiB/s", 1 << 10}, {"MB/s", 1_000_000}, {"KB/s", 1000}, {"B/s", 1}}

// errBandwidth explains the format in every bandwidth error.
var errBandwidth = errors.New(`bandwidth must be a positive number of bytes per second such as "500KB/s" (units B/s, KB/s = 1000, KiB/s = 1024, MB/s, MiB/s)`)

// ParseBandwidth reads a bandwidth such as "500KB/s" or "1.5MiB/s" into bytes
// per second. Zero, negative, and anything else malformed is an error: a
// link capped at nothing would carry nothing.
func ParseBandwidth(s string) (int64, error) {
	t := strings.TrimSpace(s)
	for _, u := range bandwidthUnits {
		num, ok := strings.CutSuffix(t, u.suffix)
		if !ok {
			continue
		}
		v, err := strconv.ParseFloat(strings.TrimSpace(num), 64)
		if err != nil || !(v > 0) || v*float64(u.bytes) > 1e15 {
			return 0, fmt.Errorf("%q: %w", s, errBandwidth)
		}
		b := int64(v * float64(u.bytes))
		if b < 1 {
			return 0, fmt.Errorf("%q is below 1 B/s: %w", s, errBandwidth)
		}
		return b, nil
	}
	return 0, fmt.Errorf("%q: %w", s, errBandwidth)
}

// FormatBandwidth writes bytes per second in the largest unit that divides
// it exactly, so that ParseBandwidth reads back the same value.
func FormatBandwidth(b int64) string {
	for _, u := range bandwidthUnits {
		if b%u.bytes == 0 {
			return fmt.Sprintf("%d%s", b/u.bytes, u.suffix)
		}
	}
	return fmt.Sprintf("%dB/s", b)
}

// DownBandwidth returns, for broker id, the bandwidth of each link from its
// cell keyed by the downstream broker it sends to: every member of the
// downstream cell alike, one connection each (docs/CONFIG.md). Nil when no
// such link has one.
func (n *Network) DownBandwidth(id string) map[string]int64 {
	me, ok := n.Broker(id)
	if !ok {
		return nil
	}
	var out map[string]int64
	for l, bw := range n.Bandwidth {
		if l.Up != me.cell() {
			continue
		}
		for _, b := range n.Brokers {
			if b.cell() == l.Down {
				if out == nil {
					out = map[string]int64{}
				}
				out[b.ID] = bw
			}
		}
	}
	return out
}
