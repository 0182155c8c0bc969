package auth

import (
	"errors"
	"fmt"
	"strings"

	"golang.org/x/crypto/bcrypt"
)

// ErrFailed is the one answer to a bad user name or password: the client
// is not told which of the two was wrong.
var ErrFailed = errors.New("authentication failed")

// User is one [[user]] of the config: a name, a bcrypt hash of the
// password, and the patterns it may publish to and subscribe within.
type User struct {
	Name      string
	Hash      string // bcrypt, as `aerie passwd` prints it
	Publish   []string
	Subscribe []string
}

// Users checks credentials. A nil *Users means the network has no users:
// every client is let in, unauthenticated, with every permission.
type Users struct {
	byName map[string]user
	// dummy is a hash checked for an unknown name, so that an unknown user
	// costs the same time as a wrong password.
	dummy []byte
	// anon is what a client without credentials may do; nil: it is
	// refused ([anonymous], docs/CONFIG.md).
	anon *Perms
}

// AllowAnonymous lets clients without credentials in, with the publish
// and subscribe patterns given (none: they may do nothing).
func (us *Users) AllowAnonymous(publish, subscribe []string) error {
	p, err := NewPerms("", publish, subscribe)
	if err != nil {
		return fmt.Errorf("[anonymous]: %w", err)
	}
	us.anon = p
	return nil
}

// Anonymous returns the permissions of a client without credentials, nil
// when such a client is refused.
func (us *Users) Anonymous() *Perms {
	if us == nil {
		return nil
	}
	return us.anon
}

type user struct {
	hash  []byte
	perms *Perms
}

// bcryptLen is the length of every bcrypt hash ("$2a$10$" and 53
// characters of salt and digest).
const bcryptLen = 60

// CheckHash reports what is wrong with a bcrypt hash (nil: nothing). Past
// bcrypt's own parsing of the prefix it checks the length and alphabet:
// a hash cut short or mangled in copying parses, and would otherwise make
// a user who can never log in instead of an error at start.
func CheckHash(hash string) error {
	if _, err := bcrypt.Cost([]byte(hash)); err != nil {
		return fmt.Errorf("not a bcrypt hash (make one with `aerie passwd`): %w", err)
	}
	if len(hash) != bcryptLen {
		return fmt.Errorf("not a bcrypt hash (make one with `aerie passwd`): %d characters, want %d (cut or copied wrong?)", len(hash), bcryptLen)
	}
	if i := strings.IndexFunc(hash[7:], notBcrypt64); i >= 0 {
		return fmt.Errorf("not a bcrypt hash (make one with `aerie passwd`): %q at character %d is not in bcrypt's alphabet", hash[7+i], 8+i)
	}
	return nil
}

// notBcrypt64 reports a rune outside bcrypt's base64 alphabet.
func notBcrypt64(r rune) bool {
	return !(r == '.' || r == '/' || 'A' <= r && r <= 'Z' || 'a' <= r && r <= 'z' || '0' <= r && r <= '9')
}

// Check reports what is wrong with one user's definition (nil: nothing).
func (u User) Check() error {
	if u.Name == "" {
		return errors.New("user has no name")
	}
	if err := CheckHash(u.Hash); err != nil {
		return fmt.Errorf("user %q: password: %w", u.Name, err)
	}
	if len(u.Publish) == 0 && len(u.Subscribe) == 0 {
		return fmt.Errorf("user %q has no permissions: give it publish or subscribe patterns (or remove it)", u.Name)
	}
	for _, list := range []struct {
		key string
		ps  []string
	}{{"publish", u.Publish}, {"subscribe", u.Subscribe}} {
		for _, p := range list.ps {
			if !valid(p) {
				_, err := NewPerms(u.Name, []string{p}, nil)
				return fmt.Errorf("user %q: %s: %w", u.Name, list.key, err)
			}
		}
	}
	return nil
}

// NewUsers checks every user and returns the set (nil for none: no
// authentication).
func NewUsers(list []User) (*Users, error) {
	if len(list) == 0 {
		return nil, nil
	}
	us := &Users{byName: map[string]user{}}
	for _, u := range list {
		if err := u.Check(); err != nil {
			return nil, err
		}
		if _, dup := us.byName[u.Name]; dup {
			return nil, fmt.Errorf("user %q is defined twice", u.Name)
		}
		perms, err := NewPerms(u.Name, u.Publish, u.Subscribe)
		if err != nil {
			return nil, err
		}
		us.byName[u.Name] = user{hash: []byte(u.Hash), perms: perms}
		if us.dummy == nil {
			us.dummy = []byte(u.Hash) // the same cost as the real ones
		}
	}
	return us, nil
}

// Authenticate checks a user name and password and returns the user's
// permissions, or ErrFailed. It costs one bcrypt comparison (tens of
// milliseconds at the default cost), whether the name is known or not.
func (us *Users) Authenticate(name, password string) (*Perms, error) {
	u, ok := us.byName[name]
	if !ok {
		bcrypt.CompareHashAndPassword(us.dummy, []byte(password))
		return nil, ErrFailed
	}
	if bcrypt.CompareHashAndPassword(u.hash, []byte(password)) != nil {
		return nil, ErrFailed
	}
	return u.perms, nil
}

// Hash returns the bcrypt hash of password at the default cost, as
// `aerie passwd` prints it.
func Hash(password []byte) (string, error) {
	h, err := bcrypt.GenerateFromPassword(password, bcrypt.DefaultCost)
	return string(h), err
}
