package sasl

import (
	"bytes"
	"crypto/hmac"
	"crypto/pbkdf2"
	"crypto/sha256"
	"crypto/sha512"
	"crypto/subtle"
	"encoding/base64"
	"fmt"
	"hash"
	"strconv"
	"strings"
)

// Kafka's bounds on a SCRAM credential's iteration count
// (ScramMechanism.minIterations, and the 16384 its AlterUserScramCredentials
// handler refuses above).
const (
	ScramIterationsMin = 4096
	ScramIterationsMax = 16384
)

// ScramMechanism is one of the SCRAM mechanisms, with the numbering of
// Kafka's DescribeUserScramCredentials and AlterUserScramCredentials.
type ScramMechanism int8

const (
	ScramUnknown ScramMechanism = 0
	SHA256       ScramMechanism = 1
	SHA512       ScramMechanism = 2
)

// ScramMechanismNamed returns the mechanism of a SaslHandshake name.
func ScramMechanismNamed(name string) ScramMechanism {
	switch name {
	case ScramSHA256:
		return SHA256
	case ScramSHA512:
		return SHA512
	}
	return ScramUnknown
}

func (m ScramMechanism) String() string {
	switch m {
	case SHA256:
		return ScramSHA256
	case SHA512:
		return ScramSHA512
	}
	return "UNKNOWN"
}

func (m ScramMechanism) hash() func() hash.Hash {
	if m == SHA512 {
		return sha512.New
	}
	return sha256.New
}

// Credential is what the server keeps of a SCRAM password.
type Credential struct {
	Salt       []byte
	StoredKey  []byte
	ServerKey  []byte
	Iterations int32
}

// SaltPassword is Hi(password, salt, iterations) of RFC 5802: PBKDF2 with
// the mechanism's HMAC. Clients compute it; AlterUserScramCredentials
// carries it.
func SaltPassword(m ScramMechanism, password string, salt []byte, iterations int) ([]byte, error) {
	h := m.hash()
	return pbkdf2.Key(h, password, salt, iterations, h().Size())
}

// NewCredential derives the stored credential from a salted password.
func NewCredential(m ScramMechanism, salted, salt []byte, iterations int32) Credential {
	clientKey := mac(m, salted, []byte("Client Key"))
	h := m.hash()()
	h.Write(clientKey)
	return Credential{
		Salt:       bytes.Clone(salt),
		StoredKey:  h.Sum(nil),
		ServerKey:  mac(m, salted, []byte("Server Key")),
		Iterations: iterations,
	}
}

func mac(m ScramMechanism, key, msg []byte) []byte {
	h := hmac.New(m.hash(), key)
	h.Write(msg)
	return h.Sum(nil)
}

// scramServer is the server side of one SCRAM exchange.
type scramServer struct {
	mech   ScramMechanism
	lookup func(user string) (Credential, bool)
	nonce  string // the server's part of the nonce

	step        int
	user        string
	cred        Credential
	clientFirst string // client-first-message-bare
	serverFirst string
	gs2         string // the GS2 header, echoed in c=
}

// NewScramServer starts a SCRAM exchange. lookup finds a user's credential
// for this mechanism; nonce is the server's random nonce (printable, no
// comma), fresh for every exchange.
func NewScramServer(m ScramMechanism, lookup func(user string) (Credential, bool), nonce string) Server {
	return &scramServer{mech: m, lookup: lookup, nonce: nonce}
}

func (s *scramServer) User() string { return s.user }

func (s *scramServer) Step(msg []byte) ([]byte, bool, error) {
	s.step++
	switch s.step {
	case 1:
		out, err := s.first(string(msg))
		return out, false, err
	case 2:
		out, err := s.final(string(msg))
		return out, err == nil, err
	}
	return nil, false, fmt.Errorf("%w: SCRAM exchange already over", ErrProtocol)
}

// first reads client-first-message: gs2-header client-first-message-bare.
func (s *scramServer) first(msg string) ([]byte, error) {
	// gs2-header = gs2-cbind-flag "," [ authzid ] ","
	cbind, rest, ok := strings.Cut(msg, ",")
	if !ok {
		return nil, fmt.Errorf("%w: client-first without a GS2 header", ErrProtocol)
	}
	switch {
	case cbind == "n", cbind == "y":
	case strings.HasPrefix(cbind, "p="):
		return nil, fmt.Errorf("%w: channel binding is not offered", ErrProtocol)
	default:
		return nil, fmt.Errorf("%w: GS2 channel binding flag %q", ErrProtocol, cbind)
	}
	authz, bare, ok := strings.Cut(rest, ",")
	if !ok {
		return nil, fmt.Errorf("%w: client-first without a GS2 header", ErrProtocol)
	}
	s.gs2 = cbind + "," + authz + ","
	if strings.HasPrefix(bare, "m=") {
		return nil, fmt.Errorf("%w: mandatory extension", ErrProtocol)
	}
	attrs := strings.Split(bare, ",")
	if len(attrs) < 2 || !strings.HasPrefix(attrs[0], "n=") || !strings.HasPrefix(attrs[1], "r=") {
		return nil, fmt.Errorf("%w: client-first-message-bare %q", ErrProtocol, clip(bare))
	}
	user, err := saslName(attrs[0][2:])
	if err != nil {
		return nil, err
	}
	if authz != "" {
		a, err := saslName(strings.TrimPrefix(authz, "a="))
		if err != nil || !strings.HasPrefix(authz, "a=") {
			return nil, fmt.Errorf("%w: authorization id %q", ErrProtocol, clip(authz))
		}
		if a != user {
			return nil, fmt.Errorf("%w: authorization id %q is not the user %q", ErrAuthentication, a, user)
		}
	}
	// Kafka's extensions (tokenauth=true for delegation tokens) are
	// not offered: a token is not a user here, so authentication fails.
	for _, a := range attrs[2:] {
		if strings.HasPrefix(a, "tokenauth=") && a != "tokenauth=false" {
			return nil, ErrAuthentication
		}
	}
	cnonce := attrs[1][2:]
	if cnonce == "" || strings.ContainsAny(cnonce, ",") {
		return nil, fmt.Errorf("%w: client nonce", ErrProtocol)
	}
	cred, ok := s.lookup(user)
	if !ok {
		return nil, ErrAuthentication
	}
	s.user, s.cred, s.clientFirst = user, cred, bare
	s.serverFirst = "r=" + cnonce + s.nonce + ",s=" + base64.StdEncoding.EncodeToString(cred.Salt) +
		",i=" + strconv.Itoa(int(cred.Iterations))
	return []byte(s.serverFirst), nil
}

// final reads client-final-message: c=<gs2 header>,r=<nonce>[,ext],p=<proof>,
// checks the proof and returns server-final-message.
func (s *scramServer) final(msg string) ([]byte, error) {
	withoutProof, proof64, ok := strings.Cut(msg, ",p=")
	if !ok || strings.Contains(proof64, ",") {
		return nil, fmt.Errorf("%w: client-final without a proof at its end", ErrProtocol)
	}
	attrs := strings.Split(withoutProof, ",")
	if len(attrs) < 2 || !strings.HasPrefix(attrs[0], "c=") || !strings.HasPrefix(attrs[1], "r=") {
		return nil, fmt.Errorf("%w: client-final %q", ErrProtocol, clip(withoutProof))
	}
	cb, err := base64.StdEncoding.DecodeString(attrs[0][2:])
	if err != nil || string(cb) != s.gs2 {
		return nil, fmt.Errorf("%w: channel binding %q does not echo the GS2 header", ErrProtocol, clip(attrs[0]))
	}
	// The nonce must end with the one server-first gave: librdkafka
	// sends its client nonce before the whole of it (its own nonce
	// twice), and Kafka's ScramSaslServer checks endsWith for that
	// reason. The proof covers the nonce as sent either way.
	nonce := attrs[1][2:]
	wantNonce := strings.TrimPrefix(strings.SplitN(s.serverFirst, ",", 2)[0], "r=")
	if len(nonce) < len(wantNonce) || subtle.ConstantTimeCompare([]byte(nonce[len(nonce)-len(wantNonce):]), []byte(wantNonce)) != 1 {
		return nil, fmt.Errorf("%w: nonce does not match", ErrAuthentication)
	}
	proof, err := base64.StdEncoding.DecodeString(proof64)
	if err != nil || len(proof) != len(s.cred.StoredKey) {
		return nil, ErrAuthentication
	}
	authMessage := []byte(s.clientFirst + "," + s.serverFirst + "," + withoutProof)
	clientSig := mac(s.mech, s.cred.StoredKey, authMessage)
	clientKey := make([]byte, len(proof))
	for i := range proof {
		clientKey[i] = proof[i] ^ clientSig[i]
	}
	h := s.mech.hash()()
	h.Write(clientKey)
	if subtle.ConstantTimeCompare(h.Sum(nil), s.cred.StoredKey) != 1 {
		return nil, ErrAuthentication
	}
	serverSig := mac(s.mech, s.cred.ServerKey, authMessage)
	return []byte("v=" + base64.StdEncoding.EncodeToString(serverSig)), nil
}

// saslName decodes a SCRAM user name: "=2C" is ",", "=3D" is "=", and any
// other "=" is malformed (RFC 5802, section 5.1).
func saslName(s string) (string, error) {
	if s == "" {
		return "", fmt.Errorf("%w: empty user name", ErrProtocol)
	}
	if !strings.Contains(s, "=") {
		return s, nil
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] != '=' {
			b.WriteByte(s[i])
			continue
		}
		switch {
		case strings.HasPrefix(s[i:], "=2C"):
			b.WriteByte(',')
		case strings.HasPrefix(s[i:], "=3D"):
			b.WriteByte('=')
		default:
			return "", fmt.Errorf("%w: user name %q", ErrProtocol, clip(s))
		}
		i += 2
	}
	return b.String(), nil
}

// clip shortens what an error quotes from a peer's message.
func clip(s string) string {
	if len(s) > 64 {
		return s[:64] + "..."
	}
	return s
}
