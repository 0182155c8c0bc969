//go:build !natspeer

package bench

import (
	"context"
	"strings"
	"testing"
)

// Without the natspeer tag, asking for the peer fails clearly.
func TestPeerNeedsTag(t *testing.T) {
	_, err := Run(context.Background(), Options{Peer: "nats", Quick: true})
	if err == nil || !strings.Contains(err.Error(), "-tags natspeer") {
		t.Fatalf("want an error naming -tags natspeer, got %v", err)
	}
}
