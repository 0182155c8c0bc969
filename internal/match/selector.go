package match

import (
	"errors"
	"fmt"
	"github.com/aerie-mq/aerie/internal/msg"
)

// ErrBadSelector is wrapped by every error ParseSelector returns.
var ErrBadSelector = errors.New("match: bad selector")

// Limits on selector source (see docs/SELECTORS.md).
const (
	MaxSelectorLen   = 64 << 10 // bytes of source
	MaxSelectorDepth = 100      // nesting of parentheses, NOT and unary signs
)

// SelectorError is a parse error: the 1-based column (in characters) where
// the fault was found and what was wrong. It unwraps to ErrBadSelector.
type SelectorError struct {
	Column int
	Msg    string
}

func (e *SelectorError) Error() string {
	return fmt.Sprintf("%v: column %d: %s", ErrBadSelector, e.Column, e.Msg)
}

// Unwrap makes errors.Is(err, ErrBadSelector) true.
func (e *SelectorError) Unwrap() error { return ErrBadSelector }

// Tri is a three-valued truth value: False, True or Unknown.
type Tri uint8

// The three truth values. The zero Tri is False.
const (
	False Tri = iota
	True
	Unknown
)

func (t Tri) String() string {
	switch t {
	case False:
		return "FALSE"
	case True:
		return "TRUE"
	case Unknown:
		return "UNKNOWN"
	}
	return fmt.Sprintf("Tri(%d)", uint8(t))
}

// Selector is a compiled JMS 1.1 (SQL-92 subset) message selector over event
// properties. It is immutable and safe for concurrent use.
type Selector struct {
	src  string
	root node
}

var _ Filter = (*Selector)(nil)

// ParseSelector compiles a JMS message selector. Errors wrap ErrBadSelector
// and are *SelectorError values carrying the column of the fault.
func ParseSelector(src string) (*Selector, error) {
	root, err := parseSelector(src)
	if err != nil {
		return nil, err
	}
	return &Selector{src: src, root: root}, nil
}

// MustSelector is ParseSelector for constants in tests and defaults.
func MustSelector(src string) *Selector {
	s, err := ParseSelector(src)
	if err != nil {
		panic(err)
	}
	return s
}

// String returns the selector's source text.
func (s *Selector) String() string { return s.src }

// Eval evaluates the selector against props with JMS three-valued logic. A
// property missing from props is NULL.
func (s *Selector) Eval(props msg.Props) Tri { return s.root.cond(props) }

// Match implements Filter: the event passes only when the selector evaluates
// to True. The topic is ignored.
func (s *Selector) Match(_ string, props msg.Props) bool {
	return s.root.cond(props) == True
}

// canonical renders the parsed selector with the minimum parentheses its
// tree needs; parsing the result gives an equivalent selector.
func (s *Selector) canonical() string {
	var b []byte
	b = writeNode(b, s.root, 0)
	return string(b)
}
