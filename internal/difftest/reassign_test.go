package difftest

import (
	"testing"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// alterReassignmentsReq asks for topic's partition p to move to replicas
// (nil: a cancellation), at version; allowRF is v1's
// allowReplicationFactorChange.
func alterReassignmentsReq(version int16, allowRF bool, topic string, p int32, replicas []int32) *kmsg.AlterPartitionAssignmentsRequest {
	req := kmsg.NewPtrAlterPartitionAssignmentsRequest()
	req.SetVersion(version)
	req.TimeoutMillis, req.AllowReplicationFactorChange = 10_000, allowRF
	rt := kmsg.NewAlterPartitionAssignmentsRequestTopic()
	rt.Topic = topic
	rp := kmsg.NewAlterPartitionAssignmentsRequestTopicPartition()
	rp.Partition, rp.Replicas = p, replicas
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	return req
}

// listReassignmentsReq lists the reassignments in progress of topic's
// partitions, or of every partition when topic is empty (null topics).
func listReassignmentsReq(topic string, partitions ...int32) *kmsg.ListPartitionReassignmentsRequest {
	req := kmsg.NewPtrListPartitionReassignmentsRequest()
	req.TimeoutMillis = 10_000
	if topic != "" {
		rt := kmsg.NewListPartitionReassignmentsRequestTopic()
		rt.Topic, rt.Partitions = topic, partitions
		req.Topics = append(req.Topics, rt)
	}
	return req
}

// TestPartitionReassignments (KIP-455, KIP-860) on one broker, node 1:
// the refusals of AlterPartitionReassignments (an unknown topic or
// partition, an empty replica list, a broker twice, a broker that is not
// registered, a cancellation with nothing in progress, a change of
// replication factor that v1 forbids), a reassignment to the replicas the
// partition has (nothing to do), and ListPartitionReassignments with
// nothing in progress, for every partition and for named ones.
func TestPartitionReassignments(t *testing.T) {
	run(t, func(s *side) {
		topic := name(s.t, "")
		s.createTopic(topic, 2, nil)
		for _, v := range []int16{0, 1} {
			s.do("a topic that does not exist", alterReassignmentsReq(v, true, name(s.t, "missing"), 0, []int32{1}))
			s.do("a partition that does not exist", alterReassignmentsReq(v, true, topic, 7, []int32{1}))
			s.do("an empty replica list", alterReassignmentsReq(v, true, topic, 0, []int32{}))
			s.do("a broker twice", alterReassignmentsReq(v, true, topic, 0, []int32{1, 1}))
			s.do("a broker not registered", alterReassignmentsReq(v, true, topic, 0, []int32{1, 9}))
			s.do("a cancellation with nothing in progress", alterReassignmentsReq(v, true, topic, 1, nil))
			s.do("the replicas it has", alterReassignmentsReq(v, true, topic, 1, []int32{1}))
		}
		s.do("v1: another replication factor, not allowed", alterReassignmentsReq(1, false, topic, 0, []int32{1, 9}))
		s.do("v1: the same replication factor, not allowed to change", alterReassignmentsReq(1, false, topic, 0, []int32{1}))
		s.do("list every partition, none moving", listReassignmentsReq(""))
		s.do("list named partitions, none moving", listReassignmentsReq(topic, 0, 1, 5))
		s.do("list a topic that does not exist", listReassignmentsReq(name(s.t, "missing"), 0))
	})
}
