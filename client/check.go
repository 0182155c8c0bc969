package client

import (
	"fmt"

	"github.com/aerie-mq/aerie/internal/match"
	"github.com/aerie-mq/aerie/internal/msg"
)

// CheckTopic reports why topic cannot be published to, or nil: a topic is
// words separated by dots, none empty, without the wildcards '*' and '>'
// (they belong to patterns), spaces or tabs. Publish refuses such a topic
// with this error before anything is sent, and so does the broker.
func CheckTopic(topic string) error {
	if err := msg.CheckTopic(topic); err != nil {
		return refused{err}
	}
	return nil
}

// CheckPattern reports why pattern is not a subscription pattern, or nil:
// words separated by dots, none empty, where "*" is one word and ">" the
// rest (last only).
func CheckPattern(pattern string) error {
	if _, err := match.ParsePattern(pattern); err != nil {
		return refused{err}
	}
	return nil
}

// CheckSelector reports why selector is not a JMS SQL-92 selector, with
// the column of the fault, or nil; the empty selector selects everything.
func CheckSelector(selector string) error {
	if selector == "" {
		return nil
	}
	if _, err := match.ParseSelector(selector); err != nil {
		return refused{fmt.Errorf("selector %q: %w", selector, err)}
	}
	return nil
}

// checkMessage refuses, before anything is sent, a message the broker
// would refuse: a bad topic, an unsupported property, an event above
// MaxEventBytes.
func checkMessage(m Message) (msg.Props, error) {
	if err := CheckTopic(m.Topic); err != nil {
		return msg.Props{}, err
	}
	props, err := normalizeProps(m.Props)
	if err != nil {
		return msg.Props{}, err
	}
	if err := msg.CheckPublish(m.Topic, props, m.Payload); err != nil {
		return msg.Props{}, refused{err}
	}
	return props, nil
}

// checkFilter refuses a subscription's pattern or selector before it is
// sent.
func checkFilter(pattern, selector string) error {
	if err := CheckPattern(pattern); err != nil {
		return err
	}
	return CheckSelector(selector)
}

// refused is a refusal of the client's own, before sending, for a reason
// the broker would refuse too: errors.Is(err, ErrRejected) holds, but it
// does not claim that a broker answered.
type refused struct{ err error }

func (r refused) Error() string        { return "aerie: " + r.err.Error() }
func (r refused) Unwrap() error        { return r.err }
func (r refused) Is(target error) bool { return target == ErrRejected }
