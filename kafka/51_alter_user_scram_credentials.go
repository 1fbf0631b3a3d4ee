package kafka

import (
	"context"
	"slices"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"ringlog/internal/acl"
	"ringlog/internal/sasl"
	"ringlog/replication/controller"
)

// AlterUserScramCredentials, v0 (KIP-554): upserts carry a salt and the
// salted password (the client ran PBKDF2); the broker derives StoredKey
// and ServerKey and the quorum stores them, never the salted password.
// Checks and messages are Kafka's (its controller's ScramControlManager):
// a user named twice in one request is DUPLICATE_RESOURCE, an empty name
// or an iteration count outside [4096, 16384] UNACCEPTABLE_CREDENTIAL, an
// unknown mechanism UNSUPPORTED_SASL_MECHANISM, the deletion of a missing
// credential RESOURCE_NOT_FOUND. Every valid change is applied in one
// entry; each user gets its own result.
func init() {
	register(api{key: kmsg.AlterUserSCRAMCredentials, min: 0, max: 0, sync: handleAlterUserScramCredentials})
}

// maxScramSaltBytes bounds an upsertion's salt, as the quorum does.
const maxScramSaltBytes = 1024

func handleAlterUserScramCredentials(s *Server, cx *reqCtx, kreq kmsg.Request) kmsg.Response {
	req := kreq.(*kmsg.AlterUserSCRAMCredentialsRequest)
	resp := req.ResponseKind().(*kmsg.AlterUserSCRAMCredentialsResponse)
	if !s.authorizeCluster(cx, acl.OpAlter) {
		// With an authorizer, ALTER on the cluster: every user named,
		// once each and sorted, gets the code, as Kafka's error answer.
		var users []string
		for _, d := range req.Deletions {
			users = append(users, d.Name)
		}
		for _, u := range req.Upsertions {
			users = append(users, u.Name)
		}
		slices.Sort(users)
		msg := kerr.ClusterAuthorizationFailed.Message
		for _, u := range slices.Compact(users) {
			r := kmsg.NewAlterUserSCRAMCredentialsResponseResult()
			r.User, r.ErrorCode, r.ErrorMessage = u, kerr.ClusterAuthorizationFailed.Code, &msg
			resp.Results = append(resp.Results, r)
		}
		return resp
	}
	img := s.cfg.Node.Image()
	failed := map[string]error{}
	changed := map[string]controller.ScramChange{}
	var order []string // users in request order, each once
	note := func(user string) bool {
		if _, seen := failed[user]; seen {
			return false
		}
		if _, seen := changed[user]; seen {
			delete(changed, user)
			failed[user] = refuse(kerr.DuplicateResource, "A user credential cannot be altered twice in the same request")
			return false
		}
		order = append(order, user)
		return true
	}
	for _, d := range req.Deletions {
		if !note(d.Name) {
			continue
		}
		if err := checkScramUser(d.Name, d.Mechanism); err != nil {
			failed[d.Name] = err
			continue
		}
		if _, ok := img.ScramCredential(d.Name, d.Mechanism); !ok {
			failed[d.Name] = refuse(kerr.ResourceNotFound, "Attempt to delete a user credential that does not exist")
			continue
		}
		changed[d.Name] = controller.ScramChange{ScramKey: controller.ScramKey{User: d.Name, Mechanism: d.Mechanism}, Delete: true}
	}
	for _, u := range req.Upsertions {
		if !note(u.Name) {
			continue
		}
		if err := checkScramUpsertion(&u); err != nil {
			failed[u.Name] = err
			continue
		}
		m := sasl.ScramMechanism(u.Mechanism)
		c := sasl.NewCredential(m, u.SaltedPassword, u.Salt, u.Iterations)
		changed[u.Name] = controller.ScramChange{ScramKey: controller.ScramKey{User: u.Name, Mechanism: u.Mechanism},
			Credential: controller.ScramCredential{Salt: c.Salt, StoredKey: c.StoredKey, ServerKey: c.ServerKey, Iterations: c.Iterations}}
	}
	var applyErr error
	if len(changed) > 0 {
		changes := make([]controller.ScramChange, 0, len(changed))
		for _, u := range order {
			if ch, ok := changed[u]; ok {
				changes = append(changes, ch)
			}
		}
		ctx, cancel := context.WithTimeout(context.Background(), adminTimeout)
		applyErr = s.cfg.Node.Controller().AlterScramCredentials(ctx, changes)
		if applyErr == nil {
			// Answered once this broker applied it, as the other admin
			// changes are: a describe that follows on this broker
			// shows it (read-your-writes).
			applyErr = s.waitApplied(ctx)
		}
		cancel()
	}
	for _, u := range order {
		r := kmsg.NewAlterUserSCRAMCredentialsResponseResult()
		r.User = u
		err := failed[u]
		if err == nil {
			err = applyErr
		}
		r.ErrorCode, r.ErrorMessage = adminCode(err), errorMessage(err)
		resp.Results = append(resp.Results, r)
	}
	return resp
}

func checkScramUser(name string, mechanism int8) error {
	if name == "" {
		return refuse(kerr.UnacceptableCredential, "Username must not be empty")
	}
	if m := sasl.ScramMechanism(mechanism); m != sasl.SHA256 && m != sasl.SHA512 {
		return refuse(kerr.UnsupportedSaslMechanism, "Unknown SCRAM mechanism")
	}
	return nil
}

func checkScramUpsertion(u *kmsg.AlterUserSCRAMCredentialsRequestUpsertion) error {
	if err := checkScramUser(u.Name, u.Mechanism); err != nil {
		return err
	}
	switch {
	case u.Iterations < sasl.ScramIterationsMin:
		return refuse(kerr.UnacceptableCredential, "Too few iterations")
	case u.Iterations > sasl.ScramIterationsMax:
		return refuse(kerr.UnacceptableCredential, "Too many iterations")
	case len(u.Salt) == 0 || len(u.Salt) > maxScramSaltBytes:
		return refuse(kerr.UnacceptableCredential, "Salt must be 1 to %d bytes", maxScramSaltBytes)
	case len(u.SaltedPassword) == 0:
		return refuse(kerr.UnacceptableCredential, "Salted password must not be empty")
	}
	return nil
}
