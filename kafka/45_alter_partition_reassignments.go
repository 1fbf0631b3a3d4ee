package kafka

import (
	"context"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"ringlog/internal/acl"
	"ringlog/replication/controller"
)

// AlterPartitionReassignments, v0 and v1 (KIP-455; v1's
// allowReplicationFactorChange is KIP-860): start, replace or cancel (null
// replicas) the move of partitions to new replica lists, through the
// controller in one entry (replication/controller/reassign.go). Each
// partition is answered on its own, as Kafka's controller answers:
// UNKNOWN_TOPIC_OR_PARTITION, INVALID_REPLICA_ASSIGNMENT (an empty list, a
// broker twice or not registered, a cancellation needing an unclean
// election), INVALID_REPLICATION_FACTOR (v1 with
// allowReplicationFactorChange false and another size),
// NO_REASSIGNMENT_IN_PROGRESS (a cancellation of a partition not moving).
// A failure of the whole request (no ALTER on the cluster with an
// authorizer, no controller, a timeout) is answered request-wide and on
// every partition, as Kafka's error response is. The answer comes once this broker applied the
// change, so that a ListPartitionReassignments sent here next sees it.
// The move itself goes on in the background: new replicas catch up as
// followers, and the controller completes it when they are all in sync.
func init() {
	register(api{key: kmsg.AlterPartitionAssignments, min: 0, max: 1, sync: handleAlterPartitionReassignments})
}

func handleAlterPartitionReassignments(s *Server, cx *reqCtx, kreq kmsg.Request) kmsg.Response {
	req := kreq.(*kmsg.AlterPartitionAssignmentsRequest)
	resp := req.ResponseKind().(*kmsg.AlterPartitionAssignmentsResponse)
	if !s.authorizeCluster(cx, acl.OpAlter) {
		return alterReassignmentsRefused(req, resp, refuse(kerr.ClusterAuthorizationFailed, "%s", kerr.ClusterAuthorizationFailed.Message))
	}
	allowRF := true
	if req.Version >= 1 {
		allowRF = req.AllowReplicationFactorChange
		resp.AllowReplicationFactorChange = allowRF
	}
	var rs []controller.Reassignment
	for _, t := range req.Topics {
		for _, p := range t.Partitions {
			rs = append(rs, controller.Reassignment{Topic: t.Topic, Partition: p.Partition, Replicas: p.Replicas, Cancel: p.Replicas == nil})
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), adminTimeout)
	defer cancel()
	errs, err := s.cfg.Node.Controller().AlterPartitionReassignments(ctx, rs, allowRF)
	if err == nil {
		err = s.waitApplied(ctx)
	}
	if err != nil {
		return alterReassignmentsRefused(req, resp, err)
	}
	i := 0
	for _, t := range req.Topics {
		rt := kmsg.NewAlterPartitionAssignmentsResponseTopic()
		rt.Topic = t.Topic
		for _, p := range t.Partitions {
			rp := kmsg.NewAlterPartitionAssignmentsResponseTopicPartition()
			rp.Partition = p.Partition
			if e := errs[i]; e != nil {
				rp.ErrorCode, rp.ErrorMessage = adminCode(e), errorMessage(e)
			}
			i++
			rt.Partitions = append(rt.Partitions, rp)
		}
		resp.Topics = append(resp.Topics, rt)
	}
	return resp
}

// alterReassignmentsRefused answers a request refused as a whole (not
// authorized, no controller, a timeout) as Kafka's getErrorResponse does:
// the error request-wide and on every partition.
func alterReassignmentsRefused(req *kmsg.AlterPartitionAssignmentsRequest, resp *kmsg.AlterPartitionAssignmentsResponse, err error) kmsg.Response {
	resp.ErrorCode, resp.ErrorMessage = adminCode(err), errorMessage(err)
	resp.AllowReplicationFactorChange = true
	for _, t := range req.Topics {
		rt := kmsg.NewAlterPartitionAssignmentsResponseTopic()
		rt.Topic = t.Topic
		for _, p := range t.Partitions {
			rp := kmsg.NewAlterPartitionAssignmentsResponseTopicPartition()
			rp.Partition, rp.ErrorCode, rp.ErrorMessage = p.Partition, resp.ErrorCode, resp.ErrorMessage
			rt.Partitions = append(rt.Partitions, rp)
		}
		resp.Topics = append(resp.Topics, rt)
	}
	return resp
}
