package mqtt

import (
	"fmt"
	"sync"
)

// clientState is what one MQTT client id's session holds in this
// broker's memory beside its durable subscriptions (session.go): the
// aerie publisher its PUBLISHes go out as, with the last sequence number,
// so that a message resent after a reconnection is the same aerie publish
// (deduplicated at its pubend); the QoS 2 packet ids received and not yet
// released (qos2.go); and what its last connection delivered beyond the
// checkpoints. A clean start, a session that does not persist, or one
// that expires, drops it. At a broker with Options.SessionDir a
// persistent session's publisher, sequence bound and packet ids are also
// in its file (sessionfile.go), so they survive the broker's restart;
// what was delivered does not (docs/MQTT.md).
type clientState struct {
	// fileMu orders the changes that must be durable before they are
	// acted on with the file's writes: held from the change to the end
	// of the write, before mu.
	fileMu    sync.Mutex
	mu        sync.Mutex
	publisher string
	seq       uint64
	limit     uint64 // the sequence bound in the file
	persist   bool   // the session has a file
	in        map[uint16]*inbound
	// released: the latest QoS 2 packet ids released (PUBREL), oldest
	// first, at most releasedKept, each until a new PUBLISH takes it
	// (qos2.go).
	released []releasedID
	// out: the QoS 2 deliveries of durable subscriptions that a durable
	// checkpoint has not yet passed, as in the file (sessionfile.go);
	// restored: read from the file, for the session's first connection
	// of this run; pruneAt: the size at which the file's next write first
	// drops what the checkpoints passed.
	out        map[deliveryKey]outRec
	restored   bool
	pruneAt    int
	deliveries sessionDeliveries
	owner      *Conn // the connection that has it now, if any
}

// clientStates holds the sessions' states by client id.
type clientStates struct {
	mu     sync.Mutex
	gen    uint64
	states map[string]*clientState
}

// get returns client id's state, a new one when fresh or when it has none.
// A new state is a new aerie publisher: its sequence numbers start again.
func (s *Server) state(clientID string, fresh bool) *clientState {
	cs := &s.states
	cs.mu.Lock()
	defer cs.mu.Unlock()
	if st := cs.states[clientID]; st != nil && !fresh {
		return st
	}
	if old := cs.states[clientID]; old != nil {
		s.endFile(clientID, old) // the session it held ends
	}
	cs.gen++
	st := &clientState{in: map[uint16]*inbound{},
		publisher: fmt.Sprintf("mqtt:%s@%s.%x.%d", clientID, s.opts.Broker, s.opts.Incarnation, cs.gen)}
	cs.states[clientID] = st
	return st
}

// dropState forgets client id's state if it is still st and no
// connection has it.
func (s *Server) dropState(clientID string, st *clientState) {
	cs := &s.states
	cs.mu.Lock()
	defer cs.mu.Unlock()
	st.mu.Lock()
	idle := st.owner == nil
	st.mu.Unlock()
	if cs.states[clientID] == st && idle {
		delete(cs.states, clientID)
		s.endFile(clientID, st)
	}
}

// endFile removes st's file, if it has one, once no write of it is under
// way, and writes it no more: its session ended.
func (s *Server) endFile(clientID string, st *clientState) {
	st.fileMu.Lock()
	defer st.fileMu.Unlock()
	st.mu.Lock()
	had := st.persist
	st.persist = false
	st.mu.Unlock()
	if had {
		s.dropSessionFile(clientID)
	}
}
