package kafka

import (
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"ringlog/internal/acl"
)

// DescribeUserScramCredentials, v0 (KIP-554): the mechanisms and iteration
// counts of users' SCRAM credentials, from this broker's image of the
// quorum, as Kafka answers from its metadata cache. Salts and keys are
// never described.
func init() {
	register(api{key: kmsg.DescribeUserSCRAMCredentials, min: 0, max: 0, sync: handleDescribeUserScramCredentials})
}

func handleDescribeUserScramCredentials(s *Server, cx *reqCtx, kreq kmsg.Request) kmsg.Response {
	req := kreq.(*kmsg.DescribeUserSCRAMCredentialsRequest)
	resp := req.ResponseKind().(*kmsg.DescribeUserSCRAMCredentialsResponse)
	if !s.authorizeCluster(cx, acl.OpDescribe) {
		// With an authorizer, DESCRIBE on the cluster: the code at the
		// top and on a result per user named (without its name), as
		// Kafka's error answer.
		msg := kerr.ClusterAuthorizationFailed.Message
		resp.ErrorCode, resp.ErrorMessage = kerr.ClusterAuthorizationFailed.Code, &msg
		for range req.Users {
			r := kmsg.NewDescribeUserSCRAMCredentialsResponseResult()
			r.ErrorCode, r.ErrorMessage = kerr.ClusterAuthorizationFailed.Code, &msg
			resp.Results = append(resp.Results, r)
		}
		return resp
	}
	byUser := map[string][]kmsg.DescribeUserSCRAMCredentialsResponseResultCredentialInfo{}
	var order []string
	for _, c := range s.cfg.Node.Image().ScramCredentials() {
		if _, ok := byUser[c.User]; !ok {
			order = append(order, c.User)
		}
		info := kmsg.NewDescribeUserSCRAMCredentialsResponseResultCredentialInfo()
		info.Mechanism, info.Iterations = c.Mechanism, c.Credential.Iterations
		byUser[c.User] = append(byUser[c.User], info)
	}
	result := func(user string, code int16, msg string) {
		r := kmsg.NewDescribeUserSCRAMCredentialsResponseResult()
		r.User, r.ErrorCode = user, code
		if code == 0 {
			r.CredentialInfos = byUser[user]
		}
		if msg != "" {
			r.ErrorMessage = new(msg)
		}
		resp.Results = append(resp.Results, r)
	}
	if len(req.Users) == 0 {
		// A null or empty list describes every user.
		for _, u := range order {
			result(u, 0, "")
		}
		return resp
	}
	dups := duplicates(req.Users, func(u *kmsg.DescribeUserSCRAMCredentialsRequestUser) string { return u.Name })
	done := map[string]bool{}
	for _, u := range req.Users {
		switch {
		case done[u.Name]:
		case dups[u.Name]:
			result(u.Name, kerr.DuplicateResource.Code, "Cannot describe SCRAM credentials for the same user twice in a single request")
		case byUser[u.Name] == nil:
			result(u.Name, kerr.ResourceNotFound.Code, "Attempt to describe a user credential that does not exist")
		default:
			result(u.Name, 0, "")
		}
		done[u.Name] = true
	}
	return resp
}
