package client

import (
	"encoding/json"
	"fmt"
	"iter"
	"strings"

	"github.com/aerie-mq/aerie/internal/msg"
)

// Props are a delivered event's properties, read in place from the bytes
// the event arrived in: a lookup or a walk allocates nothing, where
// building a map for every event was about half of a subscriber's work per
// event. Values are int64, float64, bool or string, as published (other
// integer and float types were converted when they were published).
// The zero Props has no properties.
type Props struct{ p msg.Props }

// Len is the number of properties.
func (p Props) Len() int { return p.p.Len() }

// Get is the value of the property name (int64, float64, bool or string),
// and whether the event has it.
func (p Props) Get(name string) (any, bool) {
	v, ok := p.p.Get(name)
	if !ok {
		return nil, false
	}
	return v.Any(), true
}

// Int is the value of the integer property name; false if the event has
// no such property or it is not an integer.
func (p Props) Int(name string) (int64, bool) {
	v, ok := p.p.Get(name)
	return v.Int(), ok && v.Kind == msg.PropInt
}

// Float is the value of the floating-point property name; false if the
// event has no such property or it is not a float.
func (p Props) Float(name string) (float64, bool) {
	v, ok := p.p.Get(name)
	return v.Float(), ok && v.Kind == msg.PropFloat
}

// Bool is the value of the boolean property name; false, false if the
// event has no such property or it is not a bool.
func (p Props) Bool(name string) (value, ok bool) {
	v, ok := p.p.Get(name)
	return v.Bool(), ok && v.Kind == msg.PropBool
}

// Str is the value of the string property name; false if the event has no
// such property or it is not a string.
func (p Props) Str(name string) (string, bool) {
	v, ok := p.p.Get(name)
	return v.Str(), ok && v.Kind == msg.PropString
}

// All walks the properties in name order:
//
//	for name, v := range ev.Props.All() { ... }
func (p Props) All() iter.Seq2[string, any] {
	return func(yield func(string, any) bool) {
		it := p.p.Iter()
		for k, v, ok := it.Next(); ok; k, v, ok = it.Next() {
			if !yield(k, v.Any()) {
				return
			}
		}
	}
}

// Map copies the properties into a new map (nil when there are none).
func (p Props) Map() map[string]any { return p.p.Map() }

// MarshalJSON writes the properties as a JSON object (null when there are
// none), as the map they were published from would be.
func (p Props) MarshalJSON() ([]byte, error) { return json.Marshal(p.Map()) }

// String renders the properties as "{name=value ...}", in name order.
func (p Props) String() string {
	var b strings.Builder
	b.WriteByte('{')
	it := p.p.Iter()
	for k, v, ok := it.Next(); ok; k, v, ok = it.Next() {
		if b.Len() > 1 {
			b.WriteByte(' ')
		}
		fmt.Fprintf(&b, "%s=%v", k, v.Any())
	}
	b.WriteByte('}')
	return b.String()
}

// PropsOf makes the Props an event published with m would carry, for tests
// of code that consumes Events: integer and float types are converted as
// Publish converts them, and other types are refused.
func PropsOf(m map[string]any) (Props, error) {
	p, err := normalizeProps(m)
	return Props{p}, err
}
