package kafka

import (
	"errors"
	"fmt"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"ringlog/engine"
	"ringlog/engine/group"
)

// Metadata, v0 to v13: this broker is the whole cluster. It is every
// partition's leader, its only replica and its ISR, and the controller.
func init() {
	register(api{key: kmsg.Metadata, min: 0, max: 13, sync: handleMetadata})
}

// authorizedOperationsNone is Kafka's value for "authorized operations
// were not requested" (KIP-430): INT32_MIN.
const authorizedOperationsNone = -2147483648

// With no authorizer every operation is allowed, and Kafka then reports
// every operation that applies to the resource type (bit n is the AclOperation
// of code n).
const (
	// READ 3, WRITE 4, CREATE 5, DELETE 6, ALTER 7, DESCRIBE 8,
	// DESCRIBE_CONFIGS 10, ALTER_CONFIGS 11.
	topicOperationsAll = 1<<3 | 1<<4 | 1<<5 | 1<<6 | 1<<7 | 1<<8 | 1<<10 | 1<<11
	// CREATE 5, ALTER 7, DESCRIBE 8, CLUSTER_ACTION 9, DESCRIBE_CONFIGS 10,
	// ALTER_CONFIGS 11, IDEMPOTENT_WRITE 12.
	clusterOperationsAll = 1<<5 | 1<<7 | 1<<8 | 1<<9 | 1<<10 | 1<<11 | 1<<12
)

// autoCreateMaxDefault bounds the topics one Metadata request may create
// (Config.AutoCreateMax). Each
// creation makes folders and files and rewrites the topic list; a request
// naming a million new topics must not stall the broker for minutes. The
// topics beyond it are answered LEADER_NOT_AVAILABLE, which clients retry,
// so a legitimate client gets its topics over a few rounds.
const autoCreateMaxDefault = 100

func handleMetadata(s *Server, cx *reqCtx, kreq kmsg.Request) kmsg.Response {
	req := kreq.(*kmsg.MetadataRequest)
	resp := req.ResponseKind().(*kmsg.MetadataResponse)
	if s.cfg.Node != nil {
		return s.handleMetadataCluster(req, resp)
	}

	b := kmsg.NewMetadataResponseBroker()
	b.NodeID, b.Host, b.Port = s.cfg.NodeID, s.cfg.AdvertisedHost, s.cfg.AdvertisedPort
	if s.cfg.Rack != "" {
		rack := s.cfg.Rack
		b.Rack = &rack
	}
	resp.Brokers = []kmsg.MetadataResponseBroker{b}
	clusterID := s.eng.ClusterID()
	resp.ClusterID = &clusterID
	resp.ControllerID = s.cfg.NodeID
	if req.IncludeClusterAuthorizedOperations {
		resp.AuthorizedOperations = clusterOperationsAll
	} else {
		resp.AuthorizedOperations = authorizedOperationsNone
	}

	// v0 has no way to ask for no topics: an empty list means all of them.
	// From v1 a null list means all, and an empty one none.
	if req.Topics == nil || (req.Version == 0 && len(req.Topics) == 0) {
		for _, info := range s.eng.Topics() {
			resp.Topics = append(resp.Topics, s.topicMetadata(req, info))
		}
		return resp
	}

	// v4 added allow_auto_topic_creation; before it a Metadata request
	// always allowed it, subject to the broker's setting.
	autoCreate := s.cfg.AutoCreateTopics && (req.Version < 4 || req.AllowAutoTopicCreation)
	created := 0
	seen := make(map[string]bool)
	for i := range req.Topics {
		rt := &req.Topics[i]
		if rt.Topic == nil {
			// By id (KIP-516), v10+: never created automatically.
			info, ok := s.eng.TopicByID(rt.TopicID)
			if !ok {
				t := kmsg.NewMetadataResponseTopic()
				t.TopicID = rt.TopicID
				t.ErrorCode = kerr.UnknownTopicID.Code
				resp.Topics = append(resp.Topics, t)
				continue
			}
			resp.Topics = append(resp.Topics, s.topicMetadata(req, info))
			continue
		}
		name := *rt.Topic
		if seen[name] {
			continue // Kafka answers each topic once
		}
		seen[name] = true
		info, ok := s.eng.Topic(name)
		if !ok {
			err := s.autoCreateRefusal(name, autoCreate, created)
			if err == nil {
				created++
				info, err = s.autoCreate(name)
			}
			if err != nil {
				resp.Topics = append(resp.Topics, metadataTopicError(name, err))
				continue
			}
		}
		resp.Topics = append(resp.Topics, s.topicMetadata(req, info))
	}
	return resp
}

// autoCreateRefusal says why a Metadata request does not create the
// missing topic name; nil means it does.
func (s *Server) autoCreateRefusal(name string, autoCreate bool, created int) error {
	switch {
	case engine.ValidateTopicName(name) != nil:
		return engine.ValidateTopicName(name)
	case !autoCreate:
		return fmt.Errorf("%w: %s", engine.ErrUnknownTopicOrPartition, name)
	case created >= s.cfg.AutoCreateMax:
		return errAutoCreateLater
	}
	return nil
}

// metadataTopicError answers a topic that Metadata cannot describe.
func metadataTopicError(name string, err error) kmsg.MetadataResponseTopic {
	t := kmsg.NewMetadataResponseTopic()
	t.Topic = &name
	t.ErrorCode = metadataErrorCode(err)
	return t
}

// errAutoCreateLater: the request reached Config.AutoCreateMax.
var errAutoCreateLater = errors.New("kafka: too many topics to create in one request; retry")

// autoCreate creates a topic with the broker's defaults
// (auto.create.topics.enable, num.partitions). A topic created meanwhile by
// another request is as good.
func (s *Server) autoCreate(name string) (engine.TopicInfo, error) {
	info, err := s.eng.CreateTopic(name, -1, -1, nil, false)
	if errors.Is(err, engine.ErrTopicExists) {
		if info, ok := s.eng.Topic(name); ok {
			return info, nil
		}
	}
	if err == nil {
		s.log.Info("topic auto-created", "topic", name, "partitions", info.Partitions)
	}
	return info, err
}

// metadataErrorCode maps the errors a Metadata topic can carry.
func metadataErrorCode(err error) int16 {
	switch {
	case errors.Is(err, errAutoCreateLater), errors.Is(err, engine.ErrTopicExists):
		// Retriable: the topic exists or will, on the next round.
		return kerr.LeaderNotAvailable.Code
	}
	return errorCode(err)
}

// topicMetadata describes one topic: every partition led by this node,
// with this node as the only replica and in-sync replica.
func (s *Server) topicMetadata(req *kmsg.MetadataRequest, info engine.TopicInfo) kmsg.MetadataResponseTopic {
	t := kmsg.NewMetadataResponseTopic()
	name := info.Name
	t.Topic = &name
	t.TopicID = info.ID
	// Clients leave internal topics out of regex subscriptions and tools
	// hide them.
	t.IsInternal = info.Name == group.OffsetsTopic
	if req.IncludeTopicAuthorizedOperations {
		t.AuthorizedOperations = topicOperationsAll
	} else {
		t.AuthorizedOperations = authorizedOperationsNone
	}
	// One slice serves as every partition's replicas and ISR: encoding
	// only reads it.
	node := []int32{s.cfg.NodeID}
	t.Partitions = make([]kmsg.MetadataResponseTopicPartition, info.Partitions)
	for i := range t.Partitions {
		p := &t.Partitions[i]
		p.Default()
		p.Partition = int32(i)
		p.Leader = s.cfg.NodeID
		p.LeaderEpoch = 0
		if st, err := s.eng.State(engine.TP{Topic: info.Name, Partition: int32(i)}); err == nil {
			p.LeaderEpoch = st.LeaderEpoch
		}
		p.Replicas = node
		p.ISR = node
		p.OfflineReplicas = []int32{}
	}
	return t
}
