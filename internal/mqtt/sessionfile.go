package mqtt

import (
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
// The file's form, like the retained store's (retainfile.go):
//
//	magic "AERIESES", version byte 1
//	string client id, string publisher, uvarint sequence bound
//	uvarint n, then n × (uvarint packet id, uvarint sequence number),
//	                packet ids ascending, 1 to 65535, numbers ≤ the bound
//	CRC-32C of everything before it, 4 bytes big-endian

const (
	sessionMagic   = "AERIESES"
	sessionVersion = 1
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
	if v := b[len(sessionMagic)]; v != sessionVersion {
		return sessionFile{}, fmt.Errorf("%w: version %d, this broker reads version %d", errSessionFile, v, sessionVersion)
	}
	body, sum := b[:len(b)-4], binary.BigEndian.Uint32(b[len(b)-4:])
	if got := crc32.Checksum(body, castagnoli); got != sum {
		return sessionFile{}, fmt.Errorf("%w: checksum %08x, the content sums to %08x (the file was damaged)", errSessionFile, sum, got)
	}
	d := &decoder{b: body[len(sessionMagic)+1:], cause: errSessionFile}
	f := sessionFile{clientID: d.string("client id"), publisher: d.string("publisher"), limit: d.uvarint("sequence bound"),
		in: map[uint16]uint64{}}
	if d.err == nil && f.publisher == "" {
		d.fail("no publisher")
	}
	n := d.count(2)
	last := uint64(0)
	for i := 0; i < n && d.err == nil; i++ {
		pid, seq := d.uvarint("packet id"), d.uvarint("sequence number")
		switch {
		case d.err != nil:
		case pid <= last || pid > 0xFFFF:
			d.fail(fmt.Sprintf("packet id %d out of order or range", pid))
		case seq == 0 || seq > f.limit:
			d.fail(fmt.Sprintf("packet id %d has sequence number %d, the bound is %d", pid, seq, f.limit))
		}
		f.in[uint16(pid)], last = seq, pid
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
	return filepath.Join(s.opts.SessionDir, escapeName(clientID)+sessionSuffix)
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
	f := sessionFile{clientID: clientID, publisher: st.publisher, limit: max(st.limit, limit, st.seq),
		in: make(map[uint16]uint64, len(st.in))}
	for pid, in := range st.in {
		f.in[pid] = in.seq
	}
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
		if err == nil && escapeName(f.clientID)+sessionSuffix != e.Name() {
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
		st := &clientState{publisher: f.publisher, seq: f.limit, limit: f.limit, persist: true, in: map[uint16]*inbound{}}
		for pid, seq := range f.in {
			st.in[pid] = &inbound{seq: seq, durable: true}
		}
		s.states.states[f.clientID] = st
	}
	if n := len(s.states.states); n > 0 {
		s.log.Info("MQTT session files read", "dir", s.opts.SessionDir, "sessions", n)
	}
}
