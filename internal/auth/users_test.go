package auth

import (
	"errors"
	"strings"
	"testing"

	"golang.org/x/crypto/bcrypt"
)

func hash(t testing.TB, pw string) string {
	t.Helper()
	h, err := bcrypt.GenerateFromPassword([]byte(pw), bcrypt.MinCost)
	if err != nil {
		t.Fatal(err)
	}
	return string(h)
}

func TestAuthenticate(t *testing.T) {
	us, err := NewUsers([]User{
		{Name: "alice", Hash: hash(t, "wonderland"), Publish: []string{"orders.>"}, Subscribe: []string{"orders.>"}},
		{Name: "bob", Hash: hash(t, "builder"), Subscribe: []string{"status.>"}},
	})
	if err != nil {
		t.Fatal(err)
	}
	p, err := us.Authenticate("alice", "wonderland")
	if err != nil || p.User != "alice" || !p.MayPublish("orders.eu") {
		t.Fatalf("alice: %v %+v", err, p)
	}
	for _, c := range [][2]string{{"alice", "builder"}, {"bob", ""}, {"carol", "wonderland"}, {"", ""}} {
		if _, err := us.Authenticate(c[0], c[1]); !errors.Is(err, ErrFailed) || err.Error() != "authentication failed" {
			t.Errorf("Authenticate(%q, %q) = %v", c[0], c[1], err)
		}
	}
	if none, err := NewUsers(nil); none != nil || err != nil {
		t.Errorf("no users: %v %v", none, err)
	}
}

func TestUserCheck(t *testing.T) {
	good := hash(t, "x")
	for _, c := range []struct {
		u    User
		want string
	}{
		{User{Hash: good, Publish: []string{">"}}, "user has no name"},
		{User{Name: "a", Hash: "secret", Publish: []string{">"}}, `user "a": password: not a bcrypt hash`},
		{User{Name: "a", Hash: good[:20], Publish: []string{">"}}, "not a bcrypt hash"},
		{User{Name: "a", Hash: good}, `user "a" has no permissions`},
		{User{Name: "a", Hash: good, Subscribe: []string{"a.>.b"}}, `user "a": subscribe: match: bad topic pattern`},
	} {
		err := c.u.Check()
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%+v: %v, want %q", c.u, err, c.want)
		}
	}
	if _, err := NewUsers([]User{{Name: "a", Hash: good, Publish: []string{">"}}, {Name: "a", Hash: good, Publish: []string{">"}}}); err == nil {
		t.Error("a user defined twice was accepted")
	}
}
