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
	"github.com/aerie-mq/aerie/internal/retention"
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
// A summary holds what a restart makes of the segment's events in the
// form it keeps them: per pubend the ticks and sizes as tick.Packed holds
// them, the sparse index of their log indexes (retention.Tracker) and per
// publisher its latest DedupKept sequence numbers, so that taking a
// segment from its summary costs a copy of its bytes, not a decoding of
// each event (at 10 M events that decoding was nearly all of a restart's
// CPU).
//
// Format (integers are unsigned varints unless noted):
//
//	"aerie-sum-2\n" | base | next | size | first frame length | first frame crc | kept |
//	n | pubend*n | m | publisher*m |
//	r | record*r | run*n | q | pair*q | crc32c of all before (4 bytes LE)
//	record: index - base | len | record     (a record that is not an event, in log order)
//	run:    events | marks | (tick, index - base)*marks | len | packed
//	                                        (the k-th pubend's events: the first and every
//	                                        retention.IndexEvery-th of them, their ticks
//	                                        and sizes in tick.Packed's binary form)
//	pair:   pubend index | publisher index | count | len | (tick delta, seq delta (zigzag))*count
//	                                        (the last min(kept, its events) events of a
//	                                        pubend's publisher, oldest first, deltas from
//	                                        the one before, from 0 for the first; pairs in
//	                                        the order of their first event)
//
// kept is DedupKept when the summary was written; a summary of another
// is read as one that does not hold. A summary of an older format
// ("aerie-sum-1") does not hold either: its segment is read once and its
// summary written again.
const summaryMagic = "aerie-sum-2\n"

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
// entries. It fails when a pubend's events are not in tick order there: a
// restart then reads the segment, and refuses it.
func encodeSummary(id summaryID, entries []sumEntry) ([]byte, error) {
	b := append([]byte(nil), summaryMagic...)
	b = binary.AppendUvarint(b, id.base)
	b = binary.AppendUvarint(b, id.next)
	b = binary.AppendUvarint(b, uint64(id.size))
	b = binary.AppendUvarint(b, uint64(id.frameLen))
	b = binary.AppendUvarint(b, uint64(id.frameCRC))
	b = binary.AppendUvarint(b, DedupKept)
	type run struct {
		events tick.Packed
		marks  []retention.Mark
	}
	type pair struct {
		k, w int
		tail []seqAt // a ring of the last DedupKept
		head int
	}
	pubends, publishers, pairs := map[msg.PubendID]int{}, map[string]int{}, map[[2]int]int{}
	var pubList []msg.PubendID
	var pubrList []string
	var runs []run
	var pairList []pair
	var records int
	for i, e := range entries {
		if e.raw != nil {
			records++
			continue
		}
		k, ok := pubends[e.pubend]
		if !ok {
			k = len(pubList)
			pubends[e.pubend] = k
			pubList = append(pubList, e.pubend)
			runs = append(runs, run{})
		}
		w, ok := publishers[e.publisher]
		if !ok {
			w = len(pubrList)
			publishers[e.publisher] = w
			pubrList = append(pubrList, e.publisher)
		}
		j, ok := pairs[[2]int{k, w}]
		if !ok {
			j = len(pairList)
			pairs[[2]int{k, w}] = j
			pairList = append(pairList, pair{k: k, w: w})
		}
		r := &runs[k]
		if r.events.Len() > 0 && e.t <= r.events.Last() {
			return nil, fmt.Errorf("storage: pubend %s's tick %d after its tick %d: the log is out of tick order", e.pubend, e.t, r.events.Last())
		}
		if r.events.Len()%retention.IndexEvery == 0 {
			r.marks = append(r.marks, retention.Mark{T: e.t, Index: id.base + uint64(i)})
		}
		r.events.Add(e.t, e.size)
		x := &pairList[j]
		if len(x.tail) < DedupKept {
			x.tail = append(x.tail, seqAt{e.seq, e.t})
		} else {
			x.tail[x.head] = seqAt{e.seq, e.t}
			x.head = (x.head + 1) % len(x.tail)
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
	b = binary.AppendUvarint(b, uint64(records))
	for i, e := range entries {
		if e.raw != nil {
			b = binary.AppendUvarint(b, uint64(i))
			b = appendString(b, string(e.raw))
		}
	}
	var packed []byte
	for k := range runs {
		r := &runs[k]
		b = binary.AppendUvarint(b, uint64(r.events.Len()))
		b = binary.AppendUvarint(b, uint64(len(r.marks)))
		for _, m := range r.marks {
			b = binary.AppendUvarint(b, uint64(m.T))
			b = binary.AppendUvarint(b, m.Index-id.base)
		}
		packed = r.events.AppendBinary(packed[:0])
		b = appendString(b, string(packed))
	}
	b = binary.AppendUvarint(b, uint64(len(pairList)))
	var tail []byte
	for _, x := range pairList {
		b = binary.AppendUvarint(b, uint64(x.k))
		b = binary.AppendUvarint(b, uint64(x.w))
		b = binary.AppendUvarint(b, uint64(len(x.tail)))
		tail = tail[:0]
		var prev seqAt
		for i := range x.tail {
			e := x.tail[(x.head+i)%len(x.tail)]
			tail = binary.AppendUvarint(tail, uint64(e.t-prev.t))
			tail = binary.AppendVarint(tail, int64(e.seq-prev.seq))
			prev = e
		}
		b = appendString(b, string(tail))
	}
	return binary.LittleEndian.AppendUint32(b, crc32.Checksum(b, summaryCRC)), nil
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
	if kept := d.uvarint(); d.bad || kept != DedupKept {
		return fmt.Errorf("%w: it keeps %d events of a publisher, not %d", errBadSummary, kept, DedupKept)
	}
	return nil
}

// summary is a summary's content (decodeSummary): views of its bytes.
type summary struct {
	pubends    []msg.PubendID
	publishers []string
	records    []sumRecord
	runs       []sumRun // one per pubend
	pairs      []sumPair
}

type sumRecord struct {
	index uint64
	raw   []byte
}

// sumRun is a pubend's events in a summary.
type sumRun struct {
	events int
	marks  []retention.Mark
	packed []byte // tick.Packed's binary form, checked when taken (loader.run)
}

// sumPair is the tail of a pubend's publisher's events in a summary.
type sumPair struct {
	pubend, publisher int
	n                 int
	tail              []byte // decoded when the restart needs it (dedupTail)
}

// decodeSummary reads the summary b of segment id. What it returns views
// b; the runs' packed ticks and the pairs' tails are read when taken.
func decodeSummary(b []byte, id summaryID) (summary, error) {
	var s summary
	if err := checkSummary(b, id); err != nil {
		return s, err
	}
	d := sumReader{b: b[len(summaryMagic) : len(b)-4]}
	for range 5 {
		d.uvarint() // the segment's id, checked
	}
	d.uvarint() // kept, checked
	s.pubends = make([]msg.PubendID, d.count())
	for i := range s.pubends {
		s.pubends[i] = msg.PubendID(d.str())
	}
	s.publishers = make([]string, d.count())
	for i := range s.publishers {
		s.publishers[i] = d.str()
	}
	span := id.next - id.base
	s.records = make([]sumRecord, d.count())
	for i := range s.records {
		at := d.uvarint()
		if at >= span || i > 0 && id.base+at <= s.records[i-1].index {
			d.bad = true
		}
		s.records[i] = sumRecord{index: id.base + at, raw: d.bytes()}
	}
	s.runs = make([]sumRun, len(s.pubends))
	for k := range s.runs {
		r := &s.runs[k]
		n := d.uvarint()
		r.marks = make([]retention.Mark, d.count())
		if n == 0 || n > span || len(r.marks) == 0 || uint64(len(r.marks)) > n {
			d.bad = true
			break
		}
		r.events = int(n)
		for i := range r.marks {
			m := retention.Mark{T: tick.Tick(d.uvarint()), Index: id.base + d.uvarint()}
			if m.Index >= id.next || i > 0 && (m.T <= r.marks[i-1].T || m.Index <= r.marks[i-1].Index) {
				d.bad = true
			}
			r.marks[i] = m
		}
		r.packed = d.bytes()
	}
	s.pairs = make([]sumPair, d.count())
	for i := range s.pairs {
		x := &s.pairs[i]
		k, w, n := d.uvarint(), d.uvarint(), d.uvarint()
		x.tail = d.bytes()
		if k >= uint64(len(s.pubends)) || w >= uint64(len(s.publishers)) || n == 0 || n > DedupKept || n > uint64(len(x.tail)) {
			d.bad = true
			break
		}
		x.pubend, x.publisher, x.n = int(k), int(w), int(n)
	}
	if d.bad || len(d.b) != 0 {
		return summary{}, fmt.Errorf("%w: entries", errBadSummary)
	}
	return s, nil
}

// dedupTail decodes a pair's tail: its events' sequence numbers and
// ticks, oldest first.
func dedupTail(x sumPair, fn func(seq uint64, t tick.Tick)) error {
	d := sumReader{b: x.tail}
	var t tick.Tick
	var seq uint64
	for range x.n {
		dt := d.uvarint()
		seq += uint64(d.varint())
		if d.bad || dt == 0 && t > 0 {
			return fmt.Errorf("%w: publisher entries", errBadSummary)
		}
		t += tick.Tick(dt)
		fn(seq, t)
	}
	if len(d.b) != 0 {
		return fmt.Errorf("%w: publisher entries", errBadSummary)
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
	b, err := encodeSummary(id, entries)
	if err != nil {
		return err
	}
	name := summaryName(segPath)
	tmp := name + ".tmp"
	f, err := fsys.Create(tmp)
	if err != nil {
		return err
	}
	_, err = f.Write(b)
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
