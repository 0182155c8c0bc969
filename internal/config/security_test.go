package config

import (
	"reflect"
	"strings"
	"testing"

	"golang.org/x/crypto/bcrypt"
)

func bhash(t *testing.T) string {
	h, err := bcrypt.GenerateFromPassword([]byte("pw"), bcrypt.MinCost)
	if err != nil {
		t.Fatal(err)
	}
	return string(h)
}

const secureNet = `
[tls]
ca = "certs/ca.pem"

[[broker]]
id = "p1"
listen = "127.0.0.1:7101"
clients = "127.0.0.1:7201"
tls_cert = "certs/p1.pem"
tls_key  = "certs/p1-key.pem"

[[user]]
name      = "alice"
password  = "HASH"
publish   = ["orders.>"]
subscribe = ["orders.>", "status.*"]

[[user]]
name      = "bob"
password  = "HASH"
subscribe = ["status.>"]

[anonymous]
subscribe = ["status.*"]
`

func TestParseSecurity(t *testing.T) {
	h := bhash(t)
	n, err := Parse([]byte(strings.ReplaceAll(secureNet, "HASH", h)), "net.toml")
	if err != nil {
		t.Fatal(err)
	}
	if n.TLS == nil || n.TLS.CA != "certs/ca.pem" || n.Brokers[0].TLSCert != "certs/p1.pem" || n.Brokers[0].TLSKey != "certs/p1-key.pem" {
		t.Fatalf("tls: %+v %+v", n.TLS, n.Brokers[0])
	}
	want := []User{{"alice", h, []string{"orders.>"}, []string{"orders.>", "status.*"}}, {"bob", h, nil, []string{"status.>"}}}
	if !reflect.DeepEqual(n.Users, want) {
		t.Fatalf("users %+v", n.Users)
	}
	if a := n.Anonymous; a == nil || a.Publish != nil || !reflect.DeepEqual(a.Subscribe, []string{"status.*"}) {
		t.Fatalf("anonymous %+v", a)
	}
	out, err := n.Marshal()
	if err != nil {
		t.Fatal(err)
	}
	again, err := Parse(out, "marshalled")
	if err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	if !reflect.DeepEqual(again, n) {
		t.Fatalf("round trip:\n%+v\n%+v\n%s", again, n, out)
	}
	if got := Resolve("/etc/aerie", "certs/ca.pem"); got != "/etc/aerie/certs/ca.pem" {
		t.Fatal(got)
	}
	if got := Resolve("/etc/aerie", "/abs/ca.pem"); got != "/abs/ca.pem" {
		t.Fatal(got)
	}
}

func TestSecurityErrors(t *testing.T) {
	h := bhash(t)
	broker := "[[broker]]\nid = \"p1\"\nlisten = \"127.0.0.1:7101\"\n"
	withCert := broker + "tls_cert = \"p1.pem\"\ntls_key = \"p1-key.pem\"\n"
	for _, c := range []struct{ src, want string }{
		{"[tls]\nca = \"ca.pem\"\n" + broker, `3:1: broker "p1" has no tls_cert and tls_key, but [tls] turns TLS on for every broker`},
		{"[tls]\n" + withCert, `1:1: [tls] has no ca`},
		{withCert, `4:1: broker "p1" has a certificate but there is no [tls] table`},
		{"[tls]\nca = \"ca.pem\"\n" + broker + "tls_cert = \"p1.pem\"\n", `tls_cert but no tls_key`},
		{"[tls]\nca = 3\n" + withCert, `tls.ca must be a string`},
		{"[tls]\nca = \"ca.pem\"\ncrt = 1\n" + withCert, `unknown key "crt" in [tls]`},
		{broker + "tls_crt = \"x\"\n", `unknown key "tls_crt" in [[broker]] (did you mean "tls_cert"?)`},
		{broker + "[[user]]\nname = \"a\"\npassword = \"secret\"\npublish = [\">\"]\n", `6:1: user "a": password: not a bcrypt hash (make one with ` + "`aerie passwd`" + `)`},
		{broker + "[[user]]\nname = \"a\"\npassword = \"" + h + "\"\n", `5:1: user "a" has no permissions`},
		{broker + "[[user]]\nname = \"a\"\npassword = \"" + h[:59] + "\"\npublish = [\">\"]\n", `6:1: user "a": password: not a bcrypt hash (make one with ` + "`aerie passwd`" + `): 59 characters, want 60`},
		{broker + "[[user]]\nname = \"a\"\npassword = \"" + h + "x\"\npublish = [\">\"]\n", `61 characters, want 60`},
		{broker + "[[user]]\nname = \"a\"\npassword = \"" + h[:30] + "!" + h[31:] + "\"\npublish = [\">\"]\n", `'!' at character 31 is not in bcrypt's alphabet`},
		{broker + "[[user]]\nname = \"a\"\npassword = \"" + strings.Replace(h, h[3:7], "$99$", 1) + "\"\npublish = [\">\"]\n", `cost 99 is outside allowed inclusive range`},
		{broker + "[[user]]\nname = \"a\"\npassword = \"" + h + "\"\nsubscribe = [\"a.>.b\"]\n", `user "a": subscribe: match: bad topic pattern`},
		{broker + "[[user]]\npassword = \"" + h + "\"\npublish = [\">\"]\n", `4:1: user has no name`},
		{broker + "[[user]]\nname = \"a\"\npassword = \"" + h + "\"\npublish = [\">\"]\n[[user]]\nname = \"a\"\npassword = \"" + h + "\"\npublish = [\">\"]\n", `user "a" is defined twice (first at line 4)`},
		{broker + "[[user]]\nname = \"a\"\npasword = \"x\"\n", `unknown key "pasword" in [[user]] (did you mean "password"?)`},
		{"user = 3\n" + broker, `user must be an array of tables`},
		{broker + "[anonymous]\nsubscribe = [\"a\"]\n", `[anonymous] says what clients without credentials may do on a network with [[user]] tables; this one has none`},
		{broker + "[[user]]\nname = \"a\"\npassword = \"" + h + "\"\npublish = [\">\"]\n[anonymous]\nsubscribe = [\"a.>.b\"]\n", `[anonymous]: match: bad topic pattern`},
		{broker + "[[user]]\nname = \"a\"\npassword = \"" + h + "\"\npublish = [\">\"]\n[anonymous]\nsubscribe = 3\n", `subscribe must be an array of strings`},
		{broker + "[[user]]\nname = \"a\"\npassword = \"" + h + "\"\npublish = [\">\"]\n[anonymous]\npub = []\n", `unknown key "pub" in [anonymous]`},
	} {
		_, err := Parse([]byte(c.src), "net.toml")
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s\n  got  %v\n  want %q", c.src, err, c.want)
		}
	}
}
