package eventlog

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"

	"github.com/aerie-mq/aerie/internal/vfs"
)

const frameHeaderSize = 8 // uint32 length + uint32 crc32c

// castagnoli is read-only after package initialisation.
var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// appendFrame appends the frame for payload to dst.
func appendFrame(dst, payload []byte) []byte {
	dst = binary.LittleEndian.AppendUint32(dst, uint32(len(payload)))
	dst = binary.LittleEndian.AppendUint32(dst, crc32.Checksum(payload, castagnoli))
	return append(dst, payload...)
}

// putFrameHeader fills in the header of frame, whose payload follows the
// header's frameHeaderSize bytes to the end of frame.
func putFrameHeader(frame []byte) {
	payload := frame[frameHeaderSize:]
	binary.LittleEndian.PutUint32(frame, uint32(len(payload)))
	binary.LittleEndian.PutUint32(frame[4:], crc32.Checksum(payload, castagnoli))
}

// frameLen returns the total size of the well-formed frame at the start of
// b, which must come from appendFrame.
func frameLen(b []byte) int {
	return frameHeaderSize + int(binary.LittleEndian.Uint32(b))
}

// badFrame says why the frame at off cannot be decoded. Whether that is a
// torn tail or corruption is decided by the caller, which knows where in the
// log the frame sits.
type badFrame struct {
	off    int64
	reason string
}

func (b *badFrame) Error() string { return fmt.Sprintf("offset %d: %s", b.off, b.reason) }

// checkHeader validates a frame header against the bytes left in the file
// (counted from the start of the header).
func checkHeader(length uint32, left int64, maxRecord int) string {
	switch {
	case length == 0:
		return "zero-length frame"
	case uint64(length) > uint64(maxRecord):
		return fmt.Sprintf("frame length %d exceeds MaxRecordBytes %d", length, maxRecord)
	case int64(length) > left-frameHeaderSize:
		return fmt.Sprintf("frame length %d runs past end of file (%d bytes left)", length, left)
	}
	return ""
}

// frameReader decodes frames sequentially from the first size bytes of a
// segment file, through a buffer so that small records do not cost two
// reads each.
type frameReader struct {
	br        *bufio.Reader
	off       int64 // offset of the next frame
	size      int64
	maxRecord int
	hdr       [frameHeaderSize]byte
}

func newFrameReader(f vfs.File, size int64, maxRecord int) *frameReader {
	return newFrameReaderAt(f, 0, size, maxRecord)
}

// newFrameReaderAt reads frames from offset start, which must be the start
// of a frame, up to size; offsets it reports stay file offsets.
func newFrameReaderAt(f vfs.File, start, size int64, maxRecord int) *frameReader {
	// No point in a buffer bigger than the data (bufio rounds tiny sizes
	// up to its minimum).
	bufSize := int(min(size-start, 256<<10))
	return &frameReader{
		br:        bufio.NewReaderSize(io.NewSectionReader(f, start, size-start), bufSize),
		off:       start,
		size:      size,
		maxRecord: maxRecord,
	}
}

// next decodes the next frame. The payload is stored in buf when it fits
// (so callers that skip records can reuse one buffer) and freshly allocated
// otherwise. It returns io.EOF at a clean end of data, a *badFrame for an
// undecodable frame (after which the reader must not be used), and any
// other error for a failed read.
func (r *frameReader) next(buf []byte) ([]byte, error) {
	left := r.size - r.off
	if left == 0 {
		return nil, io.EOF
	}
	if left < frameHeaderSize {
		return nil, &badFrame{r.off, fmt.Sprintf("incomplete frame header (%d bytes)", left)}
	}
	if _, err := io.ReadFull(r.br, r.hdr[:]); err != nil {
		return nil, readErr(err)
	}
	length := binary.LittleEndian.Uint32(r.hdr[0:4])
	sum := binary.LittleEndian.Uint32(r.hdr[4:8])
	if reason := checkHeader(length, left, r.maxRecord); reason != "" {
		return nil, &badFrame{r.off, reason}
	}
	var payload []byte
	if int(length) <= cap(buf) {
		payload = buf[:length]
	} else {
		payload = make([]byte, length)
	}
	if _, err := io.ReadFull(r.br, payload); err != nil {
		return nil, readErr(err)
	}
	if got := crc32.Checksum(payload, castagnoli); got != sum {
		return nil, &badFrame{r.off, fmt.Sprintf("checksum mismatch (stored %#08x, computed %#08x)", sum, got)}
	}
	r.off += frameHeaderSize + int64(length)
	return payload, nil
}

// readErr turns a short read into a real error: the reader never asks for
// bytes past size, so running out means the file shrank under us.
func readErr(err error) error {
	if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
		return fmt.Errorf("file shorter than expected: %w", io.ErrUnexpectedEOF)
	}
	return err
}

// findValidFrame looks for a well-formed frame starting at any offset in
// [from, size). A crash leaves valid frames followed only by garbage, so a
// valid frame after a bad one means the bad one is corruption in the middle
// of the log, not a torn tail.
//
// The search reads the rest of the file into memory and may checksum a
// frame candidate at every byte offset; that is acceptable because it only
// runs on the tail of the last segment, after a bad frame, at Open.
func findValidFrame(f vfs.File, from, size int64, maxRecord int) (off int64, found bool, err error) {
	if size-from < frameHeaderSize+1 {
		return 0, false, nil
	}
	tail := make([]byte, size-from)
	if n, err := f.ReadAt(tail, from); n < len(tail) {
		return 0, false, readErr(err)
	}
	for p := 0; p+frameHeaderSize < len(tail); p++ {
		length := binary.LittleEndian.Uint32(tail[p:])
		if checkHeader(length, int64(len(tail)-p), maxRecord) != "" {
			continue
		}
		payload := tail[p+frameHeaderSize : p+frameHeaderSize+int(length)]
		if crc32.Checksum(payload, castagnoli) == binary.LittleEndian.Uint32(tail[p+4:]) {
			return from + int64(p), true, nil
		}
	}
	return 0, false, nil
}
