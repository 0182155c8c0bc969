package mqtt

import (
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"

	"github.com/aerie-mq/aerie/internal/msg"
)

// Persistent sessions (docs/MQTT.md, Sessions).
//
// An MQTT persistent session is a set of durable subscriptions at the
// broker the client connects to (Gryphon DS, DSN 2003 §3–§4.1): one per
// aerie pattern of each of its filters, named
//
//	mqtt:<client id>:<qos>:<pattern index>:<filter>
//
// with the client id and the filter escaped (escapeName), so that a name
// holds no space or slash, its fields split at ':' without ambiguity, and
// every subscription of one client lies under the prefix "mqtt:<client
// id>:". The broker keeps each one's pattern, selector and checkpoint in
// its log; the name keeps what MQTT needs besides, so a client that comes
// back without resubscribing — after a broker restart too — gets its
// subscriptions back at the QoS it was granted.
//
// The checkpoint lives at the broker on the client's behalf: the
// connection acknowledges (msg.SubAck) up to an event once the client has
// PUBACKed it and every earlier delivery of its pubend on that
// subscription (checkpoint.go), so a reconnecting client gets again
// exactly what it had not acknowledged, and nothing it had.

// sessionPrefix is the prefix of every durable subscription of client id.
func sessionPrefix(clientID string) string { return "mqtt:" + escapeName(clientID) + ":" }

// durableSubName names the j-th aerie pattern of filter, granted qos, in
// client id's session.
func durableSubName(clientID string, qos byte, j int, filter string) msg.SubID {
	return msg.SubID(fmt.Sprintf("%s%d:%d:%s", sessionPrefix(clientID), qos, j, escapeName(filter)))
}

// sessionSub is one durable subscription of a session, read back from its
// name.
type sessionSub struct {
	filter string
	qos    byte
	j      int
}

// parseSubName reads a name durableSubName made under prefix.
func parseSubName(prefix string, name string) (sessionSub, error) {
	rest, ok := strings.CutPrefix(name, prefix)
	if !ok {
		return sessionSub{}, fmt.Errorf("durable subscription %q is not under %q", name, prefix)
	}
	parts := strings.SplitN(rest, ":", 3)
	if len(parts) != 3 {
		return sessionSub{}, fmt.Errorf("durable subscription %q: not an MQTT session's name", name)
	}
	qos, err1 := strconv.ParseUint(parts[0], 10, 8)
	j, err2 := strconv.Atoi(parts[1])
	filter, err3 := unescapeName(parts[2])
	if err1 != nil || err2 != nil || err3 != nil || qos > 2 || j < 0 {
		return sessionSub{}, fmt.Errorf("durable subscription %q: not an MQTT session's name", name)
	}
	return sessionSub{filter: filter, qos: byte(qos), j: j}, nil
}

// restoredSubs rebuilds a session's subscriptions from the broker's
// durable subscriptions under prefix: one per filter, its names in
// pattern order. Names that do not parse are left alone (and reported).
func restoredSubs(prefix string, ds []msg.DurableSub) (map[string]*subscription, []error) {
	type part struct {
		j    int
		name msg.SubID
		pat  string
	}
	parts := map[string][]part{}
	subs := map[string]*subscription{}
	var errs []error
	for _, d := range ds {
		ss, err := parseSubName(prefix, d.Name)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		if subs[ss.filter] == nil {
			subs[ss.filter] = &subscription{filter: ss.filter, qos: ss.qos, selector: d.Selector, durable: true}
		}
		parts[ss.filter] = append(parts[ss.filter], part{ss.j, msg.SubID(d.Name), d.Pattern})
	}
	for f, ps := range parts {
		slices.SortFunc(ps, func(a, b part) int { return a.j - b.j })
		for _, p := range ps {
			subs[f].names = append(subs[f].names, p.name)
			subs[f].patterns = append(subs[f].patterns, p.pat)
		}
	}
	return subs, errs
}

// escapeName keeps letters, digits, '-', '_' and '.', and writes every
// other byte as %XX: injective, and free of spaces, slashes and ':'.
func escapeName(s string) string {
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case 'a' <= c && c <= 'z', 'A' <= c && c <= 'Z', '0' <= c && c <= '9', c == '-', c == '_', c == '.':
			b.WriteByte(c)
		default:
			fmt.Fprintf(&b, "%%%02X", c)
		}
	}
	return b.String()
}

func unescapeName(s string) (string, error) {
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] != '%' {
			b.WriteByte(s[i])
			continue
		}
		if i+2 >= len(s) {
			return "", fmt.Errorf("bad escape in %q", s)
		}
		v, err := strconv.ParseUint(s[i+1:i+3], 16, 8)
		if err != nil {
			return "", fmt.Errorf("bad escape in %q: %w", s, err)
		}
		b.WriteByte(byte(v))
		i += 2
	}
	return b.String(), nil
}

// resume attaches the subscriptions of the session the client comes back
// to, as it left them: the broker resumes each from its checkpoint, so the
// client gets what it missed, once, in order per pubend.
func (c *Conn) resume(ds []msg.DurableSub) {
	subs, errs := restoredSubs(c.prefix, ds)
	for _, err := range errs {
		c.s.log.Warn("MQTT session: durable subscription not resumed", "client", c.cl.ID, "err", err)
	}
	var reqs []msg.Subscribe
	c.mu.Lock()
	for _, f := range slices.Sorted(maps.Keys(subs)) {
		sub := subs[f]
		c.subs[f] = sub
		for j, name := range sub.names {
			c.byName[name] = sub
			reqs = append(reqs, msg.Subscribe{Sub: name, Pattern: sub.patterns[j], Selector: sub.selector, Durable: true})
		}
	}
	for _, d := range ds {
		if c.byName[msg.SubID(d.Name)] != nil {
			c.ckpt.restored(msg.SubID(d.Name), d.Released)
		}
	}
	c.mu.Unlock()
	for _, m := range reqs {
		c.s.opts.Host.Request(c.id, m)
	}
	if len(subs) > 0 {
		c.s.log.Info("MQTT persistent session resumed", "client", c.cl.ID, "filters", len(subs))
	}
}
