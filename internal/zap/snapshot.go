package zap

import (
	"bufio"
	"bytes"
	"fmt"
	"sort"
	"strings"
)

const snapshotHeader = "aerie zap state 1"

// Marshal writes the state with token, the checkpoint token of a durable
// subscription that covers exactly the events applied: restored together
// (Unmarshal) and resumed from token, the state goes on as if never
// stopped. The encoding is canonical (boxes sorted), so two equal states
// with the same token marshal to the same bytes.
func (s *State) Marshal(token string) []byte {
	type entry struct {
		ip string
		boxState
	}
	es := make([]entry, 0, len(s.boxes))
	for ip, x := range s.boxes {
		es = append(es, entry{ip, x})
	}
	sort.Slice(es, func(i, j int) bool { return es[i].ip < es[j].ip })
	var b bytes.Buffer
	b.Grow(64 + 28*len(es))
	fmt.Fprintf(&b, "%s\ntoken %s\ncounts events=%d changes=%d statuses=%d malformed=%d gaps=%d\n",
		snapshotHeader, token, s.Events, s.Changes, s.Statuses, s.Malformed, s.Gaps)
	for _, x := range es {
		ch, on := x.ch, " off\n"
		if ch == "" {
			ch = NoChannel
		}
		if x.on {
			on = " on\n"
		}
		b.WriteString("box ")
		b.WriteString(x.ip)
		b.WriteByte(' ')
		b.WriteString(ch)
		b.WriteString(on)
	}
	fmt.Fprintf(&b, "end %d\n", len(es))
	return b.Bytes()
}

// Unmarshal reads what Marshal wrote: the state and its token.
func Unmarshal(data []byte) (*State, string, error) {
	s := NewState()
	sc := bufio.NewScanner(bytes.NewReader(data))
	sc.Buffer(make([]byte, 4096), 1<<20)
	line := 0
	next := func() (string, bool) {
		line++
		if !sc.Scan() {
			return "", false
		}
		return sc.Text(), true
	}
	bad := func(why string) (*State, string, error) {
		return nil, "", fmt.Errorf("zap state, line %d: %s", line, why)
	}
	if l, ok := next(); !ok || l != snapshotHeader {
		return bad(fmt.Sprintf("want %q", snapshotHeader))
	}
	l, ok := next()
	token, isTok := strings.CutPrefix(l, "token ")
	if !ok || !isTok && l != "token" {
		return bad("want the token")
	}
	l, _ = next()
	if _, err := fmt.Sscanf(l, "counts events=%d changes=%d statuses=%d malformed=%d gaps=%d",
		&s.Events, &s.Changes, &s.Statuses, &s.Malformed, &s.Gaps); err != nil {
		return bad(fmt.Sprintf("counts: %v", err))
	}
	for {
		l, ok := next()
		if !ok {
			return bad("truncated: no end line")
		}
		f := strings.Fields(l)
		if len(f) == 2 && f[0] == "end" {
			if f[1] != fmt.Sprint(len(s.boxes)) {
				return bad(fmt.Sprintf("end says %s boxes, read %d", f[1], len(s.boxes)))
			}
			break
		}
		if len(f) != 4 || f[0] != "box" || f[3] != "on" && f[3] != "off" {
			return bad(fmt.Sprintf("bad box line %q", l))
		}
		if _, dup := s.boxes[f[1]]; dup {
			return bad(fmt.Sprintf("box %s twice", f[1]))
		}
		b := boxState{ch: f[2], on: f[3] == "on"}
		if b.ch == NoChannel {
			b.ch = ""
		}
		s.boxes[f[1]] = b
		s.join(b)
	}
	if err := sc.Err(); err != nil {
		return bad(err.Error())
	}
	if _, more := next(); more {
		return bad("data after the end line")
	}
	return s, token, nil
}
