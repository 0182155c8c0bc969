package mqtt

import (
	"errors"
	"sync"
	"time"

	mochi "github.com/mochi-mqtt/server/v2"
	"github.com/mochi-mqtt/server/v2/packets"

	"github.com/aerie-mq/aerie/internal/auth"
	"github.com/aerie-mq/aerie/internal/msg"
)

// Wills (docs/MQTT.md, Wills).
//
// The library never publishes a will: the connection takes the will from
// it when the session is established, and when the connection ends
// without a DISCONNECT (or with reason 0x04) publishes it through aerie as
// any publish, an aerie publish acknowledged after the fsync at its
// pubend, after its will delay (MQTT 5) unless a new connection to the
// session comes first [MQTT-3.1.3-9]. With Options.WillDir a will is also
// on disk until settled, so that a broker that crashed publishes it when
// it starts again (willstore.go).

// will is a CONNECT's will, mapped to aerie.
type will struct {
	topic   string
	props   msg.Props
	payload []byte
	delay   time.Duration
	perms   *auth.Perms
	retain  *retainedMsg // a retained will: kept once aerie acknowledges it
	file    string       // its file in Options.WillDir (willstore.go), "" for none
}

// takeWill maps cl's will and takes it from the library, which would
// otherwise publish it itself (nil: the client has none).
func (s *Server) takeWill(cl *mochi.Client, perms *auth.Perms) (*will, error) {
	w := cl.Properties.Will
	if w.Flag == 0 {
		return nil, nil
	}
	topic, err := Topic(w.TopicName)
	if err != nil {
		return nil, err
	}
	var wp packets.Properties // the library keeps only the user properties
	if x, ok := s.willProps.LoadAndDelete(cl); ok {
		wp = x.(packets.Properties)
	}
	wp.User = w.User
	props, err := publishProps(&wp, w.Qos, w.Retain)
	if err != nil {
		return nil, err
	}
	cl.Properties.Will = mochi.Will{}
	out := &will{topic: topic, props: props, payload: w.Payload, delay: time.Duration(w.WillDelayInterval) * time.Second,
		perms: perms}
	if out.file, err = s.saveWill(cl.ID, storedOf(cl.ID, w.TopicName, w.Payload, &wp, w.Qos, w.Retain)); err != nil {
		s.log.Warn("MQTT will kept in memory only", "client", cl.ID, "err", err)
	}
	if w.Retain {
		out.retain = &retainedMsg{topic: w.TopicName, payload: w.Payload, props: props, qos: w.Qos}
	}
	return out, nil
}

// checkWill is the CONNECT's refusal for a will aerie cannot publish, nil
// if there is none: a topic with no aerie form, or one the user may not
// publish to, or properties it does not take (checkPublishProps: CONNACK
// 0x82 or 0x99, as MQTT 5 §3.1.3.2 lets a server).
func checkWill(cl *mochi.Client, perms *auth.Perms, wp *packets.Properties) *refusal {
	w := cl.Properties.Will
	if w.Flag == 0 {
		return nil
	}
	if r, _ := checkPublishProps(wp, w.Payload); r != nil {
		x := refuse(r.code, "will: "+r.code.Reason, 0)
		return &x
	}
	topic, err := Topic(w.TopicName)
	if err != nil {
		r := refuse(packets.ErrTopicNameInvalid, "will topic: "+err.Error(), 0)
		return &r
	}
	if !perms.MayPublish(topic) {
		r := refuse(packets.ErrNotAuthorized, "not authorized to publish the will to "+topic, 0x05)
		return &r
	}
	return nil
}

// endedCleanly reports whether cl ended with a DISCONNECT of reason 0x00:
// the one end that publishes no will [MQTT-3.1.2-10].
func endedCleanly(cl *mochi.Client) bool {
	var code packets.Code
	return errors.As(cl.StopCause(), &code) && code == packets.CodeDisconnect
}

// pendingWills are the wills waiting for their delay, by client id.
type pendingWills struct {
	mu sync.Mutex
	m  map[string]*pendingWill
}

type pendingWill struct {
	t  *time.Timer
	cl *mochi.Client
	st *clientState
	w  *will
}

// willGone: c's connection ended; its will, if any and due, is published
// now or after its delay. The delay is no longer than the session: a
// session that ends with the connection, or that a new session of the
// client id has replaced, publishes at once; one that another connection
// already continues (a takeover) publishes none [MQTT-3.1.3-9].
func (s *Server) willGone(c *Conn, sessionEnds bool) {
	w := c.will
	if w == nil {
		return
	}
	if endedCleanly(c.cl) {
		s.dropWill(w.file)
		return
	}
	cl, st, id := c.cl, c.st, c.cl.ID
	delay := w.delay
	if exp := time.Duration(cl.Properties.Props.SessionExpiryInterval) * time.Second; c.v5 && exp < delay {
		delay = exp
	}
	s.states.mu.Lock()
	replaced := s.states.states[id] != st
	s.states.mu.Unlock()
	if sessionEnds || replaced {
		delay = 0
	}
	s.wills.mu.Lock()
	defer s.wills.mu.Unlock()
	st.mu.Lock()
	continued := st.owner != nil && st.owner != c
	st.mu.Unlock()
	switch {
	case delay <= 0:
		go s.publishWill(cl, st, w)
		return
	case continued:
		s.dropWill(w.file)
		return
	}
	if old := s.wills.m[id]; old != nil {
		old.t.Stop()
	}
	p := &pendingWill{cl: cl, st: st, w: w}
	p.t = time.AfterFunc(delay, func() {
		s.wills.mu.Lock()
		mine := s.wills.m[id] == p
		if mine {
			delete(s.wills.m, id)
		}
		s.wills.mu.Unlock()
		if mine {
			s.publishWill(cl, st, w)
		}
	})
	s.wills.m[id] = p
}

// willReturn: a new connection for client id. A will waiting for its
// delay is not published if the connection continues the session; if it
// starts a new one, the old session has ended and the will goes now.
func (s *Server) willReturn(clientID string, newSession bool) {
	s.wills.mu.Lock()
	p := s.wills.m[clientID]
	delete(s.wills.m, clientID) // its timer, if it fires, finds itself gone
	s.wills.mu.Unlock()
	if p == nil {
		return
	}
	p.t.Stop()
	if newSession {
		go s.publishWill(p.cl, p.st, p.w)
	} else {
		s.dropWill(p.w.file)
	}
}

// publishWill publishes w as a client of its own of the broker, as the
// session's publisher, and waits for aerie's ack (the fsync at its
// pubend), or gives up after a while, logging it.
func (s *Server) publishWill(cl *mochi.Client, st *clientState, w *will) {
	wc := newConn(s, cl)
	wc.st, wc.publisher, wc.perms = st, st.publisher, w.perms
	if wc.pubend == "" {
		s.log.Warn("MQTT will not published: this broker hosts no pubend and lies in no pubend's tree", "client", cl.ID, "topic", w.topic)
		return
	}
	wc.id = s.opts.Host.Up(wc)
	defer func() {
		wc.stop()
		s.opts.Host.Down(wc.id)
	}()
	seq, err := wc.nextSeq()
	if err != nil {
		s.log.Error("MQTT will not published: its session's state could not be written", "client", cl.ID, "topic", w.topic, "err", err)
		return
	}
	wc.mu.Lock()
	if w.retain != nil {
		w.retain.published = time.Now().UnixMilli() // its expiry counts from here
	}
	wc.acks = []pendingAck{{seq: seq, typ: packets.Puback, retain: w.retain}}
	wc.mu.Unlock()
	s.opts.Host.Request(wc.id, msg.Publish{Pubend: wc.pubend, Publisher: wc.publisher, Seq: seq,
		Topic: w.topic, Props: w.props, Payload: w.payload})
	timeout := time.NewTimer(willWait)
	defer timeout.Stop()
	for {
		wc.mu.Lock()
		a := wc.acks[0]
		wc.mu.Unlock()
		if a.done {
			if a.code != 0 {
				s.log.Warn("MQTT will refused", "client", cl.ID, "topic", w.topic, "reason", a.reason)
			} else {
				s.log.Info("MQTT will published", "client", cl.ID, "topic", w.topic)
			}
			s.dropWill(w.file) // settled either way
			return
		}
		select {
		case <-wc.wake:
		case <-s.closing:
			s.log.Warn("MQTT will not acknowledged before the broker stopped", "client", cl.ID, "topic", w.topic)
			return
		case <-timeout.C:
			s.log.Warn("MQTT will not acknowledged in time", "client", cl.ID, "topic", w.topic, "after", willWait)
			return
		}
	}
}

// willWait bounds how long a will's publisher waits for aerie's ack.
const willWait = 30 * time.Second
