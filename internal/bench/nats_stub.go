//go:build !natspeer

package bench

import "errors"

// NATSFactories: the NATS peer is compiled only with the natspeer build tag,
// so nats-server stays out of the shipped binary.
func NATSFactories() ([]Factory, error) {
	return nil, errors.New("bench: the NATS peer is not in this binary; build with -tags natspeer (go run -tags natspeer ./cmd/aerie bench --peer nats …)")
}
