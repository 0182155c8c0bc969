package storage

import (
	"encoding/binary"
	"errors"
	"fmt"

	"github.com/aerie-mq/aerie/internal/eventlog"
	"github.com/aerie-mq/aerie/internal/vfs"
)

// Image is a store's content as it is on disk: the payloads of its
// snapshot and of its log's records from index First. A replicated PHB
// member that needs entries its leader's Raft log compacted installs the
// leader's store image (internal/raftphb/node).
type Image struct {
	Snapshot [][]byte
	First    uint64
	Records  [][]byte
}

// ErrBadImage reports an encoded image that does not decode.
var ErrBadImage = errors.New("storage: bad store image")

// Image reads the store's content back. It reads the log's files: Sync
// first, or the records appended since are missing.
func (s *Store) Image() (Image, error) {
	snap, err := eventlog.ReadSnapshot(s.fs, s.snapPath)
	if err != nil {
		return Image{}, fmt.Errorf("storage: image: %w", err)
	}
	img := Image{Snapshot: snap, First: s.log.FirstIndex()}
	err = s.log.Replay(img.First, func(_ uint64, p []byte) error {
		img.Records = append(img.Records, append([]byte(nil), p...))
		return nil
	})
	if err != nil {
		return Image{}, fmt.Errorf("storage: image: %w", err)
	}
	return img, nil
}

// Next is the index after the image's last record.
func (img Image) Next() uint64 { return img.First + uint64(len(img.Records)) }

// Encode appends the image's encoding to dst:
//
//	first uvarint | n uvarint | (len uvarint | payload)*n | m uvarint | (len uvarint | payload)*m
//
// the n snapshot payloads, then the m log records.
func (img Image) Encode(dst []byte) []byte {
	dst = AppendImageHead(dst, img.First, img.Snapshot, uint64(len(img.Records)))
	for _, p := range img.Records {
		dst = AppendImageRecord(dst, p)
	}
	return dst
}

// AppendImageHead appends the start of an image's encoding (Encode): its
// first index, snapshot and record count, which AppendImageRecord's
// records follow. An image can so be encoded piece by piece, as its
// records are read (ImageSource).
func AppendImageHead(dst []byte, first uint64, snapshot [][]byte, records uint64) []byte {
	dst = binary.AppendUvarint(dst, first)
	dst = binary.AppendUvarint(dst, uint64(len(snapshot)))
	for _, p := range snapshot {
		dst = AppendImageRecord(dst, p)
	}
	return binary.AppendUvarint(dst, records)
}

// AppendImageRecord appends one payload of an image's encoding.
func AppendImageRecord(dst, p []byte) []byte {
	dst = binary.AppendUvarint(dst, uint64(len(p)))
	return append(dst, p...)
}

// ImageSource is the state of an image's encoding read piece by piece
// (Store.ReadImage), its records read as it goes, so that a large image
// is never held whole. The image is the store's content when the source
// was made; records appended since are not part of it. It holds no
// reference to the store: a store closed and opened again in between
// (a replicated PHB member's serve) reads on where it left off, and a
// Trim that drops records it has not read yet fails the next read.
type ImageSource struct {
	next, end uint64 // the next record to encode; the image's end
	head      []byte // the encoding's start, until read
}

// errFull stops a Replay once a read has what it asked for.
var errFull = errors.New("storage: image piece full")

// ImageSource returns a source of the store's image.
func (s *Store) ImageSource() (*ImageSource, error) {
	snap, err := eventlog.ReadSnapshot(s.fs, s.snapPath)
	if err != nil {
		return nil, fmt.Errorf("storage: image: %w", err)
	}
	first, end := s.Bounds()
	return &ImageSource{next: first, end: end, head: AppendImageHead(nil, first, snap, end-first)}, nil
}

// Next is the index after the image's last record.
func (src *ImageSource) Next() uint64 { return src.end }

// ReadImage appends at least n bytes of src's next part to dst (less at
// its end; done once it is all read).
func (s *Store) ReadImage(src *ImageSource, dst []byte, n int) (out []byte, done bool, err error) {
	start := len(dst)
	dst = append(dst, src.head...)
	src.head = nil
	if src.next < src.end && len(dst)-start < n {
		err := s.log.Replay(src.next, func(i uint64, p []byte) error {
			if i >= src.end {
				return errFull
			}
			dst = AppendImageRecord(dst, p)
			src.next = i + 1
			if len(dst)-start >= n {
				return errFull
			}
			return nil
		})
		if err != nil && !errors.Is(err, errFull) {
			return dst, false, fmt.Errorf("storage: image at record %d: %w", src.next, err)
		}
	}
	return dst, src.next == src.end, nil
}

// DecodeImage decodes Image.Encode's encoding; the payloads alias b.
func DecodeImage(b []byte) (Image, error) {
	var img Image
	first, k := binary.Uvarint(b)
	if k <= 0 {
		return img, fmt.Errorf("%w: first index", ErrBadImage)
	}
	img.First, b = first, b[k:]
	for _, ps := range []*[][]byte{&img.Snapshot, &img.Records} {
		n, k := binary.Uvarint(b)
		if k <= 0 || n > uint64(len(b)) {
			return img, fmt.Errorf("%w: count", ErrBadImage)
		}
		b = b[k:]
		for i := uint64(0); i < n; i++ {
			l, k := binary.Uvarint(b)
			if k <= 0 || l > uint64(len(b)-k) {
				return img, fmt.Errorf("%w: payload %d length", ErrBadImage, i)
			}
			*ps = append(*ps, b[k:k+int(l)])
			b = b[k+int(l):]
		}
	}
	if len(b) != 0 {
		return img, fmt.Errorf("%w: %d trailing bytes", ErrBadImage, len(b))
	}
	return img, nil
}

// Install creates a store in dir (which must hold no log) with snapPath
// as its snapshot, holding img, and syncs it: durable when it returns.
func Install(fsys vfs.FS, dir, snapPath string, opts eventlog.Options, img Image) (*Store, error) {
	i := 0
	return install(fsys, dir, snapPath, opts, img.First, img.Snapshot, func() ([]byte, error) {
		if i == len(img.Records) {
			return nil, nil
		}
		i++
		return img.Records[i-1], nil
	})
}

// install creates the store of Install from the records next returns
// (nil after the last).
func install(fsys vfs.FS, dir, snapPath string, opts eventlog.Options, first uint64, snapshot [][]byte, next func() ([]byte, error)) (*Store, error) {
	if err := eventlog.WriteSnapshot(fsys, snapPath, snapshot); err != nil {
		return nil, fmt.Errorf("storage: install: %w", err)
	}
	opts.Base, opts.LazySealed = first, true
	l, _, err := eventlog.Open(fsys, dir, opts)
	if err != nil {
		return nil, fmt.Errorf("storage: install: %w", err)
	}
	if l.FirstIndex() != first || l.NextIndex() != first {
		l.Close()
		return nil, fmt.Errorf("storage: install into %s: it holds records %d to %d", dir, l.FirstIndex(), l.NextIndex())
	}
	s := newStore(fsys, snapPath, l)
	for {
		p, err := next()
		if err == nil && p == nil {
			break
		}
		if err == nil {
			_, err = s.AppendEncoded([][]byte{p})
		}
		if err == nil && len(s.sum.entries) >= 1<<16 {
			err = s.Flush() // seals the segments it fills, and summarises them
		}
		if err != nil {
			l.Close()
			return nil, fmt.Errorf("storage: install: %w", err)
		}
	}
	if err := s.Sync(); err != nil {
		l.Close()
		return nil, fmt.Errorf("storage: install: %w", err)
	}
	return s, nil
}
