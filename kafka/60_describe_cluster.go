package kafka

import (
	"strconv"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// DescribeCluster v0-v2 (KIP-700): the cluster id, the controller (the
// metadata quorum's leader) and the brokers, from the image this broker's
// node applied, as Metadata answers them. v1 adds the endpoint type
// (KIP-919), v2 fenced brokers (KIP-1073), which are left out as
// Metadata leaves them out.
func init() {
	register(api{key: kmsg.DescribeCluster, min: 0, max: 2, sync: handleDescribeCluster})
}

// Endpoint types of KIP-919.
const (
	endpointBrokers     int8 = 1
	endpointControllers int8 = 2
)

// clusterOperations is the bit set of ACL operations on the CLUSTER
// resource (Kafka's supported operations for it). Without an authorizer
// every one of them is allowed.
const clusterOperations = 1<<kmsg.ACLOperationCreate | 1<<kmsg.ACLOperationClusterAction |
	1<<kmsg.ACLOperationDescribeConfigs | 1<<kmsg.ACLOperationAlterConfigs |
	1<<kmsg.ACLOperationIdempotentWrite | 1<<kmsg.ACLOperationAlter | 1<<kmsg.ACLOperationDescribe

func handleDescribeCluster(s *Server, cx *reqCtx, kreq kmsg.Request) kmsg.Response {
	req := kreq.(*kmsg.DescribeClusterRequest)
	resp := req.ResponseKind().(*kmsg.DescribeClusterResponse)
	resp.EndpointType = endpointBrokers
	// v0 has no endpoint type: it always asks for brokers.
	if req.Version >= 1 && req.EndpointType != endpointBrokers {
		// KIP-919: a broker answers a request for controllers with
		// MISMATCHED_ENDPOINT_TYPE (the client should ask a controller
		// listener) and an unknown type with UNSUPPORTED_ENDPOINT_TYPE.
		if req.EndpointType == endpointControllers {
			resp.ErrorCode = kerr.MismatchedEndpointType.Code
			resp.ErrorMessage = kmsg.StringPtr("The request was sent to an endpoint of type BROKER, but we wanted an endpoint of type CONTROLLER")
		} else {
			resp.ErrorCode = kerr.UnsupportedEndpointType.Code
			resp.ErrorMessage = kmsg.StringPtr("Unsupported endpoint type " + strconv.Itoa(int(req.EndpointType)))
		}
		return resp
	}
	resp.ClusterID = s.eng.ClusterID()
	resp.ControllerID = s.controllerID()
	for _, mb := range liveBrokers(s.cfg.Node.Image(), cx.listener()) {
		b := kmsg.NewDescribeClusterResponseBroker()
		b.NodeID, b.Host, b.Port, b.Rack = mb.NodeID, mb.Host, mb.Port, mb.Rack
		resp.Brokers = append(resp.Brokers, b)
	}
	if req.IncludeClusterAuthorizedOperations {
		resp.ClusterAuthorizedOperations = clusterOperations
		if s.cfg.Authorizer != nil {
			// Kafka checks nothing else here: the operations are the
			// principal's, 0 without DESCRIBE on the cluster.
			resp.ClusterAuthorizedOperations = s.clusterAuthorizedOperations(cx, true)
		}
	}
	return resp
}

// controllerID is the controller id clients are told (Metadata,
// DescribeCluster): the quorum's leader when it is a live broker, as in a
// combined cluster; otherwise this broker, which forwards controller
// requests. The leader of a quorum of controller-only nodes has no Kafka
// listener a client could reach: Kafka's brokers then name a random live
// broker, ringlog's name themselves (the same for a client, and stable).
func (s *Server) controllerID() int32 {
	n := s.cfg.Node
	id := n.Controller().LeaderID()
	if b, ok := n.Image().Broker(id); id >= 0 && ok && !b.Fenced {
		return id
	}
	return s.cfg.NodeID
}
