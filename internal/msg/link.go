package msg

import "fmt"

// Role says what kind of peer opened a connection.
type Role uint8

const (
	RoleBroker Role = 1
	RoleClient Role = 2
)

// Hello is the first frame each side of a connection sends: the protocol
// version it speaks, what it is, its id, and its incarnation (a boot nonce:
// a new value means the peer restarted and lost its soft state).
type Hello struct {
	Version     uint16
	Role        Role
	ID          string
	Incarnation uint64
}

// Auth is a client's credentials, the first frame it sends after the
// Hellos (protocol version 4 on; User "" when it has none). The broker
// answers AuthOK, or a Goodbye with the reason ("authentication failed").
type Auth struct {
	User     string
	Password string
}

// AuthOK accepts a client's Auth; User is the user it is connected as (""
// when the broker has no users).
type AuthOK struct{ User string }

// Heartbeat keeps an idle connection alive and detects a dead peer.
type Heartbeat struct{}

// Goodbye closes a connection with a reason the peer can show its user
// (a slow subscriber disconnected, a protocol error, shutting down).
type Goodbye struct{ Reason string }

func (m Hello) String() string {
	return fmt.Sprintf("Hello{v%d role=%d %s inc=%d}", m.Version, m.Role, m.ID, m.Incarnation)
}
func (Heartbeat) String() string { return "Heartbeat{}" }

// String never shows the password.
func (m Auth) String() string    { return fmt.Sprintf("Auth{%s ***}", m.User) }
func (m AuthOK) String() string  { return fmt.Sprintf("AuthOK{%s}", m.User) }
func (Auth) isMsg()              {}
func (AuthOK) isMsg()            {}
func (m Goodbye) String() string { return fmt.Sprintf("Goodbye{%s}", m.Reason) }
func (Hello) isMsg()             {}
func (Heartbeat) isMsg()         {}
func (Goodbye) isMsg()           {}

// Forward carries a publishing client's traffic between two members of a
// replicated PHB cell (seed 001's "one hop, ack client"; P2S, DEBS 2014 §3,
// has a replica hand a client's request to the leader the same way): a
// member that does not serve keeps the client's connection, forwards each
// Publish to the serving leader over the cell's link, and relays the
// leader's answer back. Client is the client connection at the forwarding
// member; Msg is a Publish (to the leader), a PubAck or PubReject (back),
// or a Goodbye: to the leader, the client is gone; back, the leader does
// not (or no longer) serve the client (its Reason), and the forwarding
// member resends the client's unanswered publishes once a leader serves.
type Forward struct {
	Client uint64
	Msg    Msg
}

func (m Forward) String() string { return fmt.Sprintf("Forward{client %d: %v}", m.Client, m.Msg) }
func (Forward) isMsg()           {}
