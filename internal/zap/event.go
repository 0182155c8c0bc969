package zap

import (
	"fmt"
	"strconv"
	"strings"
	"time"
)

// Topics of the two event types: a subscriber of both uses TopicPattern.
const (
	TopicChange  = "zap.change"
	TopicStatus  = "zap.status"
	TopicPattern = "zap.>"
)

// Kind is an event's type.
type Kind uint8

const (
	Change Kind = iota + 1 // ⟨DATE, TIME, STB-IP, TOCH, FROMCH⟩
	Status                 // ⟨DATE, TIME, STB-IP, STATUS⟩
)

// Status values (P2S §3.3: volume 0–100, mute/unmute, power on/off).
const (
	PowerOn  = "on"
	PowerOff = "off"
	Mute     = "mute"
	Unmute   = "unmute"
	volume   = "vol="
)

// NoChannel is FROMCH of a box's first reported channel.
const NoChannel = "-"

// Volume is the status of a volume change to v (0–100).
func Volume(v int) string { return volume + strconv.Itoa(v) }

// Event is one set-top box event.
type Event struct {
	Kind     Kind
	Time     time.Time // DATE and TIME, in UTC, to the millisecond
	Box      string    // STB-IP
	To, From string    // TOCH, FROMCH of a Change
	Status   string    // STATUS of a Status
}

const (
	dateLayout = "2006-01-02"
	timeLayout = "15:04:05.000"
)

// Topic is the topic the event is published on.
func (e Event) Topic() string {
	if e.Kind == Change {
		return TopicChange
	}
	return TopicStatus
}

// Encode writes the event as the paper's text record.
func (e Event) Encode() []byte {
	t := e.Time.UTC()
	b := make([]byte, 0, 64)
	b = t.AppendFormat(b, dateLayout)
	b = append(b, ',')
	b = t.AppendFormat(b, timeLayout)
	b = append(b, ',')
	b = append(b, e.Box...)
	b = append(b, ',')
	if e.Kind == Change {
		b = append(b, e.To...)
		b = append(b, ',')
		b = append(b, e.From...)
	} else {
		b = append(b, e.Status...)
	}
	return b
}

// Parse reads a text record: five fields are a channel change, four a
// status change.
func Parse(b []byte) (Event, error) {
	f := strings.Split(string(b), ",")
	if len(f) != 4 && len(f) != 5 {
		return Event{}, fmt.Errorf("zap event %q: %d fields, want 4 (status) or 5 (channel change)", b, len(f))
	}
	t, err := time.Parse(dateLayout+" "+timeLayout, f[0]+" "+f[1])
	if err != nil {
		return Event{}, fmt.Errorf("zap event %q: date and time: %w", b, err)
	}
	e := Event{Time: t, Box: f[2]}
	if e.Box == "" {
		return Event{}, fmt.Errorf("zap event %q: no STB-IP", b)
	}
	if len(f) == 5 {
		e.Kind, e.To, e.From = Change, f[3], f[4]
		if e.To == "" || e.To == NoChannel || e.From == "" {
			return Event{}, fmt.Errorf("zap event %q: bad channels", b)
		}
		return e, nil
	}
	e.Kind, e.Status = Status, f[3]
	switch s := e.Status; {
	case s == PowerOn, s == PowerOff, s == Mute, s == Unmute:
	case strings.HasPrefix(s, volume):
		v, err := strconv.Atoi(s[len(volume):])
		if err != nil || v < 0 || v > 100 {
			return Event{}, fmt.Errorf("zap event %q: volume is not 0–100", b)
		}
	default:
		return Event{}, fmt.Errorf("zap event %q: unknown status %q", b, s)
	}
	return e, nil
}

// BoxIP is the STB-IP of box i: 10.x.y.z.
func BoxIP(i int) string {
	return fmt.Sprintf("10.%d.%d.%d", (i>>16)&255, (i>>8)&255, i&255)
}

// ChannelName is the name of channel k (0-based): ch000, ch001, …
func ChannelName(k int) string { return fmt.Sprintf("ch%03d", k) }
