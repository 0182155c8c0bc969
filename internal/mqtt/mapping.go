// Package mqtt lets unmodified MQTT 3.1.1 and 5 clients publish and
// subscribe on an aerie network. The protocol (packet codec, keepalive,
// CONNECT/CONNACK, client id takeover) is github.com/mochi-mqtt/server/v2;
// everything that decides where a message goes, when it is durable and who
// receives it is aerie's: the library's own topic index never holds a
// subscription, it stores no message and holds no packet id in flight
// (retained messages, wills and QoS 2 state are this package's), and every
// PUBLISH becomes an aerie publish whose PUBACK or PUBREC waits for the
// fsync at its pubend (Gryphon GD).
//
// This file is the mapping between the two namespaces, pure and table
// tested: topics and filters (props.go maps the properties). docs/MQTT.md
// states it for users.
package mqtt

import (
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/aerie-mq/aerie/internal/msg"
)

// ErrUnmappable wraps every reason a topic or filter has no aerie form.
var ErrUnmappable = errors.New("mqtt: topic has no aerie form")

// ErrShared is the reason a shared subscription ($share/…) is refused:
// aerie does not serve them to MQTT clients (SUBACK 0x9E).
var ErrShared = errors.New("mqtt: shared subscriptions are not supported")

// Every MQTT level is one aerie word (docs/MQTT.md, Mapping). aerie words
// are non-empty and hold no '.', '*', '>', space or tab (msg.CheckTopic),
// so those bytes, and the escape byte '%' itself, are written %XX
// (upper-case hex), and an empty level is the word "%" alone. The form is
// canonical: a word decodes only if it is exactly what its level encodes
// to, so TopicOf(Topic(t)) == t and a topic has one aerie form.
const escaped = ".*> \t%"

// emptyLevel is the aerie word of an empty MQTT level.
const emptyLevel = "%"

// escapeLevel is the aerie word of one MQTT topic level.
func escapeLevel(l string) string {
	if l == "" {
		return emptyLevel
	}
	if !strings.ContainsAny(l, escaped) {
		return l
	}
	var b strings.Builder
	for i := 0; i < len(l); i++ {
		if c := l[i]; strings.IndexByte(escaped, c) >= 0 {
			fmt.Fprintf(&b, "%%%02X", c)
		} else {
			b.WriteByte(c)
		}
	}
	return b.String()
}

// unescapeWord is the MQTT level of an aerie word; ok is false when the
// word is not the canonical form of any level (a '%' not followed by the
// code of an escaped byte), or decodes to bytes no MQTT level may hold
// ('/', '+', '#', U+0000).
func unescapeWord(w string) (string, bool) {
	if w == emptyLevel {
		return "", true
	}
	if w == "" || strings.ContainsAny(w, "/+#\x00*> \t") {
		return "", false
	}
	if !strings.Contains(w, "%") {
		return w, true
	}
	var b strings.Builder
	for i := 0; i < len(w); i++ {
		if w[i] != '%' {
			b.WriteByte(w[i])
			continue
		}
		if i+2 >= len(w) {
			return "", false
		}
		v, err := strconv.ParseUint(w[i+1:i+3], 16, 8)
		if err != nil || strings.IndexByte(escaped, byte(v)) < 0 || fmt.Sprintf("%02X", v) != w[i+1:i+3] {
			return "", false
		}
		b.WriteByte(byte(v))
		i += 2
	}
	return b.String(), true
}

// checkName refuses what MQTT itself refuses in a topic name or filter
// (MQTT 4.7.3: not empty, no U+0000) and $SYS, which is not served.
func checkName(t, what string) error {
	switch {
	case t == "":
		return fmt.Errorf("%w: empty %s", ErrUnmappable, what)
	case strings.IndexByte(t, 0) >= 0:
		return fmt.Errorf("%w: %s %q holds U+0000", ErrUnmappable, what, t)
	case t == "$SYS" || strings.HasPrefix(t, "$SYS/"):
		return fmt.Errorf("%w: %q: $SYS topics are not served (broker statistics are at /metrics)", ErrUnmappable, t)
	}
	return nil
}

// Topic maps an MQTT topic name (a PUBLISH's) to an aerie topic: each
// level becomes a word, escaped ("a/b/c" is "a.b.c", "/a" is "%.a",
// "v/1.5" is "v.1%2E5"). Every valid topic name maps but $SYS ones; a
// wildcard makes a name invalid.
func Topic(t string) (string, error) {
	if err := checkName(t, "topic"); err != nil {
		return "", err
	}
	if strings.ContainsAny(t, "+#") {
		return "", fmt.Errorf("%w: topic %q holds a wildcard ('+' or '#'), which only filters may", ErrUnmappable, t)
	}
	var b strings.Builder
	i := 0
	for level := range strings.SplitSeq(t, "/") {
		if i > 0 {
			b.WriteByte('.')
		}
		b.WriteString(escapeLevel(level))
		i++
	}
	return b.String(), nil
}

// TopicOf maps an aerie topic back to the MQTT topic name it is delivered
// under; ok is false when the topic has no MQTT form (a word that is not
// an escaped level: one holding '/', '+' or '#', or a '%' that is not an
// escape): such events are not delivered to MQTT subscribers.
func TopicOf(aerie string) (string, bool) {
	if aerie == "" {
		return "", false
	}
	if !strings.ContainsAny(aerie, "%/+#\x00*> \t") && !strings.Contains(aerie, "..") &&
		aerie[0] != '.' && aerie[len(aerie)-1] != '.' {
		return strings.ReplaceAll(aerie, ".", "/"), true
	}
	var b strings.Builder
	i := 0
	for w := range strings.SplitSeq(aerie, ".") {
		l, ok := unescapeWord(w)
		if !ok {
			return "", false
		}
		if i > 0 {
			b.WriteByte('/')
		}
		b.WriteString(l)
		i++
	}
	return b.String(), true
}

// Filter maps an MQTT topic filter to the aerie patterns whose union
// matches exactly the topics it matches, but for $-topics (WildFirst):
// "+" is "*"; a trailing "#" matches zero or more levels in MQTT but ">"
// one or more words in aerie, so "a/#" is the two patterns "a" and "a.>"
// (disjoint: no event matches both), and "#" alone is ">". Other levels
// are escaped as Topic escapes them. Shared subscriptions ($share/…) and
// $SYS filters have no aerie form.
func Filter(f string) ([]string, error) {
	if err := checkName(f, "filter"); err != nil {
		return nil, err
	}
	if strings.HasPrefix(f, "$share/") {
		return nil, fmt.Errorf("%w: %q", ErrShared, f)
	}
	levels := strings.Split(f, "/")
	words := make([]string, len(levels))
	for i, l := range levels {
		switch {
		case l == "+":
			words[i] = "*"
		case l == "#":
			if i != len(levels)-1 {
				return nil, fmt.Errorf("%w: '#' must be the last level of %q", ErrUnmappable, f)
			}
			if i == 0 {
				return []string{">"}, nil
			}
			prefix := strings.Join(words[:i], ".")
			return []string{prefix, prefix + ".>"}, nil
		case strings.ContainsAny(l, "+#"):
			return nil, fmt.Errorf("%w: level %q of %q: a wildcard must be a whole level", ErrUnmappable, l, f)
		default:
			words[i] = escapeLevel(l)
		}
	}
	return []string{strings.Join(words, ".")}, nil
}

// ShareFilter reads a shared subscription's filter, "$share/NAME/filter"
// (MQTT 5 §4.8.2): the share name and the filter; ok is false for a filter
// that is not shared. A share name is not empty and has no "+" or "#".
func ShareFilter(f string) (name, filter string, ok bool, err error) {
	rest, shared := strings.CutPrefix(f, "$share/")
	if !shared {
		return "", f, false, nil
	}
	name, filter, found := strings.Cut(rest, "/")
	switch {
	case !found || filter == "":
		return "", "", true, fmt.Errorf("%w: %q: a shared subscription is $share/NAME/filter", ErrUnmappable, f)
	case name == "" || strings.ContainsAny(name, "+#"):
		return "", "", true, fmt.Errorf("%w: %q: a share name is not empty and has no + or #", ErrUnmappable, f)
	}
	return name, filter, true, nil
}

// ShareGroup is the aerie consumer group of pattern j of a shared
// subscription's patterns pats under share name: the share name itself,
// so that aerie members (aerie sub --group NAME) share with MQTT ones;
// a filter ending in "/#" is two patterns, the parent level's taken by
// group NAME#parent.
func ShareGroup(name string, pats []string, j int) string {
	if len(pats) > 1 && j < len(pats)-1 {
		return name + "#parent"
	}
	return name
}

// WildFirst reports whether filter's first level is a wildcard: such a
// filter does not match topics that start with '$' (MQTT 4.7.2), which
// its aerie patterns do match, so deliveries of those are dropped.
func WildFirst(filter string) bool {
	return strings.HasPrefix(filter, "+") || strings.HasPrefix(filter, "#")
}

// MatchesDollar reports whether an MQTT subscription to filter may be
// given topic (its MQTT form): not a '$' topic under a wildcard first
// level [MQTT-4.7.2-1].
func MatchesDollar(filter, topic string) bool {
	return !(WildFirst(filter) && strings.HasPrefix(topic, "$"))
}

// valueString is an aerie property value as an MQTT 5 user property's:
// strings as they are, integers in decimal, floats in the shortest form
// that reads back the same, booleans as "true" and "false".
func valueString(v msg.Value) string {
	switch v.Kind {
	case msg.PropInt:
		return strconv.FormatInt(v.Int(), 10)
	case msg.PropFloat:
		return strconv.FormatFloat(v.Float(), 'g', -1, 64)
	case msg.PropBool:
		return strconv.FormatBool(v.Bool())
	default:
		return v.Str()
	}
}
