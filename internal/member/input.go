package member

import (
	"encoding/json"
	"fmt"
)

// Input is one thing that happened to a member: a failure-detector report,
// a message from another member, or the timer.
type Input interface{ isInput() }

// Alive: the failure detector sees Member alive (it joined, or it refuted a
// suspicion). Its metadata is what it joined with.
type Alive struct{ Member Member }

// Suspect: the failure detector suspects ID. Views do not change on
// suspicion; only Failed removes a member, so a slow member is not expelled
// before the detector (SWIM + Lifeguard) has made up its mind.
type Suspect struct{ ID ID }

// Failed: the failure detector declared ID dead without a leave: a crash.
type Failed struct{ ID ID }

// Departed: ID left gracefully (memberlist's Leave).
type Departed struct{ ID ID }

// Recv is a message from another member.
type Recv struct {
	From ID
	Msg  Message
}

// Tick is the timer; call it every Config.TickInterval.
type Tick struct{}

func (Alive) isInput()    {}
func (Suspect) isInput()  {}
func (Failed) isInput()   {}
func (Departed) isInput() {}
func (Recv) isInput()     {}
func (Tick) isInput()     {}

// Kind says what a Message is.
type Kind uint8

const (
	// Announce carries a view: the elder issuing or re-announcing it, a
	// seed answering a joiner, a member telling a stale or conflicting
	// sender about its own view.
	Announce Kind = iota + 1
	// Ack says the sender installed view Ack.ID with digest Ack.Digest.
	Ack
	// Probe asks for the receiver's view: a member taking over from a dead
	// elder first learns the highest view any live member installed, so it
	// does not reuse an id the dead elder issued.
	Probe
	// Bye says the sender is leaving gracefully. The failure detector's
	// report of its departure then counts as a leave even when the detector
	// cannot tell a leave from a death (memberlist v0.7 does not set
	// Node.State in NotifyLeave).
	Bye
)

// Ref names a view without carrying it.
type Ref struct {
	ID     uint64 `json:"id"`
	Digest uint64 `json:"d"`
}

// Message is what members send each other.
type Message struct {
	Kind Kind  `json:"k"`
	View *View `json:"v,omitempty"`
	Ack  Ref   `json:"a,omitempty"`
}

// Envelope is a message to send to member To.
type Envelope struct {
	To  ID
	Msg Message
}

// Encode renders m for the wire. JSON: a view of 200 members is ~20 KB and
// is sent once per view change per member; the adapter sends it over a
// reliable stream.
func (m Message) Encode() []byte {
	b, err := json.Marshal(m)
	if err != nil {
		panic(fmt.Sprintf("member: encoding a message cannot fail: %v", err))
	}
	return b
}

// DecodeMessage parses what Encode produced.
func DecodeMessage(b []byte) (Message, error) {
	var m Message
	if err := json.Unmarshal(b, &m); err != nil {
		return Message{}, fmt.Errorf("%w: %w", ErrBadMessage, err)
	}
	if m.Kind < Announce || m.Kind > Bye || m.Kind == Announce && (m.View == nil || len(m.View.Members) == 0) {
		return Message{}, fmt.Errorf("%w: kind %d", ErrBadMessage, m.Kind)
	}
	return m, nil
}

// EncodeMeta renders metadata for the failure detector's per-node metadata
// (memberlist's NodeMeta, at most 512 bytes: the adapter checks).
func EncodeMeta(m Meta) []byte {
	b, err := json.Marshal(m)
	if err != nil {
		panic(fmt.Sprintf("member: encoding metadata cannot fail: %v", err))
	}
	return b
}

// DecodeMeta parses what EncodeMeta produced; empty input is empty metadata.
func DecodeMeta(b []byte) (Meta, error) {
	var m Meta
	if len(b) == 0 {
		return m, nil
	}
	if err := json.Unmarshal(b, &m); err != nil {
		return Meta{}, fmt.Errorf("%w: metadata: %w", ErrBadMessage, err)
	}
	return m, nil
}
