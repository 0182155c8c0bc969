package config

import (
	"errors"
	"fmt"
)

// sizes are the units of a size such as max_retain_bytes (docs/CONFIG.md):
// KB, MB, GB and TB are powers of 1000, KiB … TiB of 1024.
var sizes = scale{
	units: []struct {
		suffix string
		bytes  int64
	}{{"TiB", 1 << 40}, {"GiB", 1 << 30}, {"MiB", 1 << 20}, {"KiB", 1 << 10},
		{"TB", 1e12}, {"GB", 1e9}, {"MB", 1e6}, {"KB", 1e3}, {"B", 1}},
	max: 1e18,
	err: errSize,
	sep: " ",
}

// errSize explains the format in every size error.
var errSize = errors.New(`must be a positive size such as "50GB" (units B, KB = 1000, KiB = 1024, MB, MiB, GB, GiB, TB, TiB)`)

// ParseSize reads a size such as "50GB" or "1.5GiB" into bytes. Zero,
// negative, and anything else malformed is an error.
func ParseSize(s string) (int64, error) { return sizes.parse(s) }

// FormatSize writes bytes in the largest unit that divides them exactly,
// so that ParseSize reads back the same value.
func FormatSize(b int64) string { return sizes.format(b) }

// retainBytes reads max_retain_bytes: a size string, or a TOML integer of
// bytes (as Kafka's retention.bytes).
func retainBytes(v any) (int64, error) {
	switch x := v.(type) {
	case string:
		return ParseSize(x)
	case int64:
		if x > 0 {
			return x, nil
		}
	}
	return 0, fmt.Errorf("%v %w", v, errSize)
}

// The bounds of catchup_window and catchup_window_bytes (Broker.CatchupWindow):
// at least twice what a client leaves unreported (gd.MinCatchupWindowEvents,
// MinCatchupWindowBytes), at most what one connection's outbound queue
// holds by default (a larger window would let one subscriber's catch-up
// fill it) and 1 GiB.
const (
	MinCatchupWindow      = 128
	MaxCatchupWindow      = 100000
	MinCatchupWindowBytes = 128 << 10
	MaxCatchupWindowBytes = 1 << 30
)

// The bounds of relay_cache_bytes (Broker.RelayCacheBytes): below 64 KiB
// an SHB would ask upstream again for nearly every payload above a gap, and
// a cache of a terabyte bounds nothing a machine has.
const (
	MinRelayCacheBytes = 64 << 10
	MaxRelayCacheBytes = 1 << 40
)

// The bounds of memory_budget (Network.MemoryBudget): a broker process
// takes some tens of MiB before it holds anything, so a smaller budget
// would have it shed its caches all the time.
const (
	MinMemoryBudget = 32 << 20
	MaxMemoryBudget = 1 << 40
)
