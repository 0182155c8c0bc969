package msg

import (
	"errors"
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
