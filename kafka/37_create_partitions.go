package kafka

import (
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// CreatePartitions v0-v3 (KIP-195): grow a topic to a new partition count.
// v2 is flexible; v3 changes nothing on the wire.
func init() {
	register(api{key: kmsg.CreatePartitions, min: 0, max: 3, sync: handleCreatePartitions})
}

func handleCreatePartitions(s *Server, cx *reqCtx, kreq kmsg.Request) kmsg.Response {
	req := kreq.(*kmsg.CreatePartitionsRequest)
	resp := req.ResponseKind().(*kmsg.CreatePartitionsResponse)
	dups := duplicates(req.Topics, func(t *kmsg.CreatePartitionsRequestTopic) string { return t.Topic })
	answered := make(map[string]bool, len(dups))
	for i := range req.Topics {
		t := &req.Topics[i]
		var err error
		if dups[t.Topic] {
			if answered[t.Topic] {
				continue
			}
			answered[t.Topic] = true
			err = refuse(kerr.InvalidRequest, msgDuplicateTopic)
		} else {
			err = s.createPartitions(t, req.ValidateOnly)
		}
		rt := kmsg.NewCreatePartitionsResponseTopic()
		rt.Topic = t.Topic
		rt.ErrorCode, rt.ErrorMessage = adminCode(err), errorMessage(err)
		resp.Topics = append(resp.Topics, rt)
	}
	return resp
}

// createPartitions applies Kafka's controller checks, with its messages,
// then grows the topic. A manual assignment is accepted when it is what
// this single node would choose anyway (one replica, on this broker), as
// Kafka accepts any assignment naming registered brokers; any other is
// INVALID_REPLICA_ASSIGNMENT.
func (s *Server) createPartitions(t *kmsg.CreatePartitionsRequestTopic, validateOnly bool) error {
	var have int32
	if s.cfg.Node != nil {
		ct := s.cfg.Node.Image().Topic(t.Topic)
		if ct == nil {
			return refuse(kerr.UnknownTopicOrPartition, "No topic named %s", t.Topic)
		}
		have = int32(len(ct.Partitions))
	} else {
		info, ok := s.eng.Topic(t.Topic)
		if !ok {
			return refuse(kerr.UnknownTopicOrPartition, "No topic named %s", t.Topic)
		}
		have = info.Partitions
	}
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
	if s.cfg.Node != nil {
		// The controller checks the brokers the assignment names.
		return s.clusterCreatePartitions(t, validateOnly)
	}
	if t.Assignment != nil {
		for _, a := range t.Assignment {
			if err := s.validateAssignment(a.Replicas); err != nil {
				return err
			}
		}
	}
	return s.eng.CreatePartitions(t.Topic, t.Count, validateOnly)
}
