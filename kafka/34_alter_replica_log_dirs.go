package kafka

import (
	"cmp"
	"errors"
	"slices"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"ringlog/engine"
	"ringlog/internal/acl"
)

// AlterReplicaLogDirs v0-v2 (KIP-113): move this broker's replicas to other
// log directories of its own, while they serve (engine.AlterReplicaLogDir;
// the move runs in the background and DescribeLogDirs shows its future
// log). v2 is flexible. The codes are Kafka's ReplicaManager's, in its
// order: LOG_DIR_NOT_FOUND for a path that is not one of the broker's
// log.dirs (absolute paths, as DescribeLogDirs names them), then
// KAFKA_STORAGE_ERROR for an offline destination, UNKNOWN_TOPIC_OR_PARTITION
// for a partition the cluster does not have, REPLICA_NOT_AVAILABLE for one
// it has but that has no replica here, KAFKA_STORAGE_ERROR for an offline
// replica or while any directory is offline (no future log is created
// then, as in Kafka). A partition named twice takes its last directory.
// With an authorizer, the request needs ALTER on the cluster (Kafka's
// check); without it every partition is CLUSTER_AUTHORIZATION_FAILED.
func init() {
	register(api{key: kmsg.AlterReplicaLogDirs, min: 0, max: 2, sync: handleAlterReplicaLogDirs})
}

func handleAlterReplicaLogDirs(s *Server, cx *reqCtx, kreq kmsg.Request) kmsg.Response {
	req := kreq.(*kmsg.AlterReplicaLogDirsRequest)
	resp := req.ResponseKind().(*kmsg.AlterReplicaLogDirsResponse)
	// Kafka answers each partition once, with its last directory.
	var order []engine.TP
	dirOf := map[engine.TP]string{}
	for _, d := range req.Dirs {
		for _, t := range d.Topics {
			for _, p := range t.Partitions {
				tp := engine.TP{Topic: t.Topic, Partition: p}
				if _, ok := dirOf[tp]; !ok {
					order = append(order, tp)
				}
				dirOf[tp] = d.Dir
			}
		}
	}
	slices.SortFunc(order, func(a, b engine.TP) int {
		return cmp.Or(cmp.Compare(a.Topic, b.Topic), cmp.Compare(a.Partition, b.Partition))
	})
	allowed := s.authorizeCluster(cx, acl.OpAlter)
	for _, tp := range order {
		code := kerr.ClusterAuthorizationFailed.Code
		if allowed {
			code = s.alterReplicaLogDir(tp, dirOf[tp])
		}
		if n := len(resp.Topics); n == 0 || resp.Topics[n-1].Topic != tp.Topic {
			t := kmsg.NewAlterReplicaLogDirsResponseTopic()
			t.Topic = tp.Topic
			resp.Topics = append(resp.Topics, t)
		}
		p := kmsg.NewAlterReplicaLogDirsResponseTopicPartition()
		p.Partition, p.ErrorCode = tp.Partition, code
		t := &resp.Topics[len(resp.Topics)-1]
		t.Partitions = append(t.Partitions, p)
	}
	return resp
}

func (s *Server) alterReplicaLogDir(tp engine.TP, dir string) int16 {
	err := s.eng.AlterReplicaLogDir(tp, dir)
	switch {
	case err == nil:
		return 0
	case errors.Is(err, engine.ErrLogDirNotFound):
		return kerr.LogDirNotFound.Code
	case errors.Is(err, engine.ErrUnknownTopicOrPartition):
		if n := s.cfg.Node; n != nil {
			if t := n.Image().Topic(tp.Topic); t != nil && tp.Partition >= 0 && int(tp.Partition) < len(t.Partitions) {
				return kerr.ReplicaNotAvailable.Code
			}
		}
		return kerr.UnknownTopicOrPartition.Code
	}
	return errorCode(err)
}
