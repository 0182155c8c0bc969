// Package mqtt lets unmodified MQTT 3.1.1 and 5 clients publish and
// subscribe on an aerie network. The protocol (packet codec, keepalive,
// CONNECT/CONNACK, client id takeover) is github.com/mochi-mqtt/server/v2;
// everything that decides where a message goes, when it is durable and who
// receives it is aerie's: the library's own topic index never holds a
// subscription, it stores no message (no retained store, no will, no
// session state that outlives a connection), and every PUBLISH becomes an
// aerie publish whose PUBACK waits for the fsync at its pubend (Gryphon
// GD).
//
// This file is the mapping between the two namespaces, pure and table
// tested: topics, filters and properties. docs/MQTT.md states it for users.
package mqtt

import (
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/mochi-mqtt/server/v2/packets"

	"github.com/aerie-mq/aerie/internal/msg"
)

// ErrUnmappable wraps every reason a topic or filter has no aerie form.
var ErrUnmappable = errors.New("mqtt: topic has no aerie form")

// A level (MQTT) is a word (aerie) when it is not empty and holds none of
// the characters either side gives a meaning to: '.' separates aerie
// words, '*' and '>' are aerie wildcards, '/' separates MQTT levels and
// '+' and '#' are MQTT wildcards; aerie patterns hold no space or tab.
const reserved = "./*>+# \t"

func checkLevel(topic, level string, i int) error {
	switch {
	case level == "":
		return fmt.Errorf("%w: %q has an empty level (level %d); aerie topics have no empty words", ErrUnmappable, topic, i+1)
	case i == 0 && level[0] == '$':
		return fmt.Errorf("%w: %q starts with '$', which MQTT reserves for the server ($SYS is not served)", ErrUnmappable, topic)
	case strings.ContainsAny(level, reserved):
		return fmt.Errorf("%w: level %q of %q contains one of %q", ErrUnmappable, level, topic, reserved)
	}
	return nil
}

// Topic maps an MQTT topic name (a PUBLISH's) to an aerie topic: levels
// become words, "a/b/c" is "a.b.c". A topic with an empty level, a level
// that contains '.', '*', '>', a space or a tab (or a wildcard), or a
// first level that starts with '$' has no aerie form.
func Topic(t string) (string, error) {
	if t == "" {
		return "", fmt.Errorf("%w: empty topic", ErrUnmappable)
	}
	i := 0
	for level := range strings.SplitSeq(t, "/") {
		if err := checkLevel(t, level, i); err != nil {
			return "", err
		}
		i++
	}
	return strings.ReplaceAll(t, "/", "."), nil
}

// TopicOf maps an aerie topic back to the MQTT topic name it is delivered
// under; ok is false when the topic has no MQTT form (a word that is
// empty, starts the topic with '$', or holds one of "/+#*>"): such events
// are not delivered to MQTT subscribers.
func TopicOf(aerie string) (string, bool) {
	if aerie == "" {
		return "", false
	}
	i := 0
	for w := range strings.SplitSeq(aerie, ".") {
		if checkLevel(aerie, w, i) != nil {
			return "", false
		}
		i++
	}
	return strings.ReplaceAll(aerie, ".", "/"), true
}

// Filter maps an MQTT topic filter to the aerie patterns whose union
// matches exactly the topics it matches: "+" is "*"; a trailing "#"
// matches zero or more levels in MQTT but ">" one or more words in aerie,
// so "a/#" is the two patterns "a" and "a.>" (disjoint: no event matches
// both), and "#" alone is ">". Shared subscriptions ($share/…) and $SYS
// filters have no aerie form.
func Filter(f string) ([]string, error) {
	if f == "" {
		return nil, fmt.Errorf("%w: empty filter", ErrUnmappable)
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
		default:
			if err := checkLevel(f, l, i); err != nil {
				return nil, err
			}
			words[i] = l
		}
	}
	return []string{strings.Join(words, ".")}, nil
}

// Props maps MQTT 5 user properties to aerie properties. Every value stays
// a string, also one that looks like a number (a selector compares it as
// a string: "temp = '21'", not "temp > 20"). A name given more than once
// keeps its last value.
func Props(user []packets.UserProperty) (msg.Props, error) {
	if len(user) == 0 {
		return msg.Props{}, nil
	}
	m := make(map[string]any, len(user))
	for _, u := range user {
		m[u.Key] = u.Val
	}
	return msg.PropsOf(m)
}

// UserProps maps aerie properties to MQTT 5 user properties, in name
// order: strings as they are, integers in decimal, floats in the shortest
// form that reads back the same, booleans as "true" and "false".
func UserProps(p msg.Props) []packets.UserProperty {
	if p.Len() == 0 {
		return nil
	}
	out := make([]packets.UserProperty, 0, p.Len())
	it := p.Iter()
	for {
		name, v, ok := it.Next()
		if !ok {
			break
		}
		out = append(out, packets.UserProperty{Key: name, Val: valueString(v)})
	}
	return out
}

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
