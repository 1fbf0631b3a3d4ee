package sasl

import (
	"context"
	"encoding/base64"
	"errors"
	"testing"

	"github.com/twmb/franz-go/pkg/sasl"
	"github.com/twmb/franz-go/pkg/sasl/plain"
	"github.com/twmb/franz-go/pkg/sasl/scram"
)

// TestRFC7677Vector: the SCRAM-SHA-256 exchange of RFC 7677, section 3,
// byte for byte: user "user", password "pencil".
func TestRFC7677Vector(t *testing.T) {
	salt, _ := base64.StdEncoding.DecodeString("W22ZaJ0SNY7soEsUEjb6gQ==")
	salted, err := SaltPassword(SHA256, "pencil", salt, 4096)
	if err != nil {
		t.Fatal(err)
	}
	cred := NewCredential(SHA256, salted, salt, 4096)
	s := NewScramServer(SHA256, func(u string) (Credential, bool) { return cred, u == "user" }, "%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0")
	out, done, err := s.Step([]byte("n,,n=user,r=rOprNGfwEbeRWgbNEkqO"))
	if err != nil || done {
		t.Fatalf("client-first: %v %v", done, err)
	}
	if want := "r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,s=W22ZaJ0SNY7soEsUEjb6gQ==,i=4096"; string(out) != want {
		t.Fatalf("server-first %q, want %q", out, want)
	}
	out, done, err = s.Step([]byte("c=biws,r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,p=dHzbZapWIk4jUhN+Ute9ytag9zjfMHgsqmmiz7AndVQ="))
	if err != nil || !done {
		t.Fatalf("client-final: %v %v", done, err)
	}
	if want := "v=6rriTRBi23WpRR/wtup+mMhUZUn/dB5nLTJRsjl95G4="; string(out) != want {
		t.Fatalf("server-final %q, want %q", out, want)
	}
	if s.User() != "user" {
		t.Fatalf("user %q", s.User())
	}
	// A wrong proof: the last byte of the client proof flipped.
	s = NewScramServer(SHA256, func(u string) (Credential, bool) { return cred, u == "user" }, "%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0")
	s.Step([]byte("n,,n=user,r=rOprNGfwEbeRWgbNEkqO"))
	if _, _, err := s.Step([]byte("c=biws,r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,p=dHzbZapWIk4jUhN+Ute9ytag9zjfMHgsqmmiz7AndWQ=")); !errors.Is(err, ErrAuthentication) {
		t.Fatalf("a wrong proof: %v", err)
	}
}

// run drives a server with one of franz-go's client mechanisms, an
// implementation of the RFCs that is not ours.
func run(t *testing.T, m sasl.Mechanism, s Server) error {
	t.Helper()
	sess, msg, err := m.Authenticate(context.Background(), "127.0.0.1:9092")
	if err != nil {
		t.Fatal(err)
	}
	for {
		out, done, err := s.Step(msg)
		if err != nil {
			return err
		}
		cdone, next, cerr := sess.Challenge(out)
		if cerr != nil {
			return cerr
		}
		if done {
			if !cdone {
				t.Fatal("the server finished before the client")
			}
			return nil
		}
		msg = next
	}
}

func TestScramWithFranzGoClient(t *testing.T) {
	for _, m := range []ScramMechanism{SHA256, SHA512} {
		t.Run(m.String(), func(t *testing.T) {
			salt := []byte("0123456789abcdef")
			salted, err := SaltPassword(m, "s3cr3t,=pw", salt, ScramIterationsMin)
			if err != nil {
				t.Fatal(err)
			}
			cred := NewCredential(m, salted, salt, ScramIterationsMin)
			lookup := func(u string) (Credential, bool) { return cred, u == "ali,ce=" }
			auth := scram.Auth{User: "ali,ce=", Pass: "s3cr3t,=pw"}
			mech := auth.AsSha256Mechanism()
			if m == SHA512 {
				mech = auth.AsSha512Mechanism()
			}
			s := NewScramServer(m, lookup, "servernonce")
			if err := run(t, mech, s); err != nil {
				t.Fatalf("the right password: %v", err)
			}
			if s.User() != "ali,ce=" {
				t.Fatalf("user %q", s.User())
			}
			auth.Pass = "wrong"
			mech = auth.AsSha256Mechanism()
			if m == SHA512 {
				mech = auth.AsSha512Mechanism()
			}
			if err := run(t, mech, NewScramServer(m, lookup, "servernonce")); !errors.Is(err, ErrAuthentication) {
				t.Fatalf("a wrong password: %v", err)
			}
			auth = scram.Auth{User: "bob", Pass: "s3cr3t,=pw"}
			if err := run(t, auth.AsSha256Mechanism(), NewScramServer(m, lookup, "servernonce")); !errors.Is(err, ErrAuthentication) {
				t.Fatalf("an unknown user: %v", err)
			}
		})
	}
}

func TestPlain(t *testing.T) {
	users := PlainUsers{"alice": "alice-secret"}
	s := NewPlainServer(users)
	if err := run(t, plain.Auth{User: "alice", Pass: "alice-secret"}.AsMechanism(), s); err != nil || s.User() != "alice" {
		t.Fatalf("the right password: %v, user %q", err, s.User())
	}
	for _, msg := range []string{"\x00alice\x00wrong", "\x00bob\x00alice-secret", "bob\x00alice\x00alice-secret"} {
		if _, _, err := NewPlainServer(users).Step([]byte(msg)); !errors.Is(err, ErrAuthentication) {
			t.Fatalf("%q: %v", msg, err)
		}
	}
	for _, msg := range []string{"", "alice", "\x00alice", "\x00\x00", "\x00alice\x00pw\x00"} {
		if _, _, err := NewPlainServer(users).Step([]byte(msg)); !errors.Is(err, ErrProtocol) {
			t.Fatalf("%q: %v", msg, err)
		}
	}
}

func TestScramMalformed(t *testing.T) {
	cred := NewCredential(SHA256, make([]byte, 32), []byte("salt"), 4096)
	lookup := func(string) (Credential, bool) { return cred, true }
	for _, msg := range []string{"", "n", "n,,", "p=tls-unique,,n=u,r=x", "x,,n=u,r=x", "n,,r=x,n=u", "n,,n=u=XY,r=x", "n,,n=,r=x", "n,,m=ext,n=u,r=x", "n,a=other,n=u,r=x"} {
		_, _, err := NewScramServer(SHA256, lookup, "s").Step([]byte(msg))
		if !errors.Is(err, ErrProtocol) && !errors.Is(err, ErrAuthentication) {
			t.Fatalf("client-first %q: %v", msg, err)
		}
	}
	s := NewScramServer(SHA256, lookup, "s")
	if _, _, err := s.Step([]byte("n,,n=u,r=c")); err != nil {
		t.Fatal(err)
	}
	if _, _, err := s.Step([]byte("c=biws,r=cs")); !errors.Is(err, ErrProtocol) {
		t.Fatalf("no proof: %v", err)
	}
	if _, _, err := s.Step([]byte("more")); !errors.Is(err, ErrProtocol) {
		t.Fatalf("a third message: %v", err)
	}
}

// FuzzScram: any two messages from a client never panic, and never
// authenticate without the password.
func FuzzScram(f *testing.F) {
	f.Add([]byte("n,,n=user,r=rOprNGfwEbeRWgbNEkqO"), []byte("c=biws,r=rOprNGfwEbeRWgbNEkqOsrv,p=dHzbZapWIk4jUhN+Ute9ytag9zjfMHgsqmmiz7AndVQ="))
	f.Add([]byte("y,a=user,n=user,r=x,tokenauth=true"), []byte("c=eSxhPXVzZXIs,r=xsrv,p="))
	f.Add([]byte("\x00user\x00pencil"), []byte{})
	salt := []byte("W22ZaJ0SNY7soEsUEjb6gQ==")
	salted, _ := SaltPassword(SHA256, "pencil", salt, 4096)
	cred := NewCredential(SHA256, salted, salt, 4096)
	f.Fuzz(func(t *testing.T, first, final []byte) {
		s := NewScramServer(SHA256, func(u string) (Credential, bool) { return cred, u == "user" }, "srv")
		if _, _, err := s.Step(first); err != nil {
			return
		}
		if _, done, err := s.Step(final); err == nil || done {
			t.Fatalf("authenticated without the password: %q %q", first, final)
		}
		p := NewPlainServer(PlainUsers{"user": "pencil"})
		if _, done, _ := p.Step(first); done && string(first) != "\x00user\x00pencil" && string(first) != "user\x00user\x00pencil" {
			t.Fatalf("PLAIN authenticated %q", first)
		}
	})
}

// TestScramLibrdkafkaNonce: librdkafka's client-final names its client
// nonce and then the whole of server-first's nonce (its own twice); Kafka
// accepts a final nonce that ends with the server's, and so does this
// server, the proof being computed over the nonce as sent.
func TestScramLibrdkafkaNonce(t *testing.T) {
	salt := []byte("salt")
	salted, _ := SaltPassword(SHA512, "pw", salt, 4096)
	cred := NewCredential(SHA512, salted, salt, 4096)
	s := NewScramServer(SHA512, func(string) (Credential, bool) { return cred, true }, "SRV")
	first, _, err := s.Step([]byte("n,,n=u,r=CLI"))
	if err != nil {
		t.Fatal(err)
	}
	withoutProof := "c=biws,r=CLI" + "CLISRV"
	auth := []byte("n=u,r=CLI," + string(first) + "," + withoutProof)
	clientKey := mac(SHA512, salted, []byte("Client Key"))
	sig := mac(SHA512, cred.StoredKey, auth)
	proof := make([]byte, len(clientKey))
	for i := range proof {
		proof[i] = clientKey[i] ^ sig[i]
	}
	if _, done, err := s.Step([]byte(withoutProof + ",p=" + base64.StdEncoding.EncodeToString(proof))); err != nil || !done {
		t.Fatalf("librdkafka's nonce: %v", err)
	}
}
