package client

import (
	"context"
	"errors"
	"strings"
	"testing"
)

// A client that is not connected: every refusal below happens before the
// client looks at its connection, so none of them can have sent anything.
func unconnected() *Client { return &Client{} }

func TestPublishRefusesBadTopicsBeforeSending(t *testing.T) {
	ctx := context.Background()
	for topic, want := range map[string]string{
		"":         "empty",
		"a..b":     "empty word at offset 2",
		"orders.>": "wildcard",
		"a.*":      "wildcard",
	} {
		c := unconnected()
		m := Message{Topic: topic}
		_, err := c.PublishAsync(m)
		errNoAck := c.PublishNoAck(ctx, m)
		errFunc := c.PublishFunc(m, func(Result) {})
		for _, err := range []error{err, errNoAck, errFunc} {
			if !errors.Is(err, ErrRejected) || !strings.Contains(err.Error(), want) || !strings.Contains(err.Error(), "\""+topic+"\"") {
				t.Errorf("publish to %q: %v, want ErrRejected naming the topic and %q", topic, err, want)
			}
		}
	}
}

func TestPublishRefusesOversizedEventBeforeSending(t *testing.T) {
	_, err := unconnected().PublishAsync(Message{Topic: "a", Payload: make([]byte, MaxEventBytes+1)})
	if !errors.Is(err, ErrRejected) || !strings.Contains(err.Error(), "limit") {
		t.Errorf("oversized publish: %v, want ErrRejected naming the limit", err)
	}
}

func TestSubscribeRefusesBadFiltersBeforeSending(t *testing.T) {
	ctx := context.Background()
	for _, tc := range []struct{ pattern, selector, want string }{
		{"", "", "empty pattern"},
		{"a..b", "", "empty word"},
		{"a.>.b", "", "'>' must be the last word"},
		{"a.b*", "", "wildcard or space inside word"},
		{">", "qty >", "selector \"qty >\""},
		{">", "region = 'EU", "column"},
	} {
		c := unconnected()
		_, err1 := c.SubscribeSelector(ctx, tc.pattern, tc.selector)
		_, err2 := c.SubscribeTotalOrder(ctx, tc.pattern, tc.selector)
		_, err3 := c.SubscribeDurable(ctx, Durable{Name: "d", Pattern: tc.pattern, Selector: tc.selector})
		for _, err := range []error{err1, err2, err3} {
			if !errors.Is(err, ErrRejected) || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("subscribe %q %q: %v, want ErrRejected with %q", tc.pattern, tc.selector, err, tc.want)
			}
		}
	}
}

func TestCheckersAcceptGoodInput(t *testing.T) {
	if err := CheckTopic("orders.eu"); err != nil {
		t.Error(err)
	}
	if err := CheckPattern("orders.*.>"); err != nil {
		t.Error(err)
	}
	if err := CheckSelector(""); err != nil {
		t.Error(err)
	}
	if err := CheckSelector("qty > 3 AND region = 'EU'"); err != nil {
		t.Error(err)
	}
}
