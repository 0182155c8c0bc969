package broker_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/aerie-mq/aerie/client"
)

// TestSelectorSubscription: a selector narrows a subscription to the events
// whose properties satisfy it, through PHB → IB → SHB; a bad selector is
// refused with its column and cause.
func TestSelectorSubscription(t *testing.T) {
	n := startNet(t, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	c := n.dial("s1", client.Options{})
	if _, err := c.SubscribeSelector(ctx, ">", "qty > 'x' AND"); !errors.Is(err, client.ErrRejected) || !strings.Contains(err.Error(), "column") {
		t.Fatalf("bad selector: %v, want a rejection naming the column", err)
	}
	sub, err := c.SubscribeSelector(ctx, "orders.>", "region = 'EU' AND qty BETWEEN 2 AND 4")
	if err != nil {
		t.Fatal(err)
	}
	col := collect(t, sub)
	pub := n.dial("p1", client.Options{ID: "sel-pub", Pubend: "P1"})
	want := map[int64]bool{}
	for i := 1; i <= 60; i++ {
		region := []string{"EU", "US"}[i%2]
		qty := int64(i % 6)
		topic := "orders.new"
		if i%5 == 0 {
			topic = "quotes.new"
		}
		if _, err := pub.Publish(ctx, client.Message{Topic: topic, Props: map[string]any{"seq": int64(i), "region": region, "qty": qty}}); err != nil {
			t.Fatal(err)
		}
		if topic == "orders.new" && region == "EU" && qty >= 2 && qty <= 4 {
			want[int64(i)] = true
		}
	}
	col.waitFor(t, len(want), 20*time.Second)
	col.check(t, want)
}
