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
// that expires, drops it; a broker restart loses it (docs/MQTT.md).
type clientState struct {
	mu         sync.Mutex
	publisher  string
	seq        uint64
	in         map[uint16]*inbound
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
	}
}
