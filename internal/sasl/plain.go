package sasl

import (
	"bytes"
	"crypto/subtle"
	"fmt"
)

// PlainUsers checks a user's password for PLAIN: the users of the
// listener's JAAS configuration (user_<name>="<password>").
type PlainUsers map[string]string

// Check reports whether password is user's, in time independent of where
// the two differ.
func (u PlainUsers) Check(user, password string) bool {
	want, ok := u[user]
	return ok && subtle.ConstantTimeCompare([]byte(want), []byte(password)) == 1
}

// plainServer is PLAIN's one-message exchange (RFC 4616):
// [authzid] NUL authcid NUL passwd.
type plainServer struct {
	users PlainUsers
	user  string
	done  bool
}

// NewPlainServer starts a PLAIN exchange against users.
func NewPlainServer(users PlainUsers) Server { return &plainServer{users: users} }

func (s *plainServer) User() string { return s.user }

func (s *plainServer) Step(msg []byte) ([]byte, bool, error) {
	if s.done {
		return nil, false, fmt.Errorf("%w: PLAIN takes one message", ErrProtocol)
	}
	s.done = true
	parts := bytes.Split(msg, []byte{0})
	if len(parts) != 3 {
		return nil, false, fmt.Errorf("%w: PLAIN message of %d NUL-separated fields, want 3", ErrProtocol, len(parts))
	}
	authz, user, pass := string(parts[0]), string(parts[1]), string(parts[2])
	if user == "" || pass == "" {
		return nil, false, fmt.Errorf("%w: PLAIN without a user name or password", ErrProtocol)
	}
	// Kafka's PlainSaslServer: an authorization id, when given, must be
	// the authenticated user; acting for someone else is not offered.
	if authz != "" && authz != user {
		return nil, false, fmt.Errorf("%w: authorization id %q is not the user %q", ErrAuthentication, authz, user)
	}
	if !s.users.Check(user, pass) {
		return nil, false, ErrAuthentication
	}
	s.user = user
	return nil, true, nil
}
