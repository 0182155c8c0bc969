package msg

import (
	"errors"
	"fmt"
	"strings"
	"testing"
)

func TestCheckTopic(t *testing.T) {
	for _, ok := range []string{"a", "orders.eu", "a.b.c", "ü.x-y_z", "$SYS.x"} {
		if err := CheckTopic(ok); err != nil {
			t.Errorf("CheckTopic(%q) = %v, want nil", ok, err)
		}
	}
	for topic, want := range map[string]string{
		"":          "empty",
		"a..b":      "empty word at offset 2",
		".a":        "empty word at offset 0",
		"a.":        "empty word at offset 2",
		"orders.>":  `wildcard ">" at offset 7`,
		"a.*":       `wildcard "*" at offset 2`,
		"a.b*":      `word "b*" at offset 2`,
		"a b":       `word "a b" at offset 0`,
		"a.\tb":     "offset 2",
		">":         "wildcard",
		"orders.>x": `word ">x"`,
	} {
		err := CheckTopic(topic)
		if err == nil {
			t.Errorf("CheckTopic(%q) = nil, want an error with %q", topic, want)
			continue
		}
		if !errors.Is(err, ErrBadTopic) || !strings.Contains(err.Error(), want) || !strings.Contains(err.Error(), "\""+strings.ReplaceAll(topic, "\t", `\t`)+"\"") {
			t.Errorf("CheckTopic(%q) = %v, want ErrBadTopic naming the topic and %q", topic, err, want)
		}
	}
}

func TestCheckTopicAllocatesNothingWhenValid(t *testing.T) {
	if n := testing.AllocsPerRun(100, func() { _ = CheckTopic("orders.eu.new") }); n != 0 {
		t.Errorf("CheckTopic of a valid topic allocates %v times", n)
	}
}

// FuzzCheckTopic holds CheckTopic, its one-pass verdict and its reasons,
// to the rule as stated (TopicRule): a refusal names the topic and wraps
// ErrBadTopic, and nothing else is refused.
func FuzzCheckTopic(f *testing.F) {
	for _, s := range []string{"", "a", "a.b", "a..b", ".", "a.", ".a", "orders.>", "a.*", "a.b*", "a b", ">x", "ü.\t"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, topic string) {
		ok := true
		for _, w := range strings.Split(topic, ".") {
			if w == "" || strings.ContainsAny(w, WordReserved) {
				ok = false
			}
		}
		err := CheckTopic(topic)
		if (err == nil) != ok {
			t.Fatalf("CheckTopic(%q) = %v, want accepted %v by the rule", topic, err, ok)
		}
		if err != nil && (!errors.Is(err, ErrBadTopic) || !strings.Contains(err.Error(), fmt.Sprintf("%q", topic))) {
			t.Fatalf("CheckTopic(%q) = %v, want ErrBadTopic naming the topic", topic, err)
		}
		if perr := CheckPublish(topic, Props{}, nil); (perr == nil) != ok {
			t.Fatalf("CheckPublish(%q) = %v, CheckTopic %v", topic, perr, err)
		}
	})
}

func TestCheckPublishRefusesOversizedEvents(t *testing.T) {
	if err := CheckPublish("a", Props{}, make([]byte, MaxEventBytes-1)); err != nil {
		t.Errorf("an event at the limit: %v", err)
	}
	err := CheckPublish("a", Props{}, make([]byte, MaxEventBytes))
	if err == nil || !strings.Contains(err.Error(), fmt.Sprintf("event of %d bytes exceeds the %d-byte limit", MaxEventBytes+1, MaxEventBytes)) {
		t.Errorf("an event above the limit: %v", err)
	}
}
