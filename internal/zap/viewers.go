package zap

import (
	"sort"
)

// State is the viewer statistics of the events applied so far: where each
// box is and whether it is on, and so the viewers per channel.
type State struct {
	boxes   map[string]boxState
	viewers map[string]int
	// Counters of what was applied: every event handed to ApplyPayload
	// counts in Events, an unparseable one also in Malformed.
	Events, Changes, Statuses, Malformed uint64
	// Gaps counts the notices that events may be missing: with one, the
	// statistics are no longer exact.
	Gaps uint64
}

type boxState struct {
	ch string // "" unknown
	on bool
}

// ChannelViewers is one line of a top list.
type ChannelViewers struct {
	Channel string `json:"channel"`
	Viewers int    `json:"viewers"`
}

// NewState returns the state before any event.
func NewState() *State {
	return &State{boxes: map[string]boxState{}, viewers: map[string]int{}}
}

// ApplyPayload applies one delivered event: its payload is the text record.
func (s *State) ApplyPayload(payload []byte) error {
	s.Events++
	e, err := Parse(payload)
	if err != nil {
		s.Malformed++
		return err
	}
	s.apply(e)
	return nil
}

// Apply applies a parsed event.
func (s *State) Apply(e Event) {
	s.Events++
	s.apply(e)
}

func (s *State) apply(e Event) {
	b := s.boxes[e.Box]
	switch e.Kind {
	case Change:
		s.Changes++
		s.leave(b)
		b = boxState{ch: e.To, on: true}
		s.join(b)
	case Status:
		s.Statuses++
		switch e.Status {
		case PowerOn:
			if !b.on {
				b.on = true
				s.join(b)
			}
		case PowerOff:
			if b.on {
				s.leave(b)
				b.on = false
			}
		}
	}
	s.boxes[e.Box] = b
}

func (s *State) join(b boxState) {
	if b.on && b.ch != "" {
		s.viewers[b.ch]++
	}
}

func (s *State) leave(b boxState) {
	if b.on && b.ch != "" {
		if s.viewers[b.ch]--; s.viewers[b.ch] == 0 {
			delete(s.viewers, b.ch)
		}
	}
}

// NumViewers is the number of boxes on and tuned to channel (P2S Listing 4).
func (s *State) NumViewers(channel string) int { return s.viewers[channel] }

// TopList returns the n most viewed channels, most viewers first, ties by
// channel name; n <= 0 returns every channel with a viewer (P2S Listing 4).
func (s *State) TopList(n int) []ChannelViewers {
	out := make([]ChannelViewers, 0, len(s.viewers))
	for ch, v := range s.viewers {
		out = append(out, ChannelViewers{ch, v})
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].Viewers != out[j].Viewers {
			return out[i].Viewers > out[j].Viewers
		}
		return out[i].Channel < out[j].Channel
	})
	if n > 0 && n < len(out) {
		out = out[:n]
	}
	return out
}

// Boxes returns the number of boxes seen and of those on and counted on a
// channel.
func (s *State) Boxes() (seen, watching int) {
	for _, v := range s.viewers {
		watching += v
	}
	return len(s.boxes), watching
}
