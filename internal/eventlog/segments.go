package eventlog

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
)

// SegmentInfo describes one segment of the log: records [Base, Next),
// Size bytes. Sealed segments are never written again; the last is
// active (its Next and Size grow).
type SegmentInfo struct {
	Base, Next uint64
	Path       string
	Size       int64
	Sealed     bool
}

// Segments describes the log's segments, oldest first.
func (l *Log) Segments() []SegmentInfo {
	out := make([]SegmentInfo, len(l.segs))
	for i, s := range l.segs {
		out[i] = SegmentInfo{Base: s.base, Path: s.path, Size: s.size, Sealed: i < len(l.segs)-1}
		if i+1 < len(l.segs) {
			out[i].Next = l.segs[i+1].base
		} else {
			out[i].Next, out[i].Size = l.flushed, l.activeSize
		}
	}
	return out
}

// FirstFrame returns the length and checksum of the first frame of the
// segment at base, as its header gives them (without reading the
// payload): with its size, what tells one segment from another written at
// the same index by another incarnation of the log (a summary of it kept
// beside the log, internal/storage). A segment with no frame returns 0, 0.
func (l *Log) FirstFrame(base uint64) (length, crc uint32, err error) {
	for i, s := range l.segs {
		if s.base != base {
			continue
		}
		if i == len(l.segs)-1 {
			return readFrameHeader(l.active)
		}
		f, err := l.fs.Open(s.path)
		if err != nil {
			return 0, 0, fmt.Errorf("eventlog: open segment: %w", err)
		}
		defer f.Close()
		return readFrameHeader(f)
	}
	return 0, 0, fmt.Errorf("%w: no segment starts at index %d", ErrOutOfRange, base)
}

func readFrameHeader(f interface {
	ReadAt([]byte, int64) (int, error)
}) (length, crc uint32, err error) {
	var h [frameHeaderSize]byte
	if _, err := f.ReadAt(h[:], 0); err != nil {
		if errors.Is(err, io.EOF) {
			return 0, 0, nil
		}
		return 0, 0, fmt.Errorf("eventlog: read frame header: %w", err)
	}
	return binary.LittleEndian.Uint32(h[0:4]), binary.LittleEndian.Uint32(h[4:8]), nil
}

// Verify reads every frame of the sealed segment at base and checks it, as
// Open does without Options.LazySealed: damage is reported with an error
// wrapping ErrCorrupt that names the file and offset. It also notes the
// segment's marks, so that later reads of it start near what they want.
func (l *Log) Verify(base uint64) error {
	if err := l.usable(); err != nil {
		return err
	}
	for i, s := range l.segs {
		if s.base == base && i < len(l.segs)-1 {
			return l.replaySegment(i, s.base, func(uint64, []byte) error { return nil })
		}
	}
	return fmt.Errorf("%w: no sealed segment starts at index %d", ErrOutOfRange, base)
}

// ActiveBase returns the index of the active segment's first record: it
// changes when a segment is sealed.
func (l *Log) ActiveBase() uint64 { return l.segs[len(l.segs)-1].base }

// Dir returns the log's directory.
func (l *Log) Dir() string { return l.dir }
