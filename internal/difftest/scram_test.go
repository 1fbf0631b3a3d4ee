package difftest

import (
	"time"

	"testing"

	"github.com/twmb/franz-go/pkg/kmsg"
)

func scramUpsert(user string, mech int8, iterations int32) *kmsg.AlterUserSCRAMCredentialsRequest {
	req := kmsg.NewPtrAlterUserSCRAMCredentialsRequest()
	u := kmsg.NewAlterUserSCRAMCredentialsRequestUpsertion()
	u.Name, u.Mechanism, u.Iterations = user, mech, iterations
	u.Salt, u.SaltedPassword = []byte("0123456789abcdef"), make([]byte, 32+32*int(max(mech-1, 0)))
	req.Upsertions = append(req.Upsertions, u)
	return req
}

func scramDelete(user string, mech int8) *kmsg.AlterUserSCRAMCredentialsRequest {
	req := kmsg.NewPtrAlterUserSCRAMCredentialsRequest()
	d := kmsg.NewAlterUserSCRAMCredentialsRequestDeletion()
	d.Name, d.Mechanism = user, mech
	req.Deletions = append(req.Deletions, d)
	return req
}

func scramDescribe(users ...string) *kmsg.DescribeUserSCRAMCredentialsRequest {
	req := kmsg.NewPtrDescribeUserSCRAMCredentialsRequest()
	for _, u := range users {
		du := kmsg.NewDescribeUserSCRAMCredentialsRequestUser()
		du.Name = u
		req.Users = append(req.Users, du)
	}
	return req
}

// scramSettled waits (at most 2 s) until a credential change shows in
// DescribeUserScramCredentials: Kafka's broker applies its controller's
// records a moment after the controller answers.
func (s *side) scramSettled(user string, present bool) {
	for deadline := time.Now().Add(2 * time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		r := s.quiet(scramDescribe(user)).(*kmsg.DescribeUserSCRAMCredentialsResponse)
		if len(r.Results) == 1 && (r.Results[0].ErrorCode == 0) == present {
			return
		}
	}
}

// TestScramCredentials: AlterUserScramCredentials and
// DescribeUserScramCredentials (KIP-554) with valid and invalid
// arguments, one user per request (Kafka answers a request's users in
// the order of a hash map); SaslHandshake and SaslAuthenticate on a
// PLAINTEXT listener.
func TestScramCredentials(t *testing.T) {
	run(t, func(s *side) {
		u1, u2 := name(s.t, "u1"), name(s.t, "u2")
		s.do("describe an unknown user", scramDescribe(u1))
		s.do("upsert SCRAM-SHA-256", scramUpsert(u1, 1, 4096))
		s.scramSettled(u1, true)
		s.do("describe it", scramDescribe(u1))
		s.do("upsert SCRAM-SHA-512 of another", scramUpsert(u2, 2, 16384))
		s.scramSettled(u2, true)
		s.do("describe the other", scramDescribe(u2))
		s.do("describe one twice", scramDescribe(u1, u1))
		s.do("empty user name", scramUpsert("", 1, 4096))
		s.do("too few iterations", scramUpsert(u1, 1, 4095))
		s.do("too many iterations", scramUpsert(u1, 1, 16385))
		s.do("unknown mechanism", scramUpsert(u1, 3, 4096))
		s.do("one user twice", func() kmsg.Request {
			r := scramUpsert(u1, 1, 4096)
			r.Upsertions = append(r.Upsertions, scramUpsert(u1, 2, 4096).Upsertions...)
			return r
		}())
		s.do("upsert and delete of one user", func() kmsg.Request {
			r := scramUpsert(u1, 1, 4096)
			r.Deletions = scramDelete(u1, 1).Deletions
			return r
		}())
		s.do("delete what does not exist", scramDelete(u1, 2))
		s.do("delete", scramDelete(u1, 1))
		s.scramSettled(u1, false)
		s.do("describe after the delete", scramDescribe(u1))
		s.do("delete of unknown mechanism", scramDelete(u2, 0))

		hs := kmsg.NewPtrSASLHandshakeRequest()
		hs.Version, hs.Mechanism = 1, "PLAIN"
		s.do("SaslHandshake on PLAINTEXT", hs)
		auth := kmsg.NewPtrSASLAuthenticateRequest()
		auth.Version, auth.SASLAuthBytes = 2, []byte("\x00u\x00p")
		s.do("SaslAuthenticate on PLAINTEXT", auth)
	})
}
