package mqtt

import (
	"cmp"
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/aerie-mq/aerie/internal/msg"
	"github.com/aerie-mq/aerie/internal/tick"
)

// A persistent session's publishing state survives its broker's restart
// (docs/MQTT.md, Quality of service): at a broker with Options.SessionDir,
// every persistent session that has published holds a file there with
// the aerie publisher its PUBLISHes go out as, a bound on the sequence
// numbers it has used, and the QoS 2 packet ids received and not yet
// released with the sequence number each was given. The file is rewritten
// whole (writeSynced) and synced before the broker acts on what it adds:
//
//   - a new QoS 2 packet id is written before its publish goes to aerie,
//     so before the PUBREC, and before the pubend can log it: a PUBLISH
//     resent after a crash with that packet id is the same aerie publish
//     (publisher and sequence number), which the pubend deduplicates;
//   - a released packet id is removed before its PUBCOMP: after a crash,
//     a new message under that packet id is a new publish, not taken for
//     the old one (whose sequence number the pubend would deduplicate);
//   - the bound on sequence numbers moves up by seqBlock before a number
//     past it is used: a restarted broker goes on above it, so no number
//     is used twice (the pubend would drop the second as a duplicate).
//
// A released packet id stays in the file, with its sequence number and
// a digest of its message (publishSum), among the session's latest
// releasedKept releases, until a new PUBLISH takes the packet id: a
// client that sent PUBREL and lost the PUBCOMP with its connection may
// send the PUBLISH again (DUP set) instead of the PUBREL (paho.mqtt.golang
// does, docs/MQTT.md, Quality of service), and that PUBLISH, the same
// message under the same packet id, is the same aerie publish again.
//
// The file also holds the session's QoS 2 deliveries on its durable
// subscriptions (qos2.go) that their checkpoints, as the broker's log has
// them, have not passed: each one's packet id and how far it went.
//
//   - a delivery is written as sent before its PUBLISH goes to the
//     client: after a crash, replayed from the checkpoint, it goes again
//     with its packet id and DUP, which a client that had it takes as the
//     same message [MQTT-4.3.3-*];
//   - it is written as received before the PUBREL answering the
//     client's PUBREC: after a crash the PUBREL goes again, and the
//     replayed PUBLISH does not (the client, once it has sent PUBCOMP,
//     would take it for a new message);
//   - a packet id given to a new delivery marks the one that had it
//     before as done (its PUBCOMP freed the id): not delivered again;
//   - a delivery leaves the file once the broker's log has a checkpoint
//     past it: it is never replayed (prune).
//
// The file's form, like the retained store's (retainfile.go):
//
//	magic "AERIESES", version byte 2
//	string client id, string publisher, uvarint sequence bound
//	uvarint n, then n × (uvarint packet id, uvarint sequence number,
//	                8 bytes digest, 0 if not known), packet ids
//	                ascending, 1 to 65535, numbers 1 to the bound
//	uvarint r ≤ releasedKept, then r × (uvarint packet id, uvarint
//	                sequence number, 8 bytes digest, not 0), oldest
//	                release first, packet ids 1 to 65535, none twice
//	                nor among the n, numbers 1 to the bound
//	uvarint m, then m × (string subscription, string pubend, uvarint tick,
//	                uvarint packet id, byte state 0 sent, 1 received,
//	                2 done), ascending by (subscription, pubend, tick),
//	                packet ids 1 to 65535, at most one not done per id
//	CRC-32C of everything before it, 4 bytes big-endian

const (
	sessionMagic   = "AERIESES"
	sessionVersion = 2
	// sessionVersion1 is the form before released packet ids (its packet
	// ids have no digest): still read.
	sessionVersion1 = 1
	// seqBlock: how many sequence numbers one write of the bound covers
	// (QoS 0 and 1 publishes write the file once per seqBlock).
	seqBlock = 1024
	// sessionSuffix ends every session file's name.
	sessionSuffix = ".session"
)

// sessionFile is the content of a session's file.
type sessionFile struct {
	clientID  string
	publisher string
	limit     uint64            // every sequence number used is at most this
	in        map[uint16]uint64 // QoS 2 packet id → sequence number
	sums      map[uint16]uint64 // QoS 2 packet id → its message's digest, if known
	released  []releasedID      // oldest first
	out       map[deliveryKey]outRec
}

// outRec is a QoS 2 delivery of a durable subscription in the file.
type outRec struct {
	pid   uint16
	state byte
}

// The states of an outRec.
const (
	outSent     = 0 // PUBLISH written
	outReceived = 1 // PUBREC read: PUBREL written
	outDone     = 2 // its packet id went to a later delivery, so PUBCOMP came
)

// outKeys is f.out's keys in the file's order.
func outKeys(out map[deliveryKey]outRec) []deliveryKey {
	return slices.SortedFunc(maps.Keys(out), compareKeys)
}

func compareKeys(a, b deliveryKey) int {
	if c := strings.Compare(string(a.sub), string(b.sub)); c != 0 {
		return c
	}
	if c := strings.Compare(string(a.pubend), string(b.pubend)); c != 0 {
		return c
	}
	return cmp.Compare(a.t, b.t)
}

// encodeSession writes f in the file's form.
func encodeSession(f sessionFile) []byte {
	var b []byte
	b = append(b, sessionMagic...)
	b = append(b, sessionVersion)
	b = appendString(b, f.clientID)
	b = appendString(b, f.publisher)
	b = binary.AppendUvarint(b, f.limit)
	pids := slices.Sorted(maps.Keys(f.in))
	b = binary.AppendUvarint(b, uint64(len(pids)))
	for _, pid := range pids {
		b = binary.AppendUvarint(b, uint64(pid))
		b = binary.AppendUvarint(b, f.in[pid])
		b = binary.BigEndian.AppendUint64(b, f.sums[pid])
	}
	b = binary.AppendUvarint(b, uint64(len(f.released)))
	for _, r := range f.released {
		b = binary.AppendUvarint(b, uint64(r.pid))
		b = binary.AppendUvarint(b, r.seq)
		b = binary.BigEndian.AppendUint64(b, r.sum)
	}
	keys := outKeys(f.out)
	b = binary.AppendUvarint(b, uint64(len(keys)))
	for _, k := range keys {
		b = appendString(b, string(k.sub))
		b = appendString(b, string(k.pubend))
		b = binary.AppendUvarint(b, uint64(k.t))
		b = binary.AppendUvarint(b, uint64(f.out[k].pid))
		b = append(b, f.out[k].state)
	}
	return binary.BigEndian.AppendUint32(b, crc32.Checksum(b, castagnoli))
}

// errSessionFile is every decoding error's cause.
var errSessionFile = errors.New("not a valid MQTT session file")

// decodeSession reads the file's form, checking everything: what it
// accepts encodes to a file that decodes to the same.
func decodeSession(b []byte) (sessionFile, error) {
	if len(b) < len(sessionMagic)+1+4 || string(b[:len(sessionMagic)]) != sessionMagic {
		return sessionFile{}, fmt.Errorf("%w: no %q header", errSessionFile, sessionMagic)
	}
	v := b[len(sessionMagic)]
	if v != sessionVersion && v != sessionVersion1 {
		return sessionFile{}, fmt.Errorf("%w: version %d, this broker reads versions %d and %d", errSessionFile, v, sessionVersion1, sessionVersion)
	}
	body, sum := b[:len(b)-4], binary.BigEndian.Uint32(b[len(b)-4:])
	if got := crc32.Checksum(body, castagnoli); got != sum {
		return sessionFile{}, fmt.Errorf("%w: checksum %08x, the content sums to %08x (the file was damaged)", errSessionFile, sum, got)
	}
	d := &decoder{b: body[len(sessionMagic)+1:], cause: errSessionFile}
	f := sessionFile{clientID: d.string("client id"), publisher: d.string("publisher"), limit: d.uvarint("sequence bound"),
		in: map[uint16]uint64{}, sums: map[uint16]uint64{}, out: map[deliveryKey]outRec{}}
	if d.err == nil && f.publisher == "" {
		d.fail("no publisher")
	}
	least := 2
	if v != sessionVersion1 {
		least = 10
	}
	n := d.count(least)
	last := uint64(0)
	for i := 0; i < n && d.err == nil; i++ {
		pid, seq := d.uvarint("packet id"), d.uvarint("sequence number")
		var sum uint64
		if v != sessionVersion1 {
			sum = d.uint64("digest")
		}
		switch {
		case d.err != nil:
		case pid <= last || pid > 0xFFFF:
			d.fail(fmt.Sprintf("packet id %d out of order or range", pid))
		case seq == 0 || seq > f.limit:
			d.fail(fmt.Sprintf("packet id %d has sequence number %d, the bound is %d", pid, seq, f.limit))
		}
		f.in[uint16(pid)], last = seq, pid
		if sum != 0 {
			f.sums[uint16(pid)] = sum
		}
	}
	if v != sessionVersion1 {
		r := d.count(10)
		if d.err == nil && r > releasedKept {
			d.fail(fmt.Sprintf("%d released packet ids, more than %d", r, releasedKept))
		}
		seen := map[uint16]bool{}
		for i := 0; i < r && d.err == nil; i++ {
			pid, seq, sum := d.uvarint("packet id"), d.uvarint("sequence number"), d.uint64("digest")
			switch {
			case d.err != nil:
			case pid == 0 || pid > 0xFFFF:
				d.fail(fmt.Sprintf("released packet id %d out of range", pid))
			case seen[uint16(pid)] || f.in[uint16(pid)] != 0:
				d.fail(fmt.Sprintf("released packet id %d twice, or not released", pid))
			case seq == 0 || seq > f.limit:
				d.fail(fmt.Sprintf("released packet id %d has sequence number %d, the bound is %d", pid, seq, f.limit))
			case sum == 0:
				d.fail(fmt.Sprintf("released packet id %d without a digest", pid))
			}
			seen[uint16(pid)] = true
			f.released = append(f.released, releasedID{pid: uint16(pid), seq: seq, sum: sum})
		}
	}
	n = d.count(5)
	var prev deliveryKey
	live := map[uint16]bool{} // packet ids of deliveries not done
	for i := 0; i < n && d.err == nil; i++ {
		k := deliveryKey{sub: msg.SubID(d.string("subscription")), pubend: msg.PubendID(d.string("pubend"))}
		k.t = tick.Tick(d.uvarint("tick"))
		pid := d.uvarint("packet id")
		state := d.byte("state")
		switch {
		case d.err != nil:
		case k.sub == "" || k.pubend == "":
			d.fail("a delivery without subscription or pubend")
		case i > 0 && compareKeys(prev, k) >= 0:
			d.fail(fmt.Sprintf("delivery %s %s %d not after %s %s %d", k.sub, k.pubend, k.t, prev.sub, prev.pubend, prev.t))
		case pid == 0 || pid > 0xFFFF:
			d.fail(fmt.Sprintf("delivery packet id %d", pid))
		case state > outDone:
			d.fail(fmt.Sprintf("delivery state %d", state))
		case state != outDone && live[uint16(pid)]:
			d.fail(fmt.Sprintf("packet id %d held by two deliveries", pid))
		}
		if state != outDone {
			live[uint16(pid)] = true
		}
		f.out[k], prev = outRec{pid: uint16(pid), state: state}, k
	}
	if d.err == nil && len(d.b) > 0 {
		d.fail(fmt.Sprintf("%d bytes after the last packet id", len(d.b)))
	}
	if d.err != nil {
		return sessionFile{}, d.err
	}
	return f, nil
}

// sessionPath is client id's file.
func (s *Server) sessionPath(clientID string) string {
	return filepath.Join(s.opts.SessionDir, sessionFileName(clientID))
}

// sessionFileName names client id's file: its escaped form (escapeName),
// or, when that is longer than a file name may be (a client id may have
// 65 535 bytes), '~' and its SHA-256, which no escaped form begins with.
func sessionFileName(clientID string) string {
	if name := escapeName(clientID); len(name) <= 200 {
		return name + sessionSuffix
	}
	return fmt.Sprintf("~%x%s", sha256.Sum256([]byte(clientID)), sessionSuffix)
}

// saveSessionLocked writes st's file (st.fileMu held, st.mu not): what
// st holds now, with the sequence bound limit if it is above the file's.
// Once written, the bound and the packet ids are durable. A session
// without a file writes nothing.
func (s *Server) saveSessionLocked(clientID string, st *clientState, limit uint64) error {
	st.mu.Lock()
	if !st.persist {
		st.mu.Unlock()
		return nil
	}
	if len(st.out) > st.pruneAt {
		st.mu.Unlock()
		s.prune(clientID, st)
		st.mu.Lock()
	}
	f := sessionFile{clientID: clientID, publisher: st.publisher, limit: max(st.limit, limit, st.seq),
		in: make(map[uint16]uint64, len(st.in)), sums: make(map[uint16]uint64, len(st.in)), released: slices.Clone(st.released)}
	for pid, in := range st.in {
		f.in[pid] = in.seq
		if in.sum != 0 {
			f.sums[pid] = in.sum
		}
	}
	f.out = maps.Clone(st.out)
	st.mu.Unlock()
	if err := os.MkdirAll(s.opts.SessionDir, 0o755); err != nil {
		return fmt.Errorf("mqtt: session directory: %w", err)
	}
	if err := writeSynced(s.sessionPath(clientID), encodeSession(f)); err != nil {
		return fmt.Errorf("mqtt: session file of %q: %w", clientID, err)
	}
	st.mu.Lock()
	st.limit = f.limit
	for pid, seq := range f.in {
		if in := st.in[pid]; in != nil && in.seq == seq {
			in.durable = true
		}
	}
	st.mu.Unlock()
	return nil
}

// pruneSlack is how many deliveries the file gains between two prunes.
const pruneSlack = 256

// prune drops from st.out the deliveries the checkpoints in the broker's
// log have passed: a restart never replays them (st.fileMu held).
func (s *Server) prune(clientID string, st *clientState) {
	cps, err := s.opts.Host.Checkpoints(sessionPrefix(clientID))
	st.mu.Lock()
	defer st.mu.Unlock()
	if err != nil {
		s.log.Warn("MQTT session file: checkpoints not known, nothing pruned", "client", clientID, "err", err)
	} else {
		for k := range st.out {
			if tok, ok := cps[k.sub]; ok && k.t <= tok[k.pubend] {
				delete(st.out, k)
			}
		}
	}
	st.pruneAt = len(st.out) + pruneSlack
}

// recordOut writes the QoS 2 delivery k as sent under packet id pid
// before its PUBLISH (the writer): the delivery that had the packet id
// before is done. A session without a file writes nothing.
func (c *Conn) recordOut(k deliveryKey, pid uint16) error {
	st := c.st
	st.fileMu.Lock()
	defer st.fileMu.Unlock()
	st.mu.Lock()
	if !st.persist {
		st.mu.Unlock()
		return nil
	}
	if st.out == nil {
		st.out = map[deliveryKey]outRec{}
	}
	for k2, r := range st.out {
		if r.pid == pid && r.state != outDone && k2 != k {
			st.out[k2] = outRec{pid: pid, state: outDone}
		}
	}
	st.out[k] = outRec{pid: pid, state: outSent}
	st.mu.Unlock()
	return c.s.saveSessionLocked(c.cl.ID, st, 0)
}

// receivedOut writes the QoS 2 delivery k, packet id pid, as received
// before its PUBREL (the read goroutine).
func (c *Conn) receivedOut(k deliveryKey, pid uint16) error {
	st := c.st
	st.fileMu.Lock()
	defer st.fileMu.Unlock()
	st.mu.Lock()
	r, ok := st.out[k]
	if !st.persist || !ok || r.pid != pid || r.state != outSent {
		st.mu.Unlock()
		return nil
	}
	st.out[k] = outRec{pid: pid, state: outReceived}
	st.mu.Unlock()
	return c.s.saveSessionLocked(c.cl.ID, st, 0)
}

// fileDeliveries is what the session's file says its connections of the
// previous run delivered, for its first connection of this run, less what
// the checkpoints the subscriptions resume from (ds) have passed.
func fileDeliveries(out map[deliveryKey]outRec, ds []msg.DurableSub) sessionDeliveries {
	sd := sessionDeliveries{done: map[deliveryKey]bool{}, pending: map[deliveryKey]sent{}}
	rel := map[msg.SubID]msg.Token{}
	for _, d := range ds {
		rel[msg.SubID(d.Name)] = d.Released
	}
	for k, r := range out {
		tok, ok := rel[k.sub]
		if !ok || k.t <= tok[k.pubend] {
			continue // not resumed, or not replayed
		}
		switch r.state {
		case outDone:
			sd.done[k] = true
		default:
			sd.pending[k] = sent{pid: r.pid, qos: 2, rec: r.state == outReceived}
		}
	}
	return sd
}

// dropSessionFile removes client id's file: its session ended.
func (s *Server) dropSessionFile(clientID string) {
	if s.opts.SessionDir == "" {
		return
	}
	if err := os.Remove(s.sessionPath(clientID)); err != nil && !errors.Is(err, fs.ErrNotExist) {
		s.log.Warn("MQTT session file not removed", "client", clientID, "err", err)
	}
}

// loadSessions reads the session files a previous run left (at the start,
// before any connection). An unreadable one is logged and set aside as
// FILE.corrupt: its session resumes without it, as a new aerie publisher,
// so a QoS 2 PUBLISH its client resends is published again (at least
// once) and a PUBREL gets PUBCOMP as for an unknown packet id.
func (s *Server) loadSessions() {
	if s.opts.SessionDir == "" {
		return
	}
	entries, err := os.ReadDir(s.opts.SessionDir)
	if err != nil {
		if !errors.Is(err, fs.ErrNotExist) {
			s.log.Error("MQTT session files not read: their QoS 2 publishes resent are published again", "dir", s.opts.SessionDir, "err", err)
		}
		return
	}
	for _, e := range entries {
		path := filepath.Join(s.opts.SessionDir, e.Name())
		if strings.HasSuffix(e.Name(), ".tmp") {
			_ = os.Remove(path) // a write a crash cut short
			continue
		}
		if !strings.HasSuffix(e.Name(), sessionSuffix) {
			continue // set aside earlier
		}
		b, err := os.ReadFile(path)
		var f sessionFile
		if err == nil {
			f, err = decodeSession(b)
		}
		if err == nil && sessionFileName(f.clientID) != e.Name() {
			err = fmt.Errorf("%w: it holds client %q", errSessionFile, f.clientID)
		}
		if err != nil {
			aside := path + ".corrupt"
			if rerr := os.Rename(path, aside); rerr != nil {
				aside = fmt.Sprintf("not set aside: %v", rerr)
			}
			s.log.Error("MQTT session file unreadable: set aside; its client's QoS 2 publishes not yet completed are published again if resent (at least once)",
				"path", path, "aside", aside, "err", err)
			continue
		}
		st := &clientState{publisher: f.publisher, seq: f.limit, limit: f.limit, persist: true, in: map[uint16]*inbound{},
			released: f.released, out: f.out, restored: len(f.out) > 0}
		for pid, seq := range f.in {
			st.in[pid] = &inbound{seq: seq, sum: f.sums[pid], durable: true}
		}
		s.states.states[f.clientID] = st
	}
	if n := len(s.states.states); n > 0 {
		s.log.Info("MQTT session files read", "dir", s.opts.SessionDir, "sessions", n)
	}
}
