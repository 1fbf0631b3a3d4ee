package kafka

import (
	"net"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"ringlog/internal/acl"
	"ringlog/replication/controller"
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

// clusterAuthorizedOperations is KIP-430's field for the cluster as
// Metadata and DescribeCluster report it: Kafka tells the cluster's
// operations only to a principal that may DESCRIBE it, 0 to others.
func (s *Server) clusterAuthorizedOperations(cx *reqCtx, asked bool) int32 {
	if asked && !s.authorizeCluster(cx, acl.OpDescribe) {
		return 0
	}
	return s.authorizedOperations(cx, asked, acl.ResourceCluster, acl.ClusterName)
}

// topicNameOf is the name ACLs check a topic by: the name, or for a
// request that names it by id (KIP-516), the name the image has for the
// id ("" for an id it does not know: the handler answers that as it
// would without an authorizer).
func (s *Server) topicNameOf(name string, id [16]byte) string {
	if name != "" || id == ([16]byte{}) {
		return name
	}
	if t := s.cfg.Node.Image().TopicByID(controller.TopicID(id)); t != nil {
		return t.Name
	}
	return ""
}

// authorizeTopic is authorize on a topic named by name or id; a topic
// whose id names none is left to the handler (its answer does not tell
// whether the topic exists).
func (s *Server) authorizeTopic(cx *reqCtx, op acl.Operation, name string, id [16]byte) bool {
	if s.cfg.Authorizer == nil {
		return true
	}
	if name == "" && id != ([16]byte{}) {
		if name = s.topicNameOf(name, id); name == "" {
			return true
		}
	}
	return s.authorize(cx, op, acl.ResourceTopic, name)
}

// authorizeByResourceType reports whether the principal may do op on
// some resource of the type (KIP-679's test for an idempotent producer:
// WRITE on any topic).
func (s *Server) authorizeByResourceType(cx *reqCtx, op acl.Operation, rt acl.ResourceType) bool {
	a := s.cfg.Authorizer
	if a == nil {
		return true
	}
	ss := cx.session
	if ss == nil {
		return false
	}
	return a.AuthorizeByResourceType(ss.Principal(), ss.host(), op, rt)
}

// configsRefused is the code for a config resource the principal may not
// do op (DESCRIBE_CONFIGS or ALTER_CONFIGS) on, or 0: broker resources
// are checked on the cluster, topics and groups on themselves, as Kafka's
// ConfigHelper and ControllerApis do. Another type is the handler's to
// refuse.
func (s *Server) configsRefused(cx *reqCtx, op acl.Operation, rt kmsg.ConfigResourceType, name string) int16 {
	if s.cfg.Authorizer == nil {
		return 0
	}
	switch rt {
	case kmsg.ConfigResourceTypeBroker, kmsg.ConfigResourceTypeBrokerLogger, kmsg.ConfigResourceTypeClientMetrics:
		if !s.authorizeCluster(cx, op) {
			return kerr.ClusterAuthorizationFailed.Code
		}
	case kmsg.ConfigResourceTypeTopic:
		if !s.authorize(cx, op, acl.ResourceTopic, name) {
			return kerr.TopicAuthorizationFailed.Code
		}
	case kmsg.ConfigResourceTypeGroupConfig:
		if !s.authorize(cx, op, acl.ResourceGroup, name) {
			return kerr.GroupAuthorizationFailed.Code
		}
	}
	return 0
}

// errorMessageOf is the message Kafka's errors carry by default.
func errorMessageOf(code int16) *string {
	if e, ok := kerr.ErrorForCode(code).(*kerr.Error); ok {
		return kmsg.StringPtr(e.Message)
	}
	return nil
}

// splitAuthorized parts names of resources of type rt into those the
// request's principal may do op on and those it may not, each in the
// request's order.
func (s *Server) splitAuthorized(cx *reqCtx, op acl.Operation, rt acl.ResourceType, names []string) (allowed, refused []string) {
	for _, n := range names {
		if s.authorize(cx, op, rt, n) {
			allowed = append(allowed, n)
		} else {
			refused = append(refused, n)
		}
	}
	return allowed, refused
}
