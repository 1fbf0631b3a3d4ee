package kafka

import (
	"slices"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"ringlog/engine"
	"ringlog/internal/acl"
	"ringlog/replication/controller"
)

// DescribeTopicPartitions, v0 (KIP-966): the partitions of topics, with
// their leader, replicas, ISR and offline replicas, a page at a time. It
// is what Kafka 4's admin client (kafka-topics --describe) asks before
// falling back to Metadata, for clusters whose topics have more partitions
// than one response should carry.
//
// As Kafka's DescribeTopicPartitionsRequestHandler and metadata cache:
//   - the topics are the request's (each once), or every topic when it
//     names none, in name order, from the cursor's topic on (a cursor topic
//     the request does not name is INVALID_REQUEST);
//   - the cursor's topic starts at its partition, the others at 0;
//   - a response holds at most min(response_partition_limit,
//     max.request.partition.size.limit = 2000) partitions, and at least
//     one whatever the limit says: a topic cut
//     short sets next_cursor at its next partition, and a page that ends
//     with a topic left sets next_cursor at that topic's partition 0;
//   - a named topic that does not exist is UNKNOWN_TOPIC_OR_PARTITION (or
//     INVALID_TOPIC_EXCEPTION for an invalid name), a topic of the
//     listing of all that vanished meanwhile is left out;
//   - every topic answered reports the operations the principal may do on
//     it (KIP-430; all of them without an authorizer), even one that does
//     not exist;
//   - with an authorizer, a topic the principal may not DESCRIBE is left
//     out of a listing of all, and a named one is answered
//     TOPIC_AUTHORIZATION_FAILED after the others, without its id.
//
// ringlog has no eligible leader replicas (KIP-966's ELR): both ELR lists
// are empty, as Kafka's are for a partition whose ISR is whole.
func init() {
	register(api{key: kmsg.DescribeTopicPartitions, min: 0, max: 0, sync: handleDescribeTopicPartitions})
}

// describePartitionsMax is Kafka's max.request.partition.size.limit.
const describePartitionsMax = 2000

func handleDescribeTopicPartitions(s *Server, cx *reqCtx, kreq kmsg.Request) kmsg.Response {
	req := kreq.(*kmsg.DescribeTopicPartitionsRequest)
	resp := req.ResponseKind().(*kmsg.DescribeTopicPartitionsResponse)
	img := s.cfg.Node.Image()

	all := len(req.Topics) == 0
	var names []string
	if all {
		names = img.TopicNames()
	} else {
		for i := range req.Topics {
			names = append(names, req.Topics[i].Topic)
		}
	}
	slices.Sort(names)
	names = slices.Compact(names)
	cursorTopic, cursorPart := "", int32(0)
	if c := req.Cursor; c != nil {
		if !all && !slices.Contains(names, c.Topic) {
			// Kafka throws InvalidRequestException, answered as the
			// request's error response: every topic named, as named,
			// INVALID_REQUEST.
			for i := range req.Topics {
				rt := kmsg.NewDescribeTopicPartitionsResponseTopic()
				rt.Topic = kmsg.StringPtr(req.Topics[i].Topic)
				rt.ErrorCode = kerr.InvalidRequest.Code
				rt.Partitions = []kmsg.DescribeTopicPartitionsResponseTopicPartition{}
				resp.Topics = append(resp.Topics, rt)
			}
			return resp
		}
		cursorTopic, cursorPart = c.Topic, c.Partition
	}
	// With an authorizer, only the topics the principal may DESCRIBE are
	// described; one named that it may not is TOPIC_AUTHORIZATION_FAILED,
	// after the others and without its id, whether it exists or not.
	var refused []kmsg.DescribeTopicPartitionsResponseTopic
	if s.cfg.Authorizer != nil {
		kept := names[:0]
		for _, name := range names {
			if s.authorize(cx, acl.OpDescribe, acl.ResourceTopic, name) {
				kept = append(kept, name)
				continue
			}
			if !all {
				rt := kmsg.NewDescribeTopicPartitionsResponseTopic()
				rt.Topic = kmsg.StringPtr(name)
				rt.ErrorCode = kerr.TopicAuthorizationFailed.Code
				rt.Partitions = []kmsg.DescribeTopicPartitionsResponseTopicPartition{}
				refused = append(refused, rt)
			}
		}
		names = kept
		defer func() {
			for i := range resp.Topics {
				if t := &resp.Topics[i]; t.Topic != nil {
					t.AuthorizedOperations = s.authorizedOperations(cx, true, acl.ResourceTopic, *t.Topic)
				}
			}
			resp.Topics = append(resp.Topics, refused...)
		}()
	}
	// A limit below 1 gets one partition a page, as in Kafka.
	remaining := max(min(req.ResponsePartitionLimit, describePartitionsMax), 1)
	for _, name := range names {
		if name < cursorTopic {
			continue
		}
		if remaining <= 0 {
			// The page ends before this topic: the next one starts it.
			resp.NextCursor = &kmsg.DescribeTopicPartitionsResponseNextCursor{Topic: name}
			break
		}
		t := img.Topic(name)
		if t == nil {
			if all {
				continue
			}
			rt := kmsg.NewDescribeTopicPartitionsResponseTopic()
			rt.Topic = kmsg.StringPtr(name)
			rt.IsInternal = isInternalTopic(name)
			rt.AuthorizedOperations = topicOperationsAll
			rt.ErrorCode = kerr.UnknownTopicOrPartition.Code
			if engine.ValidateTopicName(name) != nil {
				rt.ErrorCode = kerr.InvalidTopicException.Code
			}
			resp.Topics = append(resp.Topics, rt)
			continue
		}
		start := int32(0)
		if name == cursorTopic {
			start = max(cursorPart, 0)
		}
		rt, next := describeTopicPartitions(img, t, start, remaining)
		resp.Topics = append(resp.Topics, rt)
		if next >= 0 {
			resp.NextCursor = &kmsg.DescribeTopicPartitionsResponseNextCursor{Topic: name, Partition: next}
			break
		}
		remaining -= int32(len(rt.Partitions))
	}
	return resp
}

// describeTopicPartitions describes t's partitions from start, at most
// limit of them, and returns the partition after the last described when
// some are left, else -1.
func describeTopicPartitions(img *controller.Image, t *controller.Topic, start, limit int32) (kmsg.DescribeTopicPartitionsResponseTopic, int32) {
	rt := kmsg.NewDescribeTopicPartitionsResponseTopic()
	name := t.Name
	rt.Topic = &name
	rt.TopicID = [16]byte(t.ID)
	rt.IsInternal = isInternalTopic(name)
	rt.AuthorizedOperations = topicOperationsAll
	n := int32(len(t.Partitions))
	end := min(n, start+limit)
	next := int32(-1)
	if end < n {
		next = end
	}
	rt.Partitions = []kmsg.DescribeTopicPartitionsResponseTopicPartition{}
	for i := start; i < end; i++ {
		p := &t.Partitions[i]
		rp := kmsg.NewDescribeTopicPartitionsResponseTopicPartition()
		rp.Partition, rp.LeaderID, rp.LeaderEpoch = i, p.Leader, p.LeaderEpoch
		rp.Replicas, rp.ISR = p.Replicas, p.ISR
		rp.EligibleLeaderReplicas, rp.LastKnownELR = []int32{}, []int32{}
		rp.OfflineReplicas = offlineReplicas(img, p)
		if p.Leader < 0 {
			rp.ErrorCode = kerr.LeaderNotAvailable.Code
		}
		rt.Partitions = append(rt.Partitions, rp)
	}
	return rt, next
}
