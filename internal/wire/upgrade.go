package wire

import (
	"fmt"

	"github.com/aerie-mq/aerie/internal/msg"
)

// Mixed versions (docs/PROTOCOL.md §1, "Versions on a link"). A Hello
// announces the highest version its sender speaks; the listening side
// answers in the lower of that and its own, and both then speak the
// answer's version. A listener of version 12 or earlier refused a peer of
// a later version with versionError's frozen wording; a dialer refused so
// dials again in the version the refusal names, if it still speaks it.

// Spoken returns the version a listener of version own speaks with a peer
// whose Hello announces peer: the lower of the two.
func Spoken(peer, own uint16) uint16 { return min(peer, own) }

// RefusalAsOlder is the refusal a listener of version own sent, up to
// version 12, to a peer announcing a later version: tests stand in for
// such a listener with it.
func RefusalAsOlder(h msg.Hello, own uint16) error {
	if h.Version > own {
		return versionError{peer: h.Version, own: own}
	}
	return nil
}

// RefusingVersion reads the listener's own version out of a Goodbye's
// reason that refused the sender's version (versionError's wording); ok is
// false for any other reason.
func RefusingVersion(reason string) (own uint16, ok bool) {
	var peer uint16
	n, err := fmt.Sscanf(reason, refusalFormat, &peer, &own)
	return own, err == nil && n == 2
}
