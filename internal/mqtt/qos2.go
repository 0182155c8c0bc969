package mqtt

import (
	"crypto/sha256"
	"encoding/binary"
	"fmt"
	"slices"
	"time"

	"github.com/mochi-mqtt/server/v2/packets"

	"github.com/aerie-mq/aerie/internal/msg"
	"github.com/aerie-mq/aerie/internal/tick"
)

// QoS 2 (docs/MQTT.md, Quality of service).
//
// Inbound, a QoS 2 PUBLISH is an aerie publish like a QoS 1 one: its
// PUBREC waits for aerie's PubAck (after the fsync at the pubend, Gryphon
// GD), and its packet id is kept until the client's PUBREL. A PUBLISH that
// comes again with a packet id still kept is the same message: it goes to
// aerie again under the same publisher and sequence number, which the
// pubend's publisher deduplication answers with the original's ack, and
// is never logged twice. The publisher and the kept packet ids belong to
// the client id's session (clientState), not to one connection, so a
// client that reconnects and resends is deduplicated too.
//
// A client may also send a PUBLISH again after its PUBREL, when the
// connection ended before the PUBCOMP reached it: paho.mqtt.golang keeps
// the PUBLISH, not the PUBREL, until PUBCOMP and resends it (DUP set) on
// its next connection, which [MQTT-4.3.3-1] forbids (docs/MQTT.md,
// Quality of service). The broker has released the packet id and, by
// [MQTT-4.3.3-2], would take that PUBLISH as a new message. So a released
// packet id is kept (clientState.released, the latest releasedKept) with
// its sequence number and its message's digest (publishSum) until a new
// PUBLISH takes it: a PUBLISH with DUP set, under a released packet id,
// with the same digest, is that message again, sent to aerie under its
// sequence number (the pubend answers with the original's ack). A client
// that follows the standard sends DUP only on a PUBLISH it sent before,
// so what this takes for a repeat is one unless a client sends, under the
// packet id it just had released, a new message identical to the
// released one whose first copy its connection lost.
//
// Outbound, a QoS 2 delivery is PUBLISH, PUBREC, PUBREL, PUBCOMP, and a
// persistent session's checkpoint passes it only at the PUBCOMP. When the
// connection ends, what was delivered and not yet passed by the
// checkpoint is kept in the session (sessionDeliveries): the next
// connection resends PUBREL for what the client had received, resends
// the PUBLISH (QoS 1 or 2) with its packet id and DUP for what it had not
// [MQTT-4.4.0-1], and does not deliver again what it had acknowledged,
// when the SHB's durable subscriptions replay them from the checkpoint.

// qosProperty is the aerie property that carries the QoS an MQTT client
// published with, 0 or 1; absent, a message is QoS 2 (aerie's own
// publishes are exactly once). A subscriber gets a message at the lower
// of its QoS and the subscription's [MQTT-3.8.4-8]. MQTT 5 subscribers do
// not see it as a user property; an MQTT 5 publisher's user property of
// that name is dropped.
const qosProperty = "mqtt_qos"

// retainProperty is the aerie property of a retained MQTT publish (true):
// the brokers' retained stores learn it through the network (retain.go),
// and a subscription with retain-as-published delivers it flagged. MQTT 5
// subscribers do not see it as a user property.
const retainProperty = "mqtt_retain"

// eventQoS is the QoS ev was published with.
func eventQoS(ev *msg.Event) byte {
	if v, ok := ev.Props.Get(qosProperty); ok && v.Kind == msg.PropInt && v.Int() >= 0 && v.Int() < 2 {
		return byte(v.Int())
	}
	return 2
}

// deliveryKey names one delivery of a durable subscription: its event is
// the same whichever connection of the session delivers it.
type deliveryKey struct {
	sub    msg.SubID
	pubend msg.PubendID
	t      tick.Tick
}

// sent is a QoS 1 or 2 delivery of the previous connection not yet
// complete: its packet id, its QoS, and whether the client had received
// it (PUBREC).
type sent struct {
	pid uint16
	qos byte
	rec bool
}

// sessionDeliveries is what a persistent session's last connection had
// delivered beyond its checkpoints.
type sessionDeliveries struct {
	done    map[deliveryKey]bool // acknowledged (PUBACK, PUBCOMP) or written at QoS 0
	pending map[deliveryKey]sent // QoS 1 and 2, incomplete
}

// inbound is a QoS 2 PUBLISH received and not yet released.
type inbound struct {
	seq     uint64
	sum     uint64 // publishSum, 0 if not known (a session file of version 1)
	acked   bool   // aerie acknowledged it: PUBREC written (or due)
	durable bool   // in the session's file (sessionfile.go), or it has none
}

// releasedKept is how many released packet ids a session keeps: a
// client has at most receiveMaximum QoS 1 and 2 publishes
// unacknowledged, so at most that many PUBCOMPs in flight when its
// connection ends.
const releasedKept = receiveMaximum

// releasedID is a QoS 2 packet id released by a PUBREL: the sequence
// number its message went to aerie with, and the message's digest.
type releasedID struct {
	pid uint16
	seq uint64
	sum uint64
}

// publishSum is the digest of what a PUBLISH gives aerie: topic,
// payload, retain flag, user properties, and, when it has any, its
// payload format indicator, content type, response topic and
// correlation data (props.go); not its message expiry interval, which a
// client may count down when it sends the PUBLISH again (never 0).
func publishSum(pk packets.Packet) uint64 {
	var b []byte
	b = appendString(b, pk.TopicName)
	b = binary.AppendUvarint(b, uint64(len(pk.Payload)))
	b = append(b, pk.Payload...)
	if pk.FixedHeader.Retain {
		b = append(b, 1)
	} else {
		b = append(b, 0)
	}
	b = binary.AppendUvarint(b, uint64(len(pk.Properties.User)))
	for _, u := range pk.Properties.User {
		b = appendString(b, u.Key)
		b = appendString(b, u.Val)
	}
	if p := &pk.Properties; p.PayloadFormatFlag || p.ContentType != "" || p.ResponseTopic != "" || len(p.CorrelationData) > 0 {
		// Only then: the digest of a PUBLISH without them is as it was
		// before they crossed the network (session files keep digests).
		b = append(b, 1, p.PayloadFormat)
		if !p.PayloadFormatFlag {
			b[len(b)-2] = 2
		}
		b = appendString(b, p.ContentType)
		b = appendString(b, p.ResponseTopic)
		b = appendString(b, string(p.CorrelationData))
	}
	h := sha256.Sum256(b)
	return max(binary.BigEndian.Uint64(h[:8]), 1)
}

// takeReleasedLocked removes packet id pid from the released ones and
// returns it (st.mu held).
func (st *clientState) takeReleasedLocked(pid uint16) (releasedID, bool) {
	for i, r := range st.released {
		if r.pid == pid {
			st.released = slices.Delete(st.released, i, i+1)
			return r, true
		}
	}
	return releasedID{}, false
}

// addReleasedLocked keeps r as the latest released packet id, forgetting
// the oldest beyond releasedKept (st.mu held).
func (st *clientState) addReleasedLocked(r releasedID) {
	st.takeReleasedLocked(r.pid)
	if len(st.released) >= releasedKept {
		st.released = slices.Delete(st.released, 0, len(st.released)-releasedKept+1)
	}
	st.released = append(st.released, r)
}

// flight is a delivery awaiting the client: PUBACK at QoS 1, PUBREC then
// PUBCOMP at QoS 2. ref is its mark on a durable subscription's
// checkpoint; placeholder: a packet id of the previous connection's, kept
// until its event is delivered again or its PUBCOMP comes.
type flight struct {
	ref         markRef
	group       msg.SubAck // a shared subscription's event: acknowledged to its group when done
	qos         byte
	rec         bool
	placeholder bool
	key         deliveryKey
}

// nextSeq is a sequence number for a publish that never goes to aerie
// (a refusal's place among the acks): nothing needs it durable.
func (st *clientState) nextSeq() uint64 {
	st.mu.Lock()
	defer st.mu.Unlock()
	st.seq++
	return st.seq
}

// nextSeq is the sequence number of the session's next aerie publish. In
// a session with a file, a number past the file's bound first moves the
// bound (sessionfile.go): a failed write is the error, and the number is
// not used.
func (c *Conn) nextSeq() (uint64, error) {
	st := c.st
	st.fileMu.Lock()
	defer st.fileMu.Unlock()
	st.mu.Lock()
	st.seq++
	seq, raise := st.seq, st.persist && st.seq > st.limit
	st.mu.Unlock()
	if raise {
		if err := c.s.saveSessionLocked(c.cl.ID, st, seq+seqBlock-1); err != nil {
			return 0, err
		}
	}
	return seq, nil
}

// errNotWritten ends a connection whose session file could not be
// written: what it asked for was not done, and its client asks again on
// its next connection (the write is tried again then).
func (c *Conn) errNotWritten(err error) refusal {
	c.s.log.Error("MQTT session file not written: connection ended", "client", c.cl.ID, "err", err)
	return refuse(packets.ErrUnspecifiedError, "the broker could not write the session's state", 0)
}

// publish2 takes a QoS 2 PUBLISH already mapped to p (the read goroutine):
// a new packet id is a new publish; one still kept is the same message
// again, and so is a released one's message sent again with DUP. In a
// session with a file, a packet id is written there before its publish
// goes to aerie (so before its PUBREC): resent after the broker's crash,
// it is still the same message.
func (c *Conn) publish2(pk packets.Packet, p msg.Publish, keep *retainedMsg) error {
	st := c.st
	sum := publishSum(pk)
	st.fileMu.Lock()
	st.mu.Lock()
	in := st.in[pk.PacketID]
	if in == nil {
		if r, ok := st.takeReleasedLocked(pk.PacketID); ok && pk.FixedHeader.Dup && r.sum == sum {
			in = &inbound{seq: r.seq, sum: sum} // sent again after its PUBREL
		} else {
			st.seq++
			in = &inbound{seq: st.seq, sum: sum}
		}
		st.in[pk.PacketID] = in
	}
	seq, acked, write := in.seq, in.acked, st.persist && !in.durable
	limit := st.limit
	if st.persist && seq > limit {
		limit = seq + seqBlock - 1
	}
	if !st.persist {
		in.durable = true // nothing to write
	}
	st.mu.Unlock()
	var err error
	if write {
		err = c.s.saveSessionLocked(c.cl.ID, st, limit)
	}
	st.fileMu.Unlock()
	if err != nil {
		return c.errNotWritten(err) // not published: kept in memory, written when resent
	}
	c.mu.Lock()
	c.acks = append(c.acks, pendingAck{seq: seq, pid: pk.PacketID, typ: packets.Pubrec, done: acked, retain: keep})
	c.mu.Unlock()
	if acked {
		signal(c.wake)
		return nil
	}
	p.Seq = seq
	c.s.opts.Host.Request(c.id, p)
	return nil
}

// release answers a PUBREL (the read goroutine): PUBCOMP, and the packet
// id is free; an unknown one gets PUBCOMP 0x92 (MQTT 5) or a plain PUBCOMP
// (3.1.1, whose client may resend PUBREL after a lost PUBCOMP). In a
// session with a file the packet id leaves it before the PUBCOMP: after
// the broker's crash, a new PUBLISH under it is a new message.
func (c *Conn) release(pid uint16) error {
	st := c.st
	st.fileMu.Lock()
	st.mu.Lock()
	in, ok := st.in[pid]
	delete(st.in, pid)
	if ok && in.sum != 0 && st.persist { // a session that does not persist starts afresh at its next connection
		st.addReleasedLocked(releasedID{pid: pid, seq: in.seq, sum: in.sum})
	}
	write := ok && st.persist && in.durable
	st.mu.Unlock()
	var err error
	if write {
		err = c.s.saveSessionLocked(c.cl.ID, st, 0)
		if err != nil {
			st.mu.Lock()
			if st.in[pid] == nil {
				st.takeReleasedLocked(pid)
				st.in[pid] = in // still in the file: released when the PUBREL comes again
			}
			st.mu.Unlock()
		}
	}
	st.fileMu.Unlock()
	if err != nil {
		return c.errNotWritten(err)
	}
	comp := packets.Packet{FixedHeader: packets.FixedHeader{Type: packets.Pubcomp}, PacketID: pid}
	if !ok && c.v5 {
		comp.ReasonCode = packets.ErrPacketIdentifierNotFound.Code
		c.s.log.Info("MQTT PUBREL for an unknown packet id", "client", c.cl.ID, "pid", pid)
	}
	_ = c.cl.WritePacket(comp) // a failed write ends the connection anyway
	return nil
}

// received: the client's PUBREC of delivery pid (the read goroutine). It
// has the message: PUBREL, and the delivery completes at its PUBCOMP. A
// failure code ends the exchange (MQTT 5 §4.13.2): the delivery is done.
func (c *Conn) received(pid uint16, code byte) error {
	c.mu.Lock()
	f, ok := c.inflight[pid]
	var k deliveryKey
	if ok && f.qos == 2 && code < 0x80 && !f.rec {
		if f.placeholder {
			k = f.key
		} else if t, held := c.ckpt.tickOf(f.ref); held && f.ref.sub != "" {
			k = deliveryKey{f.ref.sub, f.ref.pubend, t}
		}
	}
	c.mu.Unlock()
	if k.sub != "" {
		// Durable before the PUBREL: after it the client may forget the
		// packet id (sessionfile.go).
		if err := c.receivedOut(k, pid); err != nil {
			return c.errNotWritten(err)
		}
	}
	c.mu.Lock()
	f, ok = c.inflight[pid]
	if ok && f.qos == 2 && code < 0x80 {
		f.rec = true
		c.inflight[pid] = f
	}
	c.mu.Unlock()
	switch {
	case !ok || f.qos != 2:
		rel := packets.Packet{FixedHeader: packets.FixedHeader{Type: packets.Pubrel, Qos: 1}, PacketID: pid}
		if c.v5 {
			rel.ReasonCode = packets.ErrPacketIdentifierNotFound.Code
		}
		_ = c.cl.WritePacket(rel)
	case code >= 0x80:
		c.s.log.Info("MQTT client refused a delivery", "client", c.cl.ID, "pid", pid, "code", fmt.Sprintf("%#x", code))
		c.delivered(pid)
	default:
		_ = c.cl.WritePacket(packets.Packet{FixedHeader: packets.FixedHeader{Type: packets.Pubrel, Qos: 1}, PacketID: pid})
	}
	return nil
}

// completed: the client's PUBCOMP of delivery pid.
func (c *Conn) completed(pid uint16) {
	if c.placeholderDone(pid, 2) {
		return
	}
	c.mu.Lock()
	f, ok := c.inflight[pid]
	c.mu.Unlock()
	if ok && f.qos == 2 {
		c.delivered(pid)
	}
}

// placeholderDone: the client acknowledged (PUBACK at QoS 1, PUBCOMP at
// QoS 2) a packet id of the session's previous connection before its
// event came again: when it comes, it is not delivered.
func (c *Conn) placeholderDone(pid uint16, qos byte) bool {
	c.mu.Lock()
	f, ok := c.inflight[pid]
	if !ok || !f.placeholder || f.qos != qos {
		c.mu.Unlock()
		return false
	}
	c.replay.done[f.key] = true
	delete(c.replay.pending, f.key)
	delete(c.inflight, pid)
	c.mu.Unlock()
	signal(c.quota)
	return true
}

// saveDeliveries keeps, in the session, what this connection delivered
// beyond the checkpoints (the connection is ending; mu held).
func (c *Conn) saveDeliveriesLocked() sessionDeliveries {
	sd := sessionDeliveries{done: c.ckpt.doneBeyond(), pending: map[deliveryKey]sent{}}
	for k := range c.replay.done {
		sd.done[k] = true
	}
	for pid, f := range c.inflight {
		switch {
		case f.placeholder:
			sd.pending[f.key] = sent{pid: pid, qos: f.qos, rec: f.rec}
		case f.ref.sub != "":
			if t, ok := c.ckpt.tickOf(f.ref); ok {
				sd.pending[deliveryKey{f.ref.sub, f.ref.pubend, t}] = sent{pid: pid, qos: f.qos, rec: f.rec}
			}
		}
	}
	return sd
}

// restoreDeliveries takes what the session's previous connection left
// (before the writer starts): every packet id still in flight is kept
// until its event comes again, and PUBREL goes again for those the client
// had received [MQTT-4.4.0-1].
func (c *Conn) restoreDeliveries(sd sessionDeliveries) {
	var rels []uint16
	c.mu.Lock()
	c.replay = sd
	if c.replay.done == nil {
		c.replay.done = map[deliveryKey]bool{}
	}
	if c.replay.pending == nil {
		c.replay.pending = map[deliveryKey]sent{}
	}
	for k, p := range sd.pending {
		c.inflight[p.pid] = flight{qos: p.qos, rec: p.rec, placeholder: true, key: k}
		if p.rec {
			rels = append(rels, p.pid)
		}
	}
	c.mu.Unlock()
	for _, pid := range rels {
		_ = c.cl.WritePacket(packets.Packet{FixedHeader: packets.FixedHeader{Type: packets.Pubrel, Qos: 1}, PacketID: pid})
	}
}

// replayed looks up an event the durable subscription name delivers
// again after the session resumed (mu held): done, it is not delivered;
// pending, it takes its old packet id back.
func (c *Conn) replayedLocked(name msg.SubID, ev *msg.Event) (done bool, old sent, pending bool) {
	if len(c.replay.done) == 0 && len(c.replay.pending) == 0 {
		return false, sent{}, false
	}
	k := deliveryKey{name, ev.Pubend, ev.Tick}
	if c.replay.done[k] {
		delete(c.replay.done, k)
		return true, sent{}, false
	}
	if p, ok := c.replay.pending[k]; ok {
		delete(c.replay.pending, k)
		return false, p, true
	}
	return false, sent{}, false
}

// waitPrevious waits (bounded) for the client id's previous connection to
// finish ending, so that what it leaves in the session is there when
// this one resumes it (a takeover ends the old connection concurrently).
func (c *Conn) waitPrevious(prev *Conn) {
	if prev == nil || prev == c {
		return
	}
	select {
	case <-prev.ended:
	case <-time.After(5 * time.Second):
		c.s.log.Warn("MQTT session resumed before its previous connection ended", "client", c.cl.ID)
	}
}

// answered2: aerie answered the QoS 2 publish pid, seq (mu held): the
// packet id is kept until PUBREL, or freed if refused (the client sends
// no PUBREL after a failed PUBREC).
func (c *Conn) answered2(pid uint16, seq uint64, code byte) {
	c.st.mu.Lock()
	defer c.st.mu.Unlock()
	if in := c.st.in[pid]; in != nil && in.seq == seq {
		in.acked = true
		if code >= 0x80 {
			delete(c.st.in, pid)
		}
	}
}

// pubacked: the client's PUBACK of delivery pid, which counts only for a
// QoS 1 delivery.
func (c *Conn) pubacked(pid uint16) {
	if c.placeholderDone(pid, 1) {
		return
	}
	c.mu.Lock()
	f, ok := c.inflight[pid]
	c.mu.Unlock()
	if ok && f.qos == 1 {
		c.delivered(pid)
	}
}
