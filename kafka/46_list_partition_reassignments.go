package kafka

import (
	"slices"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"ringlog/internal/acl"
	"ringlog/replication/controller"
)

// ListPartitionReassignments, v0 (KIP-455): the partitions whose
// reassignment is in progress, every one (null topics) or among those
// named, with their full replica list (target first, then the replicas
// leaving) and the adding and removing replicas, from the image this
// broker applied. As in Kafka, named topics and partitions that do not
// exist or are not moving are left out, without an error. With an
// authorizer it needs DESCRIBE on the cluster.
func init() {
	register(api{key: kmsg.ListPartitionReassignments, min: 0, max: 0, sync: handleListPartitionReassignments})
}

func handleListPartitionReassignments(s *Server, cx *reqCtx, kreq kmsg.Request) kmsg.Response {
	req := kreq.(*kmsg.ListPartitionReassignmentsRequest)
	resp := req.ResponseKind().(*kmsg.ListPartitionReassignmentsResponse)
	if !s.authorizeCluster(cx, acl.OpDescribe) {
		resp.ErrorCode = kerr.ClusterAuthorizationFailed.Code
		return resp
	}
	img := s.cfg.Node.Image()
	add := func(t *controller.Topic, parts []int32) {
		rt := kmsg.NewListPartitionReassignmentsResponseTopic()
		rt.Topic = t.Name
		for _, i := range parts {
			if i < 0 || int(i) >= len(t.Partitions) || !t.Partitions[i].Reassigning() {
				continue
			}
			p := &t.Partitions[i]
			rp := kmsg.NewListPartitionReassignmentsResponseTopicPartition()
			rp.Partition = i
			rp.Replicas = slices.Clone(p.Replicas)
			rp.AddingReplicas = append([]int32{}, p.AddingReplicas...)
			rp.RemovingReplicas = append([]int32{}, p.RemovingReplicas...)
			rt.Partitions = append(rt.Partitions, rp)
		}
		if len(rt.Partitions) > 0 {
			resp.Topics = append(resp.Topics, rt)
		}
	}
	if req.Topics == nil {
		for _, name := range img.TopicNames() {
			t := img.Topic(name)
			all := make([]int32, len(t.Partitions))
			for i := range all {
				all[i] = int32(i)
			}
			add(t, all)
		}
		return resp
	}
	for _, rt := range req.Topics {
		if t := img.Topic(rt.Topic); t != nil {
			add(t, rt.Partitions)
		}
	}
	return resp
}
