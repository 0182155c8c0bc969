package storage

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io/fs"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/aerie-mq/aerie/internal/eventlog"
	"github.com/aerie-mq/aerie/internal/msg"
	"github.com/aerie-mq/aerie/internal/tick"
	"github.com/aerie-mq/aerie/internal/vfs"
)

// Segment summaries: what a restart needs of a sealed segment of the event
// log, without its payloads. A PHB that keeps millions of events for a
// durable subscriber that is away would otherwise read and decode them all
// (gigabytes) before it serves again, at every restart and at every Raft
// leader change. When a segment is sealed (fsynced, never written again),
// the store writes beside it, in a file named after it with ".sum" for
// ".log", one entry per record: for an event its pubend, tick, size
// (msg.EventSize), publisher and sequence number, a few bytes; any other
// record whole. A restart reads the summaries of the sealed segments and
// only the last segment's records (Load).
//
// The log's records are the durable truth; a summary is derived from them
// and may be lost, torn or stale (a crash, a log made again at the same
// indexes). So it is written without an fsync, and a restart uses it only
// when its checksum holds and it names the segment as it is: its first and
// next record index, its size in bytes and its first frame's length and
// checksum. Otherwise the restart reads the segment itself and writes the
// summary again.
//
// Format (integers are unsigned varints unless noted):
//
//	"aerie-sum-1\n" | base | next | size | first frame length | first frame crc |
//	n | pubend*n | m | publisher*m | entry*(next-base) | crc32c of all before (4 bytes LE)
//	entry: 0 | len | record                 (a record that is not an event)
//	     | k | tick delta | size | publisher index | seq delta (zigzag)
//	                                        (an event of the k-th pubend)
//
// Deltas are from the previous event of the same pubend (tick) and
// publisher (seq) in the summary, from 0 for the first.
const summaryMagic = "aerie-sum-1\n"

const summarySuffix = ".sum"

var summaryCRC = crc32.MakeTable(crc32.Castagnoli)

// sumEntry is one record of a segment being summarised.
type sumEntry struct {
	pubend    msg.PubendID // "" for a record that is not an event
	t         tick.Tick
	size      int64
	publisher string
	seq       uint64
	raw       []byte // the record, when not an event
}

// names interns the strings of summary entries: one copy of each pubend
// and publisher, not one per event, and none that keeps an event's memory
// (a view of its encoding) alive until its segment is sealed.
type names map[string]string

func (n names) of(s string) string {
	if c, ok := n[s]; ok {
		return c
	}
	c := strings.Clone(s)
	n[c] = c
	return c
}

// entryOf returns the summary entry of the record whose encoding is b,
// read into scratch (b may be a buffer the caller reuses).
func entryOf(b []byte, scratch *msg.Event, n names) (sumEntry, error) {
	ok, err := msg.ViewEventRecord(scratch, b)
	if err != nil {
		return sumEntry{}, err
	}
	if !ok {
		return sumEntry{raw: append([]byte(nil), b...)}, nil
	}
	return eventEntry(msg.Record{Pubend: scratch.Pubend, Event: scratch}, n), nil
}

// eventEntry is entryOf for an event record at hand.
func eventEntry(r msg.Record, n names) sumEntry {
	ev := r.Event
	return sumEntry{
		pubend: msg.PubendID(n.of(string(r.Pubend))), t: ev.Tick, size: int64(msg.EventSize(ev.Topic, ev.Props, ev.Payload)),
		publisher: n.of(ev.Publisher), seq: ev.Seq,
	}
}

// summaryName is the summary's path for the segment at segPath.
func summaryName(segPath string) string {
	return strings.TrimSuffix(segPath, ".log") + summarySuffix
}

// summaryID is how a summary names its segment.
type summaryID struct {
	base, next uint64
	size       int64
	frameLen   uint32
	frameCRC   uint32
}

// idOf names the segment seg of l as it is now.
func idOf(l *eventlog.Log, seg eventlog.SegmentInfo) (summaryID, error) {
	n, c, err := l.FirstFrame(seg.Base)
	if err != nil {
		return summaryID{}, err
	}
	return summaryID{base: seg.Base, next: seg.Next, size: seg.Size, frameLen: n, frameCRC: c}, nil
}

// encodeSummary encodes the summary of the segment id, whose records are
// entries.
func encodeSummary(id summaryID, entries []sumEntry) []byte {
	b := append([]byte(nil), summaryMagic...)
	b = binary.AppendUvarint(b, id.base)
	b = binary.AppendUvarint(b, id.next)
	b = binary.AppendUvarint(b, uint64(id.size))
	b = binary.AppendUvarint(b, uint64(id.frameLen))
	b = binary.AppendUvarint(b, uint64(id.frameCRC))
	pubends, publishers := map[msg.PubendID]int{}, map[string]int{}
	var pubList []msg.PubendID
	var pubrList []string
	for _, e := range entries {
		if e.raw != nil {
			continue
		}
		if _, ok := pubends[e.pubend]; !ok {
			pubends[e.pubend] = len(pubList)
			pubList = append(pubList, e.pubend)
		}
		if _, ok := publishers[e.publisher]; !ok {
			publishers[e.publisher] = len(pubrList)
			pubrList = append(pubrList, e.publisher)
		}
	}
	b = binary.AppendUvarint(b, uint64(len(pubList)))
	for _, p := range pubList {
		b = appendString(b, string(p))
	}
	b = binary.AppendUvarint(b, uint64(len(pubrList)))
	for _, p := range pubrList {
		b = appendString(b, p)
	}
	prevTick := make([]tick.Tick, len(pubList))
	prevSeq := make([]uint64, len(pubrList))
	for _, e := range entries {
		if e.raw != nil {
			b = append(b, 0)
			b = appendString(b, string(e.raw))
			continue
		}
		k, w := pubends[e.pubend], publishers[e.publisher]
		b = binary.AppendUvarint(b, uint64(k)+1)
		b = binary.AppendUvarint(b, uint64(e.t-prevTick[k]))
		b = binary.AppendUvarint(b, uint64(e.size))
		b = binary.AppendUvarint(b, uint64(w))
		b = binary.AppendVarint(b, int64(e.seq-prevSeq[w]))
		prevTick[k], prevSeq[w] = e.t, e.seq
	}
	return binary.LittleEndian.AppendUint32(b, crc32.Checksum(b, summaryCRC))
}

func appendString(b []byte, s string) []byte {
	b = binary.AppendUvarint(b, uint64(len(s)))
	return append(b, s...)
}

// errBadSummary reports a summary that does not hold: it is ignored.
var errBadSummary = errors.New("storage: bad segment summary")

// checkSummary checks the summary b's checksum, and that it describes the
// segment id.
func checkSummary(b []byte, id summaryID) error {
	if len(b) < len(summaryMagic)+4 || string(b[:len(summaryMagic)]) != summaryMagic {
		return fmt.Errorf("%w: no header", errBadSummary)
	}
	body := b[:len(b)-4]
	if crc32.Checksum(body, summaryCRC) != binary.LittleEndian.Uint32(b[len(b)-4:]) {
		return fmt.Errorf("%w: checksum", errBadSummary)
	}
	d := sumReader{b: body[len(summaryMagic):]}
	got := summaryID{base: d.uvarint(), next: d.uvarint(), size: int64(d.uvarint()), frameLen: uint32(d.uvarint()), frameCRC: uint32(d.uvarint())}
	if d.bad || got != id {
		return fmt.Errorf("%w: it describes %+v, the segment is %+v", errBadSummary, got, id)
	}
	return nil
}

// decodeSummary calls event or record for each entry of the summary b of
// segment id, in log order. An event's pair numbers its pubend and
// publisher among those of the summary (from 0, fewer than the product of
// their counts), so that the caller can find what it keeps for them
// without hashing their names.
func decodeSummary(b []byte, id summaryID, event func(index uint64, p msg.PubendID, t tick.Tick, size int64, publisher string, seq uint64, pair int) error, record func(index uint64, raw []byte) error) error {
	if err := checkSummary(b, id); err != nil {
		return err
	}
	d := sumReader{b: b[len(summaryMagic) : len(b)-4]}
	for range 5 {
		d.uvarint() // the segment's id, checked
	}
	pubList := make([]msg.PubendID, d.count())
	for i := range pubList {
		pubList[i] = msg.PubendID(d.str())
	}
	pubrList := make([]string, d.count())
	for i := range pubrList {
		pubrList[i] = d.str()
	}
	prevTick := make([]tick.Tick, len(pubList))
	prevSeq := make([]uint64, len(pubrList))
	for index := id.base; index < id.next && !d.bad; index++ {
		k := d.uvarint()
		if k == 0 {
			raw := d.bytes()
			if d.bad {
				break
			}
			if err := record(index, raw); err != nil {
				return err
			}
			continue
		}
		if k > uint64(len(pubList)) {
			d.bad = true
			break
		}
		t := prevTick[k-1] + tick.Tick(d.uvarint())
		size := int64(d.uvarint())
		w := d.uvarint()
		if w >= uint64(len(pubrList)) {
			d.bad = true
			break
		}
		seq := prevSeq[w] + uint64(d.varint())
		prevTick[k-1], prevSeq[w] = t, seq
		if d.bad {
			break
		}
		if err := event(index, pubList[k-1], t, size, pubrList[w], seq, int(k-1)*len(pubrList)+int(w)); err != nil {
			return err
		}
	}
	if d.bad || len(d.b) != 0 {
		return fmt.Errorf("%w: entries", errBadSummary)
	}
	return nil
}

// sumReader reads a summary's fields; a read past its end sets bad.
type sumReader struct {
	b   []byte
	bad bool
}

func (d *sumReader) uvarint() uint64 {
	v, k := binary.Uvarint(d.b)
	if k <= 0 {
		d.bad = true
		return 0
	}
	d.b = d.b[k:]
	return v
}

func (d *sumReader) varint() int64 {
	v, k := binary.Varint(d.b)
	if k <= 0 {
		d.bad = true
		return 0
	}
	d.b = d.b[k:]
	return v
}

func (d *sumReader) bytes() []byte {
	n := d.uvarint()
	if d.bad || n > uint64(len(d.b)) {
		d.bad = true
		return nil
	}
	p := d.b[:n:n]
	d.b = d.b[n:]
	return p
}

func (d *sumReader) str() string { return string(d.bytes()) }

// count reads a table's length, bounded by what is left to read.
func (d *sumReader) count() int {
	n := d.uvarint()
	if n > uint64(len(d.b)) {
		d.bad = true
		return 0
	}
	return int(n)
}

// writeSummary writes the summary of segment id (its records: entries)
// beside it: to a temporary name, then renamed. Not fsynced: it is an
// optimisation that a crash may lose or tear, and a restart checks it.
func writeSummary(fsys vfs.FS, segPath string, id summaryID, entries []sumEntry) error {
	name := summaryName(segPath)
	tmp := name + ".tmp"
	f, err := fsys.Create(tmp)
	if err != nil {
		return err
	}
	_, err = f.Write(encodeSummary(id, entries))
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = fsys.Rename(tmp, name)
	}
	return err
}

// readSummary reads the summary of the segment at segPath (nil, nil when
// there is none).
func readSummary(fsys vfs.FS, segPath string) ([]byte, error) {
	f, err := fsys.Open(summaryName(segPath))
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	defer f.Close()
	size, err := f.Size()
	if err != nil {
		return nil, err
	}
	b := make([]byte, size)
	if _, err := f.ReadAt(b, 0); err != nil {
		return nil, err
	}
	return b, nil
}

// removeSummaries removes the summaries in dir of segments below first,
// of segments that do not exist (keep says which do), and temporary files
// a crash left. Failures are ignored: a summary left behind is checked
// before it is used.
func removeSummaries(fsys vfs.FS, dir string, keep func(base uint64) bool) {
	names, err := fsys.ReadDir(dir)
	if err != nil {
		return
	}
	for _, name := range names {
		digits, ok := strings.CutSuffix(name, summarySuffix)
		if !ok {
			if strings.HasSuffix(name, summarySuffix+".tmp") {
				_ = fsys.Remove(filepath.Join(dir, name))
			}
			continue
		}
		base, err := strconv.ParseUint(digits, 10, 64)
		if err != nil || len(digits) != 20 || !keep(base) {
			_ = fsys.Remove(filepath.Join(dir, name))
		}
	}
}
