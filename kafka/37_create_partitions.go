package kafka

import (
	"context"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"ringlog/internal/acl"
)

// CreatePartitions v0-v3 (KIP-195): grow a topic to a new partition count.
// v2 is flexible; v3 changes nothing on the wire. With an authorizer, the
// principal needs ALTER on the topic (TOPIC_AUTHORIZATION_FAILED).
func init() {
	register(api{key: kmsg.CreatePartitions, min: 0, max: 3, sync: handleCreatePartitions})
}

func handleCreatePartitions(s *Server, cx *reqCtx, kreq kmsg.Request) kmsg.Response {
	req := kreq.(*kmsg.CreatePartitionsRequest)
	resp := req.ResponseKind().(*kmsg.CreatePartitionsResponse)
	dups := duplicates(req.Topics, func(t *kmsg.CreatePartitionsRequestTopic) string { return t.Topic })
	answered := make(map[string]bool, len(dups))
	mq := s.newMutationQuota(cx, 3) // KIP-599: strict from v3
	for i := range req.Topics {
		t := &req.Topics[i]
		var err error
		if dups[t.Topic] {
			if answered[t.Topic] {
				continue
			}
			answered[t.Topic] = true
			err = refuse(kerr.InvalidRequest, msgDuplicateTopic)
		} else if !s.authorize(cx, acl.OpAlter, acl.ResourceTopic, t.Topic) {
			// With an authorizer, ALTER on the topic; no message, as
			// Kafka's controller answers.
			rt := kmsg.NewCreatePartitionsResponseTopic()
			rt.Topic, rt.ErrorCode = t.Topic, kerr.TopicAuthorizationFailed.Code
			resp.Topics = append(resp.Topics, rt)
			continue
		} else {
			err = s.createPartitions(t, req.ValidateOnly, mq)
		}
		rt := kmsg.NewCreatePartitionsResponseTopic()
		rt.Topic = t.Topic
		rt.ErrorCode, rt.ErrorMessage = adminCode(err), errorMessage(err)
		resp.Topics = append(resp.Topics, rt)
	}
	resp.ThrottleMillis = int32(mq.throttleTime(cx).Milliseconds())
	return resp
}

// createPartitions applies the checks of Kafka's controller that need no
// more than the topic's partition count, with its messages, then grows the
// topic through the controller, which checks the brokers a manual
// assignment names, and waits until this broker applied the new
// partitions. A validate-only request is checked here only: the
// controller's placement is not tried.
func (s *Server) createPartitions(t *kmsg.CreatePartitionsRequestTopic, validateOnly bool, mq *mutationQuota) error {
	ct := s.cfg.Node.Image().Topic(t.Topic)
	if ct == nil {
		return refuse(kerr.UnknownTopicOrPartition, "No topic named %s", t.Topic)
	}
	have := int32(len(ct.Partitions))
	switch {
	case t.Count == have:
		return refuse(kerr.InvalidPartitions, "Topic already has %d partition(s).", have)
	case t.Count < have:
		return refuse(kerr.InvalidPartitions, "The topic %s currently has %d partition(s); %d would not be an increase.", t.Topic, have, t.Count)
	}
	// A null assignment list means "place them yourself"; an empty one is
	// an assignment of the wrong length.
	if t.Assignment != nil {
		if add := t.Count - have; int64(len(t.Assignment)) != int64(add) {
			return refuse(kerr.InvalidReplicaAssignment, "Attempted to add %d additional partition(s), but only %d assignment(s) were specified.", add, len(t.Assignment))
		}
	}
	// The controller mutation quota (KIP-599), where Kafka's controller
	// takes it: after the checks above, a validate-only request too.
	add := int(t.Count - have)
	if err := mq.take(add); err != nil {
		return err
	}
	if validateOnly {
		// The controller's check of ringlog.max.partitions, on the
		// metadata this broker applied.
		if maxTotal := s.maxTotalPartitions(); maxTotal > 0 && totalPartitions(s.cfg.Node.Image())+int(t.Count-have) > int(maxTotal) {
			return refuse(kerr.PolicyViolation, "Unable to add %d partitions: the brokers hold %d, and ringlog.max.partitions is %d",
				t.Count-have, totalPartitions(s.cfg.Node.Image()), maxTotal)
		}
		return nil
	}
	var as [][]int32
	for _, a := range t.Assignment {
		as = append(as, a.Replicas)
	}
	ctx, cancel := context.WithTimeout(context.Background(), adminTimeout)
	defer cancel()
	if err := s.cfg.Node.Controller().CreatePartitions(ctx, t.Topic, t.Count, as, s.maxTotalPartitions()); err != nil {
		mq.give(add)
		return err
	}
	return s.waitApplied(ctx)
}
