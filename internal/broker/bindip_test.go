package broker

import (
	"context"
	"strings"
	"testing"
)

// TestBindIPResolvesNames: a gossip host given by name binds the address
// it resolves to; an IP is kept; a name that does not resolve is an error
// that names it.
func TestBindIPResolvesNames(t *testing.T) {
	ctx := context.Background()
	if ip, err := bindIP(ctx, "localhost"); err != nil || ip != "127.0.0.1" {
		t.Errorf("localhost: %q, %v", ip, err)
	}
	if ip, err := bindIP(ctx, "10.1.2.3"); err != nil || ip != "10.1.2.3" {
		t.Errorf("an IP: %q, %v", ip, err)
	}
	if _, err := bindIP(ctx, "no-such-broker.invalid"); err == nil || !strings.Contains(err.Error(), "resolve no-such-broker.invalid") {
		t.Errorf("a name that does not resolve: %v", err)
	}
}
