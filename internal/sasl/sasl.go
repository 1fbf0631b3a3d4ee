package sasl

import (
	"errors"
)

// The mechanism names, as SaslHandshake carries them.
const (
	Plain       = "PLAIN"
	ScramSHA256 = "SCRAM-SHA-256"
	ScramSHA512 = "SCRAM-SHA-512"
)

var (
	// ErrAuthentication is a failed authentication: unknown user, wrong
	// password or proof. Kafka's SASL_AUTHENTICATION_FAILED.
	ErrAuthentication = errors.New("sasl: authentication failed: invalid credentials")
	// ErrProtocol is a message that breaks the mechanism's grammar or
	// comes out of turn. Kafka answers it with SASL_AUTHENTICATION_FAILED
	// too, and closes the connection.
	ErrProtocol = errors.New("sasl: malformed or unexpected message")
)

// Server is one mechanism's exchange with one client. Step takes the
// client's next message and returns the server's answer; done says the
// exchange is over and the client authenticated as User(). An error ends
// the exchange.
type Server interface {
	Step(msg []byte) (answer []byte, done bool, err error)
	// User is the authenticated user name, once done.
	User() string
}
