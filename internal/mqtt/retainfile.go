package mqtt

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"maps"
	"slices"
	"strings"

	"github.com/mochi-mqtt/server/v2/packets"

	"github.com/aerie-mq/aerie/internal/msg"
	"github.com/aerie-mq/aerie/internal/tick"
)

// The retained store's file (docs/MQTT.md, Retained messages): every
// retained message of the store, and the token up to which the broker's
// retained watch had applied its deliveries when the file was written.
// The whole file is rewritten each time (writeSynced: a synced temporary
// file renamed into place), so it is always one complete store, never a
// torn one; a checksum catches what the disk changed since.
//
//	magic "AERIERET", version byte 2
//	uvarint n, then n × (string pubend, uvarint tick), pubends ascending
//	uvarint m, then m × (string topic, bytes payload, byte QoS,
//	                     properties, uvarint published),
//	                     topics ascending, payloads non-empty
//	CRC-32C of everything before it, 4 bytes big-endian
//
// A string or bytes is a uvarint length and the bytes. The properties are
// the event's, in aerie's own encoding (msg.AppendProps, checked by
// msg.ReadProps: the MQTT 5 properties under their reserved names,
// props.go); published is in Unix milliseconds (retainedMsg). Version 1
// (read, never written) had in their place the MQTT 5 user properties,
// uvarint u, then u × (string key, string value), and no publish time.

const (
	retainedMagic   = "AERIERET"
	retainedVersion = 2
)

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// retainedFile is the content of the store's file.
type retainedFile struct {
	token msg.Token // the watch's deliveries applied, per pubend
	msgs  []retainedMsg
}

// encodeRetained writes f in the file's form, in a canonical order.
func encodeRetained(f retainedFile) []byte {
	var b []byte
	b = append(b, retainedMagic...)
	b = append(b, retainedVersion)
	pubends := slices.Sorted(maps.Keys(f.token))
	b = binary.AppendUvarint(b, uint64(len(pubends)))
	for _, p := range pubends {
		b = appendString(b, string(p))
		b = binary.AppendUvarint(b, uint64(f.token[p]))
	}
	msgs := slices.Clone(f.msgs)
	slices.SortFunc(msgs, func(a, b retainedMsg) int { return strings.Compare(a.topic, b.topic) })
	b = binary.AppendUvarint(b, uint64(len(msgs)))
	for _, r := range msgs {
		b = appendString(b, r.topic)
		b = appendString(b, string(r.payload))
		b = append(b, r.qos)
		b = msg.AppendProps(b, r.props)
		b = binary.AppendUvarint(b, uint64(r.published))
	}
	return binary.BigEndian.AppendUint32(b, crc32.Checksum(b, castagnoli))
}

func appendString(b []byte, s string) []byte {
	b = binary.AppendUvarint(b, uint64(len(s)))
	return append(b, s...)
}

// errRetainedFile is every decoding error's cause.
var errRetainedFile = errors.New("not a valid MQTT retained store file")

// decodeRetained reads the file's form, checking everything: a file it
// accepts encodes back to the same store.
func decodeRetained(b []byte) (retainedFile, error) {
	if len(b) < len(retainedMagic)+1+4 || string(b[:len(retainedMagic)]) != retainedMagic {
		return retainedFile{}, fmt.Errorf("%w: no %q header", errRetainedFile, retainedMagic)
	}
	v := b[len(retainedMagic)]
	if v != retainedVersion && v != 1 {
		return retainedFile{}, fmt.Errorf("%w: version %d, this broker reads versions 1 and %d", errRetainedFile, v, retainedVersion)
	}
	body, sum := b[:len(b)-4], binary.BigEndian.Uint32(b[len(b)-4:])
	if got := crc32.Checksum(body, castagnoli); got != sum {
		return retainedFile{}, fmt.Errorf("%w: checksum %08x, the content sums to %08x (the file was damaged)", errRetainedFile, sum, got)
	}
	d := &decoder{b: body[len(retainedMagic)+1:]}
	f := retainedFile{token: msg.Token{}}
	n := d.count(2)
	var last string
	for i := 0; i < n && d.err == nil; i++ {
		p := d.string("pubend")
		t := d.uvarint("tick")
		if d.err == nil && (p == "" || (i > 0 && p <= last)) {
			d.fail("pubends not in ascending order, or empty")
		}
		f.token[msg.PubendID(p)], last = tick.Tick(t), p
	}
	n = d.count(4)
	for i := 0; i < n && d.err == nil; i++ {
		r := retainedMsg{topic: d.string("topic")}
		r.payload = []byte(d.string("payload"))
		r.qos = d.byte("QoS")
		if v == 1 {
			r.props = d.userProps()
		} else {
			r.props = d.props()
			r.published = int64(d.uvarint("publish time"))
		}
		switch {
		case d.err == nil && r.published < 0:
			d.fail(fmt.Sprintf("topic %q has publish time %d", r.topic, r.published))
		case d.err != nil:
		case i > 0 && r.topic <= last:
			d.fail(fmt.Sprintf("topic %q not after %q", r.topic, last))
		case len(r.payload) == 0:
			d.fail(fmt.Sprintf("topic %q has an empty payload", r.topic))
		case r.qos > 2:
			d.fail(fmt.Sprintf("topic %q has QoS %d", r.topic, r.qos))
		default:
			if _, err := Topic(r.topic); err != nil {
				d.fail(err.Error())
			}
		}
		f.msgs, last = append(f.msgs, r), r.topic
	}
	if d.err == nil && len(d.b) > 0 {
		d.fail(fmt.Sprintf("%d bytes after the last message", len(d.b)))
	}
	if d.err != nil {
		return retainedFile{}, d.err
	}
	return f, nil
}

// decoder reads the file's fields; the first error sticks.
type decoder struct {
	b     []byte
	err   error
	cause error // every error's cause: errRetainedFile if nil
}

func (d *decoder) fail(what string) {
	if d.err == nil {
		cause := d.cause
		if cause == nil {
			cause = errRetainedFile
		}
		d.err = fmt.Errorf("%w: %s", cause, what)
	}
}

func (d *decoder) uvarint(what string) uint64 {
	if d.err != nil {
		return 0
	}
	v, n := binary.Uvarint(d.b)
	if n <= 0 {
		d.fail("bad " + what)
		return 0
	}
	d.b = d.b[n:]
	return v
}

// count reads a number of items each at least min bytes long: no larger
// than what is left could hold (no allocation a bad count asks for)
func (d *decoder) count(least int) int {
	v := d.uvarint("count")
	if d.err == nil && v > uint64(len(d.b)/least) {
		d.fail(fmt.Sprintf("%d items, more than the %d bytes left hold", v, len(d.b)))
		return 0
	}
	return int(v)
}

func (d *decoder) string(what string) string {
	n := d.uvarint(what + " length")
	if d.err == nil && n > uint64(len(d.b)) {
		d.fail(fmt.Sprintf("%s of %d bytes, %d left", what, n, len(d.b)))
	}
	if d.err != nil {
		return ""
	}
	s := string(d.b[:n])
	d.b = d.b[n:]
	return s
}

func (d *decoder) uint64(what string) uint64 {
	if d.err == nil && len(d.b) < 8 {
		d.fail("no " + what)
	}
	if d.err != nil {
		return 0
	}
	v := binary.BigEndian.Uint64(d.b)
	d.b = d.b[8:]
	return v
}

// props reads properties in aerie's encoding (msg.ReadProps checks them).
func (d *decoder) props() msg.Props {
	if d.err != nil {
		return msg.Props{}
	}
	p, n, err := msg.ReadProps(d.b)
	if err != nil {
		d.fail(fmt.Sprintf("properties: %v", err))
		return msg.Props{}
	}
	d.b = d.b[n:]
	return p
}

// userProps reads version 1's MQTT 5 user properties, as aerie
// properties (Props).
func (d *decoder) userProps() msg.Props {
	u := d.count(2)
	var user []packets.UserProperty
	for j := 0; j < u && d.err == nil; j++ {
		user = append(user, packets.UserProperty{Key: d.string("property name"), Val: d.string("property value")})
	}
	if d.err != nil {
		return msg.Props{}
	}
	p, err := Props(user)
	if err != nil {
		d.fail(fmt.Sprintf("properties: %v", err))
	}
	return p
}

func (d *decoder) byte(what string) byte {
	if d.err == nil && len(d.b) == 0 {
		d.fail("no " + what)
	}
	if d.err != nil {
		return 0
	}
	v := d.b[0]
	d.b = d.b[1:]
	return v
}

// sameRetained reports whether two stores hold the same messages (the
// fuzz target's and the tests' equality).
func sameRetained(a, b retainedFile) bool {
	if !maps.Equal(a.token, b.token) || len(a.msgs) != len(b.msgs) {
		return false
	}
	for i := range a.msgs {
		x, y := a.msgs[i], b.msgs[i]
		if x.topic != y.topic || x.qos != y.qos || !bytes.Equal(x.payload, y.payload) || x.props.Encoded() != y.props.Encoded() ||
			x.published != y.published {
			return false
		}
	}
	return true
}
