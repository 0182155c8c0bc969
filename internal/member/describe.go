package member

import (
	"fmt"
	"slices"
	"strings"
)

// Describe renders the member's state on one line for traces and test
// failures: its view, elder, failure-detector table and elder state.
func (m *Membership) Describe() string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s: view %s installed=%v quorate=%v maxSeen=%d", m.self.ID, m.cur, m.installed, m.quorate, m.maxSeen)
	if m.heard.ID > 0 {
		fmt.Fprintf(&b, " heard=%s", m.heard)
	}
	if e, ok := m.Elder(); ok {
		fmt.Fprintf(&b, " elder=%s isElder=%v", e.ID, m.IsElder())
	}
	if m.yieldAt > 0 {
		fmt.Fprintf(&b, " yieldTo=%s@%d", m.yieldTo, m.yieldAt)
	}
	ids := make([]ID, 0, len(m.fd))
	for id := range m.fd {
		ids = append(ids, id)
	}
	slices.SortFunc(ids, cmpID)
	b.WriteString(" fd[")
	for i, id := range ids {
		if i > 0 {
			b.WriteString(" ")
		}
		fmt.Fprintf(&b, "%s:%s", id, [...]string{"?", "alive", "suspect", "failed", "left"}[m.fd[id].state])
	}
	b.WriteString("]")
	return b.String()
}
