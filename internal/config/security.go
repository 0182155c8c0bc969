package config

import (
	"bytes"
	"fmt"
	"path/filepath"
	"strings"

	"github.com/aerie-mq/aerie/internal/auth"
)

// The security part of the format (docs/CONFIG.md):
//
//	[tls]                                   # mutual TLS between brokers, TLS on client ports
//	ca = "certs/ca.pem"                     # paths are relative to the config file
//	[[broker]]
//	tls_cert = "certs/p1.pem"
//	tls_key  = "certs/p1-key.pem"
//	[[user]]                                # when any user exists, every client must authenticate
//	name      = "alice"
//	password  = "$2a$10$…"                  # bcrypt hash, from `aerie passwd`
//	publish   = ["orders.>"]                # topic patterns this user may publish to
//	subscribe = ["orders.>", "status.*"]    # patterns this user's subscriptions must fall within
//	[anonymous]                             # clients without credentials, when there are users
//	publish   = []                          # (absent: they are refused)
//	subscribe = ["status.>"]
//
// With [tls] every broker must have tls_cert and tls_key, and a broker
// with them needs [tls]: a broker never runs without TLS when the config
// asks for it. The files themselves are read when a broker starts
// (pki.LoadBroker), relative to the config file's directory (Resolve).

// TLS is the [tls] table.
type TLS struct {
	// CA is the PEM file of the certificate authority that signs every
	// broker's certificate (and the client certificates).
	CA string
}

// User is one [[user]] table.
type User struct {
	Name      string
	Password  string // a bcrypt hash
	Publish   []string
	Subscribe []string
}

// Anonymous is the [anonymous] table: the patterns a client without
// credentials may publish to and subscribe within, on a network that has
// users (an addition).
type Anonymous struct {
	Publish   []string
	Subscribe []string
}

var (
	anonymousKeys      = []string{"publish", "subscribe"}
	securityBrokerKeys = []string{"tls_cert", "tls_key"}
	tlsKeys            = []string{"ca"}
	userKeys           = []string{"name", "password", "publish", "subscribe"}
)

type rawTLS struct {
	CA any `toml:"ca"`
}

type rawAnonymous struct {
	Publish   any `toml:"publish"`
	Subscribe any `toml:"subscribe"`
}

type rawUser struct {
	Name      any `toml:"name"`
	Password  any `toml:"password"`
	Publish   any `toml:"publish"`
	Subscribe any `toml:"subscribe"`
}

// Resolve returns path relative to the directory base (the config file's),
// unless it is absolute.
func Resolve(base, path string) string {
	if path == "" || filepath.IsAbs(path) {
		return path
	}
	return filepath.Join(base, path)
}

// AuthUsers returns the users for auth.NewUsers.
func (n *Network) AuthUsers() []auth.User {
	out := make([]auth.User, len(n.Users))
	for i, u := range n.Users {
		out[i] = auth.User{Name: u.Name, Hash: u.Password, Publish: u.Publish, Subscribe: u.Subscribe}
	}
	return out
}

func (p *problems) convertSecurity(raw *rawNetwork, n *Network, bad map[fieldRef]bool) {
	for i, rb := range raw.Broker {
		n.Brokers[i].TLSCert = p.str(fieldRef{"broker", i, "tls_cert"}, rb.TLSCert, bad)
		n.Brokers[i].TLSKey = p.str(fieldRef{"broker", i, "tls_key"}, rb.TLSKey, bad)
	}
	if raw.TLS != nil {
		n.TLS = &TLS{}
		if raw.TLS.CA != nil {
			ca, ok := raw.TLS.CA.(string)
			if !ok {
				p.top("tls", "tls.ca must be a string (a PEM file), not %s", typeName(raw.TLS.CA))
				bad[fieldRef{"tls", 0, "ca"}] = true
			}
			n.TLS.CA = ca
		}
	}
	if ra := raw.Anonymous; ra != nil {
		n.Anonymous = &Anonymous{
			Publish:   p.strings(fieldRef{"anonymous", 0, "publish"}, ra.Publish, bad),
			Subscribe: p.strings(fieldRef{"anonymous", 0, "subscribe"}, ra.Subscribe, bad),
		}
	}
	for i, ru := range raw.User {
		s := func(key string, v any) string { return p.str(fieldRef{"user", i, key}, v, bad) }
		n.Users = append(n.Users, User{
			Name: s("name", ru.Name), Password: s("password", ru.Password),
			Publish:   p.strings(fieldRef{"user", i, "publish"}, ru.Publish, bad),
			Subscribe: p.strings(fieldRef{"user", i, "subscribe"}, ru.Subscribe, bad),
		})
	}
}

// checkSecurity: [tls] has a ca and every broker its certificate and key,
// and no broker has them without [tls]; every user has a name (once), a
// bcrypt hash and some permission, with valid patterns.
func (n *Network) checkSecurity(p *problems, bad map[fieldRef]bool) {
	if n.TLS != nil && n.TLS.CA == "" && !bad[fieldRef{"tls", 0, "ca"}] {
		p.top("tls", "[tls] has no ca: name the PEM file of the CA that signed the brokers' certificates (`aerie certs` makes one)")
	}
	for i, b := range n.Brokers {
		who := p.who(b, i)
		switch {
		case n.TLS != nil && b.TLSCert == "" && b.TLSKey == "" && !bad[fieldRef{"broker", i, "tls_cert"}] && !bad[fieldRef{"broker", i, "tls_key"}]:
			p.elem("broker", i, "%s has no tls_cert and tls_key, but [tls] turns TLS on for every broker (`aerie certs` makes them)", who)
		case n.TLS == nil && (b.TLSCert != "" || b.TLSKey != ""):
			p.field("broker", i, "tls_cert", "%s has a certificate but there is no [tls] table with the ca: add one (a broker never runs half TLS)", who)
		case b.TLSCert == "" && b.TLSKey != "" && !bad[fieldRef{"broker", i, "tls_cert"}]:
			p.field("broker", i, "tls_key", "%s has a tls_key but no tls_cert", who)
		case b.TLSCert != "" && b.TLSKey == "" && !bad[fieldRef{"broker", i, "tls_key"}]:
			p.field("broker", i, "tls_cert", "%s has a tls_cert but no tls_key", who)
		}
	}
	if a := n.Anonymous; a != nil {
		switch _, err := auth.NewPerms("", a.Publish, a.Subscribe); {
		case len(n.Users) == 0:
			p.top("anonymous", "[anonymous] says what clients without credentials may do on a network with [[user]] tables; "+
				"this one has none, so every client may do everything: add users or remove [anonymous]")
		case err != nil:
			p.top("anonymous", "[anonymous]: %v", err)
		}
	}
	seen := map[string]int{}
	for i, u := range n.Users {
		if u.Name != "" {
			if j, dup := seen[u.Name]; dup {
				p.field("user", i, "name", "user %q is defined twice (first at %s)", u.Name, p.where("user", j))
				continue
			}
			seen[u.Name] = i
		}
		if bad[fieldRef{"user", i, "name"}] || bad[fieldRef{"user", i, "password"}] || bad[fieldRef{"user", i, "publish"}] || bad[fieldRef{"user", i, "subscribe"}] {
			continue
		}
		err := auth.User{Name: u.Name, Hash: u.Password, Publish: u.Publish, Subscribe: u.Subscribe}.Check()
		if err == nil {
			continue
		}
		key := "name"
		switch msg := err.Error(); {
		case strings.Contains(msg, ": password:"):
			key = "password"
		case strings.Contains(msg, ": subscribe:"):
			key = "subscribe"
		case strings.Contains(msg, ": publish:"):
			key = "publish"
		}
		p.field("user", i, key, "%v", err)
	}
}

func marshalUsers(b *bytes.Buffer, users []User, anon *Anonymous) {
	list := func(key string, xs []string) {
		q := make([]string, len(xs))
		for i, s := range xs {
			q[i] = quote(s)
		}
		fmt.Fprintf(b, "%-9s = [%s]\n", key, strings.Join(q, ", "))
	}
	for _, u := range users {
		b.WriteString("\n[[user]]\n")
		fmt.Fprintf(b, "%-9s = %s\n%-9s = %s\n", "name", quote(u.Name), "password", quote(u.Password))
		if u.Publish != nil {
			list("publish", u.Publish)
		}
		if u.Subscribe != nil {
			list("subscribe", u.Subscribe)
		}
	}
	if anon != nil {
		b.WriteString("\n[anonymous]\n")
		list("publish", anon.Publish)
		list("subscribe", anon.Subscribe)
	}
}
