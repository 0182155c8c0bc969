package member

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
)

// Sentinel errors; every error the package returns wraps one of them.
var (
	// ErrBadName: a node name is not "brokerID/bootNonce".
	ErrBadName = errors.New("member: bad node name")
	// ErrBadMessage: a message or metadata could not be decoded.
	ErrBadMessage = errors.New("member: bad message")
	// ErrBadInput: Step was given an input it does not know.
	ErrBadInput = errors.New("member: bad input")
)

// ID names one incarnation of one broker. A restart is a new incarnation:
// the broker keeps its id and draws a new boot nonce. BootNonce must grow
// across restarts of the same broker (e.g. boot time in nanoseconds): of
// two incarnations of a broker the one with the larger nonce is the newer,
// and it supersedes the older one in views.
type ID struct {
	Broker    string
	BootNonce uint64
}

// Name is the node name used by the failure detector: "brokerID/bootNonce"
// with the nonce in hexadecimal (docs/MEMBERSHIP.md).
func (id ID) Name() string {
	return id.Broker + "/" + strconv.FormatUint(id.BootNonce, 16)
}

func (id ID) String() string { return id.Name() }

// less orders ids by name; it breaks ties where no member is older than
// another (members admitted in the same view, conflicting elders).
func (id ID) less(o ID) bool {
	if id.Broker != o.Broker {
		return id.Broker < o.Broker
	}
	return id.BootNonce < o.BootNonce
}

// ParseName is the inverse of ID.Name.
func ParseName(name string) (ID, error) {
	i := strings.LastIndexByte(name, '/')
	if i <= 0 || i == len(name)-1 {
		return ID{}, fmt.Errorf("%w: %q", ErrBadName, name)
	}
	n, err := strconv.ParseUint(name[i+1:], 16, 64)
	if err != nil {
		return ID{}, fmt.Errorf("%w: %q: %w", ErrBadName, name, err)
	}
	return ID{Broker: name[:i], BootNonce: n}, nil
}

// Addr is one address a member serves, by purpose ("broker", "clients").
type Addr struct {
	Purpose  string `json:"p"`
	HostPort string `json:"a"`
}

// Meta is a member's static metadata: known when it joins, never changed
// during its incarnation [001 "The metadata is static and is known when
// joining the cluster"].
type Meta struct {
	Cell  string `json:"c,omitempty"`
	Role  string `json:"r,omitempty"`
	Addrs []Addr `json:"a,omitempty"`
}

// Addr returns the address for purpose, or "".
func (m Meta) Addr(purpose string) string {
	for _, a := range m.Addrs {
		if a.Purpose == purpose {
			return a.HostPort
		}
	}
	return ""
}

func (m Meta) equal(o Meta) bool {
	if m.Cell != o.Cell || m.Role != o.Role || len(m.Addrs) != len(o.Addrs) {
		return false
	}
	for i := range m.Addrs {
		if m.Addrs[i] != o.Addrs[i] {
			return false
		}
	}
	return true
}

// Member is one incarnation with its metadata, as carried in views.
type Member struct {
	ID   ID   `json:"id"`
	Meta Meta `json:"m"`
}

func (m Member) String() string { return m.ID.Name() }
