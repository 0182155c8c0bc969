package storage

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"io"

	"github.com/aerie-mq/aerie/internal/eventlog"
	"github.com/aerie-mq/aerie/internal/vfs"
)

// ImageReader decodes an image's encoding (Image.Encode) from a reader,
// one record at a time, so that installing a large image (a replicated
// PHB member's chunked snapshot, staged in a file) never holds it whole.
type ImageReader struct {
	r *bufio.Reader
	// left bounds what the encoding may still take: no length read from
	// it allocates more.
	left int64
	// First and Snapshot are the image's; Records its record count.
	First    uint64
	Snapshot [][]byte
	Records  uint64
	read     uint64 // records read so far
}

// NewImageReader reads the start of an image's encoding of at most size
// bytes from r: its first index, snapshot and record count.
func NewImageReader(r io.Reader, size int64) (*ImageReader, error) {
	ir := &ImageReader{r: bufio.NewReaderSize(r, 1<<20), left: size}
	var err error
	if ir.First, err = ir.uvarint(); err != nil {
		return nil, fmt.Errorf("%w: first index: %v", ErrBadImage, err)
	}
	n, err := ir.uvarint()
	if err != nil || n > uint64(ir.left) {
		return nil, fmt.Errorf("%w: snapshot count", ErrBadImage)
	}
	for i := uint64(0); i < n; i++ {
		p, err := ir.payload()
		if err != nil {
			return nil, fmt.Errorf("%w: snapshot payload %d: %v", ErrBadImage, i, err)
		}
		ir.Snapshot = append(ir.Snapshot, p)
	}
	if ir.Records, err = ir.uvarint(); err != nil || ir.Records > uint64(ir.left) {
		return nil, fmt.Errorf("%w: record count", ErrBadImage)
	}
	return ir, nil
}

// Next is the index after the image's last record.
func (ir *ImageReader) Next() uint64 { return ir.First + ir.Records }

// Record returns the next record's payload; nil after the last, once the
// encoding is used up exactly.
func (ir *ImageReader) Record() ([]byte, error) {
	if ir.read == ir.Records {
		if _, err := ir.r.ReadByte(); err != io.EOF {
			return nil, fmt.Errorf("%w: bytes after the last record", ErrBadImage)
		}
		return nil, nil
	}
	p, err := ir.payload()
	if err != nil {
		return nil, fmt.Errorf("%w: record %d: %v", ErrBadImage, ir.First+ir.read, err)
	}
	ir.read++
	return p, nil
}

// Skip passes over the next n records.
func (ir *ImageReader) Skip(n uint64) error {
	for range n {
		if p, err := ir.Record(); err != nil || p == nil {
			return fmt.Errorf("%w: skip %d records: %v", ErrBadImage, n, err)
		}
	}
	return nil
}

func (ir *ImageReader) uvarint() (uint64, error) {
	v, err := binary.ReadUvarint(ir.r)
	ir.left -= int64(uvarintLen(v))
	if err == nil && ir.left < 0 {
		err = io.ErrUnexpectedEOF
	}
	return v, err
}

func (ir *ImageReader) payload() ([]byte, error) {
	l, err := ir.uvarint()
	if err != nil {
		return nil, err
	}
	if l > uint64(ir.left) {
		return nil, errors.New("payload longer than what is left")
	}
	p := make([]byte, l)
	if _, err := io.ReadFull(ir.r, p); err != nil {
		return nil, err
	}
	ir.left -= int64(l)
	return p, nil
}

func uvarintLen(v uint64) int { return len(binary.AppendUvarint(nil, v)) }

// InstallFrom is Install of the image ir reads, record by record.
func InstallFrom(fsys vfs.FS, dir, snapPath string, opts eventlog.Options, ir *ImageReader) (*Store, error) {
	return install(fsys, dir, snapPath, opts, ir.First, ir.Snapshot, ir.Record)
}
