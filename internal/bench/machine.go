package bench

import (
	"context"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"time"

	"github.com/HdrHistogram/hdrhistogram-go"

	"github.com/aerie-mq/aerie/internal/eventlog"
	"github.com/aerie-mq/aerie/internal/vfs"
)

// Machine is the denominator of every ratio: this machine's own limits,
// measured in the same run.
type Machine struct {
	FsyncP50us       float64 `json:"fsync_p50_us"`
	FsyncP99us       float64 `json:"fsync_p99_us"`
	GroupCommitPerS  float64 `json:"group_commit_records_per_sec"` // 256-byte records, 256 per fsync, our eventlog
	LoopbackMBPerSec float64 `json:"loopback_mb_per_sec"`
	// CommitFloor*: records arriving at CommitFloorRate per second, each
	// appended to our eventlog and fsynced by a group commit as a PHB's
	// log does, nothing else running: the latency from a record's arrival
	// to the end of its fsync (commitFloor). No system that fsyncs before
	// it acks can beat it at that rate on this disk.
	CommitFloorRate  int     `json:"commit_floor_rate,omitempty"`
	CommitFloorP50us float64 `json:"commit_floor_p50_us,omitempty"`
	CommitFloorP99us float64 `json:"commit_floor_p99_us,omitempty"`
	CPUs             int     `json:"cpus"`
	Load1            string  `json:"loadavg"`
}

// MeasureMachine measures fsync latency, the eventlog's group-commit
// ceiling and loopback TCP bandwidth, each for about a second (less when
// quick), and, when rate > 0, the group-commit latency floor at rate
// records per second, for twice as long.
func MeasureMachine(ctx context.Context, dir string, quick bool, rate int) (Machine, error) {
	d := time.Second
	if quick {
		d = 200 * time.Millisecond
	}
	var m Machine
	var err error
	if m.FsyncP50us, m.FsyncP99us, err = fsyncLatency(ctx, dir, d); err != nil {
		return m, err
	}
	if m.GroupCommitPerS, err = groupCommit(ctx, dir, d); err != nil {
		return m, err
	}
	if m.LoopbackMBPerSec, err = loopback(ctx, d); err != nil {
		return m, err
	}
	if rate > 0 {
		m.CommitFloorRate = rate
		if m.CommitFloorP50us, m.CommitFloorP99us, err = commitFloor(ctx, dir, rate, 2*d); err != nil {
			return m, err
		}
	}
	m.CPUs = numCPU()
	if b, err := os.ReadFile("/proc/loadavg"); err == nil && len(b) > 0 {
		m.Load1 = string(b[:len(b)-1])
	}
	return m, nil
}

// fsyncLatency: write 256 bytes and fsync, repeatedly, on the data disk.
func fsyncLatency(ctx context.Context, dir string, d time.Duration) (p50, p99 float64, err error) {
	f, err := os.CreateTemp(dir, "fsync-")
	if err != nil {
		return 0, 0, fmt.Errorf("bench: fsync probe: %w", err)
	}
	defer os.Remove(f.Name())
	defer f.Close()
	h := hdrhistogram.New(1, 10_000_000, 3)
	rec := make([]byte, 256)
	for end := time.Now().Add(d); time.Now().Before(end) && ctx.Err() == nil; {
		t0 := time.Now()
		if _, err := f.Write(rec); err != nil {
			return 0, 0, fmt.Errorf("bench: fsync probe write: %w", err)
		}
		if err := f.Sync(); err != nil {
			return 0, 0, fmt.Errorf("bench: fsync probe: %w", err)
		}
		h.RecordValue(max(time.Since(t0).Microseconds(), 1))
	}
	return float64(h.ValueAtQuantile(50)), float64(h.ValueAtQuantile(99)), ctx.Err()
}

// groupCommit: 256 records of 256 bytes per fsync through our eventlog —
// the most a durable pubend can log on this disk.
func groupCommit(ctx context.Context, dir string, d time.Duration) (float64, error) {
	ldir := filepath.Join(dir, "groupcommit")
	if err := os.MkdirAll(ldir, 0o755); err != nil {
		return 0, fmt.Errorf("bench: group commit probe: %w", err)
	}
	defer os.RemoveAll(ldir)
	l, _, err := eventlog.Open(vfs.OS(), ldir, eventlog.Options{})
	if err != nil {
		return 0, fmt.Errorf("bench: group commit probe: %w", err)
	}
	defer l.Close()
	rec := make([]byte, 256)
	n := 0
	t0 := time.Now()
	for time.Since(t0) < d && ctx.Err() == nil {
		for range 256 {
			if _, err := l.Append(rec); err != nil {
				return 0, fmt.Errorf("bench: group commit probe: %w", err)
			}
		}
		if err := l.Sync(); err != nil {
			return 0, fmt.Errorf("bench: group commit probe: %w", err)
		}
		n += 256
	}
	return float64(n) / time.Since(t0).Seconds(), ctx.Err()
}

// commitFloor: 256-byte records arrive on a fixed schedule of rate per
// second; a group commit appends every record that has arrived to our
// eventlog and fsyncs them, then takes the next ones, as a PHB's log does
// (a record that arrives during an fsync waits for it, then for its own).
// It returns the p50 and p99 in µs from each record's scheduled arrival to
// the end of its fsync: the floor of a durable system's latency at that
// rate on this disk. The p99 counts the rare slow fsync many times over,
// once for every record that queued behind it, where the fsync probe
// counts it once.
func commitFloor(ctx context.Context, dir string, rate int, d time.Duration) (p50, p99 float64, err error) {
	ldir := filepath.Join(dir, "commitfloor")
	if err := os.MkdirAll(ldir, 0o755); err != nil {
		return 0, 0, fmt.Errorf("bench: commit floor probe: %w", err)
	}
	defer os.RemoveAll(ldir)
	l, _, err := eventlog.Open(vfs.OS(), ldir, eventlog.Options{DropSynced: true})
	if err != nil {
		return 0, 0, fmt.Errorf("bench: commit floor probe: %w", err)
	}
	defer l.Close()
	pace := newSleeper()
	defer pace.close()
	h := hdrhistogram.New(1, 10_000_000, 3)
	rec := make([]byte, 256)
	iv := time.Second / time.Duration(rate)
	n := int(d / iv)
	start := time.Now()
	arrival := func(i int) time.Time { return start.Add(time.Duration(i) * iv) }
	for next := 0; next < n && ctx.Err() == nil; {
		due := min(int(time.Since(start)/iv)+1, n) // the records arrived by now
		if due <= next {
			pace.sleep(time.Until(arrival(next))) // pacing the schedule, not synchronisation
			continue
		}
		for range due - next {
			if _, err := l.Append(rec); err != nil {
				return 0, 0, fmt.Errorf("bench: commit floor probe: %w", err)
			}
		}
		if err := l.Sync(); err != nil {
			return 0, 0, fmt.Errorf("bench: commit floor probe: %w", err)
		}
		end := time.Now()
		for i := next; i < due; i++ {
			h.RecordValue(max(end.Sub(arrival(i)).Microseconds(), 1))
		}
		next = due
	}
	return float64(h.ValueAtQuantile(50)), float64(h.ValueAtQuantile(99)), ctx.Err()
}

// loopback: one TCP connection on 127.0.0.1, 64 KiB writes, for d.
func loopback(ctx context.Context, d time.Duration) (float64, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, fmt.Errorf("bench: loopback probe: %w", err)
	}
	defer ln.Close()
	got := make(chan int64, 1)
	go func() {
		c, err := ln.Accept()
		if err != nil {
			got <- 0
			return
		}
		defer c.Close()
		n, _ := io.Copy(io.Discard, c)
		got <- n
	}()
	var dl net.Dialer
	c, err := dl.DialContext(ctx, "tcp", ln.Addr().String())
	if err != nil {
		return 0, fmt.Errorf("bench: loopback probe: %w", err)
	}
	buf := make([]byte, 64<<10)
	t0 := time.Now()
	for time.Since(t0) < d && ctx.Err() == nil {
		if _, err := c.Write(buf); err != nil {
			c.Close()
			return 0, fmt.Errorf("bench: loopback probe: %w", err)
		}
	}
	c.Close()
	n := <-got
	return float64(n) / (1 << 20) / time.Since(t0).Seconds(), ctx.Err()
}
