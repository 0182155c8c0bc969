package pfs_test

import (
	"fmt"
	"path/filepath"
	"sync/atomic"
	"testing"

	"github.com/aerie-mq/aerie/internal/eventlog"
	"github.com/aerie-mq/aerie/internal/pfs"
	"github.com/aerie-mq/aerie/internal/tick"
	"github.com/aerie-mq/aerie/internal/vfs"
)

// The PFS microbenchmark of Gryphon DS, DSN 2003 §5.1.2: the SHB of the
// one-SHB experiment records, for its durable subscribers, what each
// event matched — either in the PFS (one record per event naming the
// subscribers it matched) or by logging the whole event once per matching
// subscriber. 800 events/s over 4 pubends, 100 subscribers each matching
// one pubend (200 events/s, so each event matches 25), 418-byte events,
// everything synced once per second of workload and the last 5 s (1000
// events per subscriber) kept. One benchmark op is one second of
// workload; the paper ran 100 (-benchtime=100x). It reports disk bytes
// written and fsyncs per op.
const (
	dsPubends     = 4
	dsSubscribers = 100
	dsPerPubend   = 200 // events per second per pubend
	dsEventBytes  = 418 // 250-byte payload with headers, as in the paper
	dsKeepSeconds = 5
	dsSegment     = 64 << 10
)

// countFS counts the bytes written and the fsyncs through it.
type countFS struct {
	vfs.FS
	bytes, syncs *atomic.Int64
}

type countFile struct {
	vfs.File
	fs countFS
}

func (c countFS) Create(name string) (vfs.File, error) { return c.wrap(c.FS.Create(name)) }
func (c countFS) Open(name string) (vfs.File, error)   { return c.wrap(c.FS.Open(name)) }
func (c countFS) SyncDir(dir string) error {
	c.syncs.Add(1)
	return c.FS.SyncDir(dir)
}

func (c countFS) wrap(f vfs.File, err error) (vfs.File, error) {
	if err != nil {
		return nil, err
	}
	return countFile{File: f, fs: c}, nil
}

func (f countFile) Write(p []byte) (int, error) {
	f.fs.bytes.Add(int64(len(p)))
	return f.File.Write(p)
}

func (f countFile) Sync() error {
	f.fs.syncs.Add(1)
	return f.File.Sync()
}

func newCountFS() countFS {
	return countFS{FS: vfs.OS(), bytes: new(atomic.Int64), syncs: new(atomic.Int64)}
}

// dsTick is the tick of event k (0–199) of pubend p in workload second sec.
func dsTick(sec, k int) tick.Tick { return tick.FromMillis(int64(1_000_000 + sec*1000 + k*5)) }

// matching returns the subscribers of pubend p: those numbered p mod 4.
func matching(p int) []pfs.SubID {
	var out []pfs.SubID
	for s := p; s < dsSubscribers; s += dsPubends {
		out = append(out, pfs.SubID(s+1))
	}
	return out
}

func report(b *testing.B, fsys countFS) {
	b.ReportMetric(float64(fsys.bytes.Load())/float64(b.N), "disk-B/op")
	b.ReportMetric(float64(fsys.syncs.Load())/float64(b.N), "fsyncs/op")
}

// BenchmarkDSRecordMatches compares the two ways of recording matches.
func BenchmarkDSRecordMatches(b *testing.B) {
	b.Run("pfs", benchPFS)
	b.Run("event-log-per-subscriber", benchEventLogs)
}

// benchPFS: one PFS per pubend; per event one match record, per second a
// cover and a sync of each, and release of what is older than 5 s.
func benchPFS(b *testing.B) {
	fsys := newCountFS()
	dir := b.TempDir()
	var ps [dsPubends]*pfs.PFS
	var subs [dsPubends][]pfs.SubID
	for p := range ps {
		var err error
		if ps[p], _, err = pfs.Open(fsys, filepath.Join(dir, fmt.Sprint(p)), eventlog.Options{SegmentBytes: dsSegment}); err != nil {
			b.Fatal(err)
		}
		defer ps[p].Close()
		subs[p] = matching(p)
	}
	fsys.bytes.Store(0)
	fsys.syncs.Store(0)
	b.ResetTimer()
	for sec := 0; sec < b.N; sec++ {
		for k := range dsPerPubend {
			for p := range ps {
				if err := ps[p].Match(dsTick(sec, k), subs[p]); err != nil {
					b.Fatal(err)
				}
			}
		}
		for p := range ps {
			if err := ps[p].Cover(dsTick(sec, dsPerPubend-1)); err != nil {
				b.Fatal(err)
			}
			if err := ps[p].Sync(); err != nil {
				b.Fatal(err)
			}
			if sec >= dsKeepSeconds {
				if err := ps[p].Release(dsTick(sec-dsKeepSeconds, dsPerPubend-1)); err != nil {
					b.Fatal(err)
				}
			}
		}
	}
	b.StopTimer()
	report(b, fsys)
}

// benchEventLogs: one event log per subscriber; each event appended whole
// to the log of every subscriber it matched, every log synced once per
// second, and what is older than 5 s released.
func benchEventLogs(b *testing.B) {
	fsys := newCountFS()
	dir := b.TempDir()
	logs := make([]*eventlog.Log, dsSubscribers)
	for s := range logs {
		var err error
		if logs[s], _, err = eventlog.Open(fsys, filepath.Join(dir, fmt.Sprint(s)), eventlog.Options{SegmentBytes: dsSegment}); err != nil {
			b.Fatal(err)
		}
		defer logs[s].Close()
	}
	event := make([]byte, dsEventBytes)
	perSecond := uint64(dsPerPubend) // each subscriber gets one pubend's events
	fsys.bytes.Store(0)
	fsys.syncs.Store(0)
	b.ResetTimer()
	for sec := 0; sec < b.N; sec++ {
		for range dsPerPubend {
			for p := range dsPubends {
				for s := p; s < dsSubscribers; s += dsPubends {
					if _, err := logs[s].Append(event); err != nil {
						b.Fatal(err)
					}
				}
			}
		}
		for _, l := range logs {
			if err := l.Sync(); err != nil {
				b.Fatal(err)
			}
			if keep := dsKeepSeconds * perSecond; l.NextIndex() > keep && l.Removable(l.NextIndex()-keep) {
				if err := l.TruncateFront(l.NextIndex() - keep); err != nil {
					b.Fatal(err)
				}
			}
		}
	}
	b.StopTimer()
	report(b, fsys)
}
