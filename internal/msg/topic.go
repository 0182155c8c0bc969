package msg

import (
	"errors"
	"fmt"
	"strings"
)

// ErrBadTopic is wrapped by every error CheckTopic returns.
var ErrBadTopic = errors.New("bad topic")

// WordReserved holds the characters no topic word may contain: '*' and
// '>' are the wildcards of subscription patterns, and space and tab are
// refused so that a topic reads the same in a pattern, a selector's
// error and a log line. A pattern's words obey the same rule apart from
// its wildcard words (match.ParsePattern).
const WordReserved = "*> \t"

// TopicRule is the rule CheckTopic enforces, as its errors state it.
const TopicRule = "a topic is words separated by dots, none empty, without '*', '>', spaces or tabs"

// CheckTopic validates the topic of a publish: dot-separated words, none
// empty, no wildcard (a publish names one topic; wildcards are for
// subscription patterns). The client, the command line and the broker
// all refuse with it, so a topic is refused the same way wherever it
// enters. The error names the topic, the fault and its byte offset.
func CheckTopic(topic string) error {
	if validTopic(topic) {
		return nil // every publish passes here: no allocation on the way
	}
	if topic == "" {
		return fmt.Errorf("%w %q: empty (%s)", ErrBadTopic, topic, TopicRule)
	}
	pos := 0
	for w := range strings.SplitSeq(topic, ".") {
		switch {
		case w == "":
			return fmt.Errorf("%w %q: empty word at offset %d (%s)", ErrBadTopic, topic, pos, TopicRule)
		case w == "*" || w == ">":
			return fmt.Errorf("%w %q: wildcard %q at offset %d: a publish names one topic, wildcards are for subscription patterns", ErrBadTopic, topic, w, pos)
		case strings.ContainsAny(w, WordReserved):
			return fmt.Errorf("%w %q: word %q at offset %d holds one of '*', '>', space or tab (%s)", ErrBadTopic, topic, w, pos, TopicRule)
		}
		pos += len(w) + 1
	}
	return nil
}

// validTopic is CheckTopic's verdict in one pass over the bytes.
func validTopic(topic string) bool {
	word := 0 // bytes of the current word so far
	for i := 0; i < len(topic); i++ {
		switch topic[i] {
		case '.':
			if word == 0 {
				return false
			}
			word = 0
		case '*', '>', ' ', '\t':
			return false
		default:
			word++
		}
	}
	return word > 0
}

// CheckPublish is why every broker refuses a publish of these fields,
// whatever its state, or nil: a bad topic (CheckTopic), or an event above
// MaxEventBytes (EventSize). The Go client refuses with it before sending,
// the broker a client is connected to before relaying or forwarding, and
// the shell of the pubend's broker before logging.
func CheckPublish(topic string, props Props, payload []byte) error {
	if err := CheckTopic(topic); err != nil {
		return err
	}
	if n := EventSize(topic, props, payload); n > MaxEventBytes {
		return fmt.Errorf("event of %d bytes exceeds the %d-byte limit", n, MaxEventBytes)
	}
	return nil
}
