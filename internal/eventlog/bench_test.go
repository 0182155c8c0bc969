package eventlog

import (
	"testing"

	"github.com/aerie-mq/aerie/internal/vfs"
)

// BenchmarkAppendSync measures group commit on the real filesystem: each
// iteration appends 256 records of 256 bytes and syncs once.
func BenchmarkAppendSync(b *testing.B) {
	const recordSize, perSync = 256, 256
	l, _, err := Open(vfs.OS(), b.TempDir(), Options{})
	if err != nil {
		b.Fatal(err)
	}
	defer l.Close()
	payload := make([]byte, recordSize)
	for i := range payload {
		payload[i] = byte(i)
	}
	b.SetBytes(recordSize * perSync)
	for b.Loop() {
		for range perSync {
			if _, err := l.Append(payload); err != nil {
				b.Fatal(err)
			}
		}
		if err := l.Sync(); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(b.N*perSync)/b.Elapsed().Seconds(), "records/s")
}
