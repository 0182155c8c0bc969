package wire

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"io"

	"github.com/aerie-mq/aerie/internal/msg"
)

const (
	// readBufSize is the read-ahead buffer a Reader puts in front of a
	// plain io.Reader (one syscall serves many small frames).
	readBufSize = 32 << 10
	// keepBuf is the largest frame buffer a Reader keeps between frames;
	// a larger frame gets a buffer of its own that is then dropped, so one
	// big frame does not pin its memory for the life of the connection.
	keepBuf = 64 << 10
	// growStep is how much of a large frame is allocated before its bytes
	// arrive: a peer announcing a 16 MiB frame and sending nothing costs
	// at most this much.
	growStep = 64 << 10
	// slabSize is the write-once memory that viewed Publish frames of up
	// to slabFrameMax bytes are carved from, one after another, instead
	// of each getting an allocation of its own (ViewFrames).
	slabSize     = msg.SmallAllocMax
	slabFrameMax = 2 << 10
)

// Reader reads frames from a stream. It is not safe for concurrent use.
type Reader struct {
	r     *bufio.Reader
	max   int
	buf   []byte
	off   int64 // stream offset of the next frame
	count int64 // frames read
	err   error // sticky: after any error the stream is not resynchronised
	// view: a frame that carries events or a publish is read into memory
	// of its own, which they view (ViewFrames).
	view bool
	// slab is where the next small Publish frame is carved from, when
	// viewing: its bytes up to len are taken, and never written again.
	slab []byte
	// hdr holds a length prefix as it is read (a local array would escape
	// through io.ReadFull: an allocation per frame).
	hdr [4]byte
}

// ViewFrames makes the Reader read each frame that carries events or a
// publish (Knowledge, KnowledgeRun, Delivery, DeliveryRun, Payloads, Publish, PublishRun, and Relay or Forward
// around them) into memory of its own, which nothing writes again, and
// decode it viewing that memory: the events' bytes are not copied again
// out of a reused buffer, so an event is forwarded as the bytes it
// arrived in. An event pins only its own frame (a few bytes more than
// itself, or the KnowledgeRun it came in: events of one pubend, at most
// gd.RunBytesMax of them), so the caches' byte bounds still bound memory.
// Small Publish frames are the exception: a broker turns a publish into an
// event of its own encoding (msg.NewEvent) and lets the publish go, so
// they are carved one after another from a shared block of 32 KiB
// instead, one allocation for many publishes; a publish kept longer keeps
// its block.
func (r *Reader) ViewFrames() { r.view = true }

// NewReader returns a Reader over r that refuses frames (type byte and body)
// longer than maxFrame; maxFrame <= 0 means DefaultMaxFrame. A *bufio.Reader
// is used as is; any other r gets a read-ahead buffer, so the Reader owns r.
func NewReader(r io.Reader, maxFrame int) *Reader {
	if maxFrame <= 0 {
		maxFrame = DefaultMaxFrame
	}
	br, ok := r.(*bufio.Reader)
	if !ok {
		br = bufio.NewReaderSize(r, readBufSize)
	}
	return &Reader{r: br, max: maxFrame}
}

// Next reads and decodes the next frame. It returns io.EOF when the stream
// ends cleanly between frames, and otherwise an error wrapping
// io.ErrUnexpectedEOF (the stream ends inside a frame), ErrFrameTooLarge
// (checked before anything is allocated for the frame), ErrUnknownType,
// ErrMalformed, or the underlying reader's error, with the frame's number
// and stream offset. Errors are sticky: once Next fails it keeps failing.
func (r *Reader) Next() (msg.Msg, error) {
	if r.err != nil {
		return nil, r.err
	}
	m, err := r.next()
	if err != nil {
		r.err = err
		return nil, err
	}
	return m, nil
}

// Ready reports whether a whole frame is already buffered, so that Next
// returns without reading from the stream (and so without blocking): a
// caller collecting a burst of frames stops at the first one that is not
// all there, rather than wait for its rest with the burst undelivered.
func (r *Reader) Ready() bool {
	if r.err != nil {
		return false
	}
	n := r.r.Buffered()
	if n < 4 {
		return false
	}
	hdr, err := r.r.Peek(4)
	if err != nil {
		return false
	}
	return uint64(binary.LittleEndian.Uint32(hdr)) <= uint64(n-4)
}

func (r *Reader) next() (msg.Msg, error) {
	hdr := r.hdr[:]
	if n, err := io.ReadFull(r.r, hdr); err != nil {
		if err == io.EOF {
			return nil, io.EOF
		}
		return nil, r.wrap(fmt.Errorf("length prefix (%d of 4 bytes): %w", n, err))
	}
	size := binary.LittleEndian.Uint32(hdr)
	if uint64(size) > uint64(r.max) {
		return nil, r.wrap(fmt.Errorf("%w: length %d, at most %d allowed", ErrFrameTooLarge, size, r.max))
	}
	if size == 0 {
		return nil, r.wrap(fmt.Errorf("%w: length 0 (no type byte)", ErrMalformed))
	}
	read, view := r.readFrame, false
	if r.view {
		switch t, ok := r.peekType(); {
		case ok && (t == TypePublish || t == TypePublishNoAck) && size <= slabFrameMax:
			read, view = r.readSlab, true
		case ok && carriesEvents(t):
			read, view = r.readLarge, true
		}
	}
	frame, err := read(int(size))
	if err != nil {
		if errors.Is(err, io.EOF) {
			err = io.ErrUnexpectedEOF
		}
		return nil, r.wrap(fmt.Errorf("%d-byte frame (%d read): %w", size, len(frame), err))
	}
	m, err := decode(frame, view)
	if err != nil {
		return nil, r.wrap(err)
	}
	r.off += 4 + int64(size)
	r.count++
	return m, nil
}

func (r *Reader) wrap(err error) error {
	return fmt.Errorf("frame %d at stream offset %d: %w", r.count, r.off, err)
}

// peekType returns the type byte of the next frame, whose length prefix
// was read, if it is buffered or readable (ok false otherwise, and the read
// reports the error).
func (r *Reader) peekType() (Type, bool) {
	b, err := r.r.Peek(1)
	if err != nil {
		return 0, false
	}
	return Type(b[0]), true
}

// carriesEvents reports whether frames of type t carry events or a publish.
func carriesEvents(t Type) bool {
	switch t {
	case TypeKnowledge, TypeKnowledgeRun, TypeDelivery, TypeDeliveryRun, TypePayloads, TypePublish, TypePublishRun, TypePublishNoAck, TypePublishRunNoAck, TypeRelay, TypeForward:
		return true
	}
	return false
}

// readSlab reads n bytes (at most slabFrameMax) into the next n bytes of
// the slab, starting a new slab when this one has no room. The bytes are
// never written again: the next frame takes the bytes after them. On
// error it returns what was read.
func (r *Reader) readSlab(n int) ([]byte, error) {
	if cap(r.slab)-len(r.slab) < n {
		r.slab = make([]byte, 0, slabSize)
	}
	at := len(r.slab)
	b := r.slab[at : at+n : at+n]
	got, err := io.ReadFull(r.r, b)
	r.slab = r.slab[:at+got]
	return b[:got], err
}

// readFrame reads n bytes. Frames up to keepBuf reuse r.buf; larger ones
// grow a fresh buffer step by step as their bytes arrive. On error it
// returns what was read.
func (r *Reader) readFrame(n int) ([]byte, error) {
	if n <= keepBuf {
		if cap(r.buf) < n {
			r.buf = make([]byte, max(n, 512))
		}
		b := r.buf[:n]
		got, err := io.ReadFull(r.r, b)
		return b[:got], err
	}
	return r.readLarge(n)
}

// readLarge reads n bytes into a fresh buffer, grown step by step as they
// arrive (a frame up to growStep is one allocation of its exact size).
func (r *Reader) readLarge(n int) ([]byte, error) {
	var b []byte
	for len(b) < n {
		step := min(n-len(b), max(len(b), growStep))
		if cap(b)-len(b) < step {
			nb := make([]byte, len(b), len(b)+step)
			copy(nb, b)
			b = nb
		}
		got, err := io.ReadFull(r.r, b[len(b):len(b)+step])
		b = b[:len(b)+got]
		if err != nil {
			return b, err
		}
	}
	return b, nil
}
