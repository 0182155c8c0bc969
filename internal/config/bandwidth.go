package config

import (
	"errors"
)

// bandwidths are the units of a link's bandwidth (docs/CONFIG.md): KB and
// MB are powers of 1000, KiB and MiB of 1024.
var bandwidths = scale{
	units: []struct {
		suffix string
		bytes  int64
	}{{"MiB/s", 1 << 20}, {"KiB/s", 1 << 10}, {"MB/s", 1_000_000}, {"KB/s", 1000}, {"B/s", 1}},
	max: 1e15,
	err: errors.New(`bandwidth must be a positive number of bytes per second such as "500KB/s" (units B/s, KB/s = 1000, KiB/s = 1024, MB/s, MiB/s)`),
	sep: ": ",
}

// ParseBandwidth reads a bandwidth such as "500KB/s" or "1.5MiB/s" into bytes
// per second. Zero, negative, and anything else malformed is an error: a
// link capped at nothing would carry nothing.
func ParseBandwidth(s string) (int64, error) { return bandwidths.parse(s) }

// FormatBandwidth writes bytes per second in the largest unit that divides
// it exactly, so that ParseBandwidth reads back the same value.
func FormatBandwidth(b int64) string { return bandwidths.format(b) }

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
