package mqtt

import (
	"fmt"
	"math"
	"strings"
	"unicode/utf8"

	"github.com/mochi-mqtt/server/v2/packets"

	"github.com/aerie-mq/aerie/internal/msg"
)

// The MQTT 5 properties of a PUBLISH as aerie properties (docs/MQTT.md,
// Mapping). aerie names starting with reservedPrefix are this package's:
// the PUBLISH's own properties under the names below, and QoS and retain
// (qosProperty, retainProperty). A user property whose name starts with
// the prefix is escaped with one more '_' after it ("mqtt_x" is
// "mqtt__x"), so no user property takes a reserved name and every one
// reads back unchanged.
const (
	reservedPrefix = "mqtt_"
	// payloadFormatProperty: the Payload Format Indicator, integer 0 or 1.
	payloadFormatProperty = "mqtt_payload_format"
	// expiryProperty: the Message Expiry Interval as the publisher sent
	// it, an integer number of seconds (1 to 2^32-1), counted from the
	// event's publish time (its tick at the pubend).
	expiryProperty = "mqtt_message_expiry"
	// contentTypeProperty: the Content Type, a string.
	contentTypeProperty = "mqtt_content_type"
	// responseTopicProperty: the Response Topic, a string in MQTT form.
	responseTopicProperty = "mqtt_response_topic"
	// correlationProperty: the Correlation Data, byte for byte, a string.
	correlationProperty = "mqtt_correlation_data"
)

// userName is the aerie name of an MQTT 5 user property.
func userName(k string) string {
	if strings.HasPrefix(k, reservedPrefix) {
		return reservedPrefix + "_" + k[len(reservedPrefix):]
	}
	return k
}

// userNameOf is the MQTT 5 user property an aerie property name is
// delivered as; ok is false for a reserved name (this package's own).
func userNameOf(n string) (string, bool) {
	switch {
	case !strings.HasPrefix(n, reservedPrefix):
		return n, true
	case strings.HasPrefix(n, reservedPrefix+"_"):
		return reservedPrefix + n[len(reservedPrefix)+1:], true
	}
	return "", false
}

// Props maps MQTT 5 user properties to aerie properties. Every value stays
// a string, also one that looks like a number (a selector compares it as
// a string: "temp = '21'", not "temp > 20"). A name given more than once
// keeps its last value; a name starting with "mqtt_" is escaped (userName).
func Props(user []packets.UserProperty) (msg.Props, error) {
	if len(user) == 0 {
		return msg.Props{}, nil
	}
	m := make(map[string]any, len(user))
	addUser(m, user)
	return msg.PropsOf(m)
}

func addUser(m map[string]any, user []packets.UserProperty) {
	for _, u := range user {
		m[userName(u.Key)] = u.Val
	}
}

// publishProps are the aerie properties of a PUBLISH (or a will) at qos:
// its user properties, its Payload Format Indicator, Message Expiry
// Interval, Content Type, Response Topic and Correlation Data under the
// reserved names, the QoS below 2 (qosProperty) and whether it is
// retained (retainProperty).
func publishProps(p *packets.Properties, qos byte, retain bool) (msg.Props, error) {
	m := make(map[string]any, len(p.User)+2)
	addUser(m, p.User)
	if p.PayloadFormatFlag {
		m[payloadFormatProperty] = int64(p.PayloadFormat)
	}
	if p.MessageExpiryInterval > 0 {
		m[expiryProperty] = int64(p.MessageExpiryInterval)
	}
	if p.ContentType != "" {
		m[contentTypeProperty] = p.ContentType
	}
	if p.ResponseTopic != "" {
		m[responseTopicProperty] = p.ResponseTopic
	}
	if len(p.CorrelationData) > 0 {
		m[correlationProperty] = string(p.CorrelationData)
	}
	if qos < 2 {
		m[qosProperty] = int64(qos)
	}
	if retain {
		m[retainProperty] = true
	}
	return msg.PropsOf(m)
}

// checkPublishProps is the refusal of a PUBLISH's properties aerie does
// not take, nil if none: a Payload Format Indicator other than 0 and 1
// or a Response Topic holding a wildcard end the connection (protocol
// errors: MQTT 5 §2.2.2.2, [MQTT-3.3.2-14]); a Payload Format Indicator
// of 1 over a payload that is not UTF-8 is refused with 0x99, as MQTT 5
// §3.3.2.3.2 lets a receiver (fatal: the connection ends, else the
// PUBLISH alone is refused).
func checkPublishProps(p *packets.Properties, payload []byte) (r *refusal, fatal bool) {
	switch {
	case p.PayloadFormatFlag && p.PayloadFormat > 1:
		x := refuse(packets.ErrProtocolViolation, fmt.Sprintf("payload format indicator %d (0 or 1)", p.PayloadFormat), 0)
		return &x, true
	case strings.ContainsAny(p.ResponseTopic, "+#"):
		x := refuse(packets.ErrProtocolViolation, fmt.Sprintf("response topic %q holds a wildcard", p.ResponseTopic), 0)
		return &x, true
	case p.PayloadFormatFlag && p.PayloadFormat == 1 && !utf8.Valid(payload):
		x := refuse(errPayloadFormatInvalid, "payload format indicator 1, and the payload is not UTF-8", 0)
		return &x, false
	}
	return nil, false
}

// errPayloadFormatInvalid is MQTT 5's 0x99, which the library does not
// name.
var errPayloadFormatInvalid = packets.Code{Code: 0x99, Reason: "payload format invalid"}

// mqttString reports whether s may be an MQTT UTF-8 encoded string
// (MQTT 5 §1.5.4: well-formed, no U+0000, at most 65535 bytes).
func mqttString(s string) bool {
	return len(s) <= math.MaxUint16 && utf8.ValidString(s) && strings.IndexByte(s, 0) < 0
}

// mqttProps maps an event's aerie properties to the MQTT 5 properties of
// its PUBLISH to a subscriber: the publisher's user properties (names
// unescaped, values as valueString writes them, in name order) and, from
// the reserved names, its Payload Format Indicator, Message Expiry
// Interval (as the publisher sent it: sendExpiry counts down the time
// waited), Content Type, Response Topic and Correlation Data, unchanged
// [MQTT-3.3.2-4] [MQTT-3.3.2-15] [MQTT-3.3.2-16] [MQTT-3.3.2-17]
// [MQTT-3.3.2-20]. An aerie client may publish any property: what MQTT
// cannot carry is left out, so a subscriber never gets a malformed
// packet — a name or string value that is not an MQTT string, a reserved
// name of the wrong type or out of range, a Response Topic that is empty
// or holds a wildcard, a Payload Format Indicator of 1 over a payload
// that is not UTF-8.
func mqttProps(p msg.Props, payload []byte) packets.Properties {
	var out packets.Properties
	if p.Len() == 0 {
		return out
	}
	it := p.Iter()
	for {
		name, v, ok := it.Next()
		if !ok {
			break
		}
		if user, ok := userNameOf(name); ok {
			val := valueString(v)
			if mqttString(user) && mqttString(val) {
				out.User = append(out.User, packets.UserProperty{Key: user, Val: val})
			}
			continue
		}
		switch name {
		case payloadFormatProperty:
			if v.Kind == msg.PropInt && (v.Int() == 0 || (v.Int() == 1 && utf8.Valid(payload))) {
				out.PayloadFormat, out.PayloadFormatFlag = byte(v.Int()), true
			}
		case expiryProperty:
			out.MessageExpiryInterval = expiryOf(v)
		case contentTypeProperty:
			if v.Kind == msg.PropString && mqttString(v.Str()) {
				out.ContentType = v.Str()
			}
		case responseTopicProperty:
			if s := v.Str(); v.Kind == msg.PropString && s != "" && mqttString(s) && !strings.ContainsAny(s, "+#") {
				out.ResponseTopic = s
			}
		case correlationProperty:
			if s := v.Str(); v.Kind == msg.PropString && len(s) <= math.MaxUint16 {
				out.CorrelationData = []byte(s)
			}
		}
	}
	return out
}

// expiryOf is a Message Expiry Interval's value, 0 (none) for one not
// in range.
func expiryOf(v msg.Value) uint32 {
	if v.Kind == msg.PropInt && v.Int() > 0 && v.Int() <= math.MaxUint32 {
		return uint32(v.Int())
	}
	return 0
}

// eventExpiry is the Message Expiry Interval an event was published with
// (0: none).
func eventExpiry(p msg.Props) uint32 {
	v, ok := p.Get(expiryProperty)
	if !ok {
		return 0
	}
	return expiryOf(v)
}

// sendExpiry is the Message Expiry Interval to send on for a message
// published at publishedMs (Unix milliseconds) with interval, at nowMs:
// the interval minus the whole seconds waited [MQTT-3.3.2-6]; ok is false
// once the interval has passed: the message is not delivered
// [MQTT-3.3.2-5]. interval 0 (none) never expires.
func sendExpiry(interval uint32, publishedMs, nowMs int64) (uint32, bool) {
	if interval == 0 {
		return 0, true
	}
	waited := max(nowMs-publishedMs, 0) / 1000
	if waited >= int64(interval) {
		return 0, false
	}
	return interval - uint32(waited), true
}
