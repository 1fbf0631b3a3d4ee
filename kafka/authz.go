package kafka

import (
	"net"

	"ringlog/internal/acl"
)

// Authorization (issue 15): with an authorizer configured
// (authorizer.class.name), every API checks the operation on the resource
// Kafka's checks (KafkaApis and AuthHelper), with the connection's
// principal and the client's IP address; without one every request is
// allowed, as in Kafka. Decisions go through the connection's cache,
// which lasts while the metadata image's ACL set is the same one.

// authorize reports whether the request's principal may do op on the
// resource. It allocates nothing when the answer is cached.
func (s *Server) authorize(cx *reqCtx, op acl.Operation, rt acl.ResourceType, name string) bool {
	a := s.cfg.Authorizer
	if a == nil {
		return true
	}
	ss := cx.session
	if ss == nil {
		return false
	}
	return ss.acls.Authorize(a, ss.Principal(), ss.host(), op, rt, name)
}

// authorizeCluster is authorize on the cluster resource.
func (s *Server) authorizeCluster(cx *reqCtx, op acl.Operation) bool {
	return s.authorize(cx, op, acl.ResourceCluster, acl.ClusterName)
}

// authorizedOperations is KIP-430's bit field for the resource, or
// Kafka's "not requested" value when the client did not ask.
func (s *Server) authorizedOperations(cx *reqCtx, asked bool, rt acl.ResourceType, name string) int32 {
	const notRequested = -2147483648
	if !asked {
		return notRequested
	}
	a := s.cfg.Authorizer
	if a == nil {
		// No authorizer: every operation of the type is allowed.
		var bits int32
		for _, op := range acl.Operations(rt) {
			bits |= 1 << op
		}
		return bits
	}
	ss := cx.session
	if ss == nil {
		return 0
	}
	return a.AuthorizedOperations(ss.Principal(), ss.host(), rt, name)
}

// host is the client's IP address as ACLs name hosts.
func (ss *session) host() string {
	if h := ss.hostIP.Load(); h != nil {
		return *h
	}
	h := ""
	switch a := ss.c.RemoteAddr().(type) {
	case *net.TCPAddr:
		h = a.IP.String()
	case nil:
	default:
		if host, _, err := net.SplitHostPort(a.String()); err == nil {
			h = host
		}
	}
	ss.hostIP.Store(&h)
	return h
}
