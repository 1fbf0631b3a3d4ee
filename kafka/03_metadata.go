package kafka

import (
	"context"
	"errors"
	"fmt"
	"net"
	"slices"
	"strconv"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"ringlog/engine"
	"ringlog/engine/group"
	"ringlog/engine/txn"
	"ringlog/internal/acl"
	"ringlog/replication/controller"
)

// Metadata, v0 to v13, answered from the controller's image as this
// broker's node last applied it: the brokers that are registered and not
// fenced, each partition's leader, leader epoch, replicas and ISR, and the
// quorum's leader as the controller. The engine has applied that image, so
// what a client is told of this broker's own partitions is what it serves.
// A topic created here (auto.create.topics.enable, or __consumer_offsets)
// goes through the controller, and the answer waits until this broker
// applied it.
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
// (Config.AutoCreateMax). Each creation is a write to the metadata quorum,
// waited for until this broker applied it (folders and files made); a
// request naming a million new topics must not stall the broker for
// minutes. The
// topics beyond it are answered LEADER_NOT_AVAILABLE, which clients retry,
// so a legitimate client gets its topics over a few rounds.
const autoCreateMaxDefault = 100

func handleMetadata(s *Server, cx *reqCtx, kreq kmsg.Request) kmsg.Response {
	req := kreq.(*kmsg.MetadataRequest)
	resp := req.ResponseKind().(*kmsg.MetadataResponse)
	n := s.cfg.Node
	img := n.Image()
	resp.Brokers = liveBrokers(img, cx.listener())
	clusterID := s.eng.ClusterID()
	resp.ClusterID = &clusterID
	resp.ControllerID = s.controllerID()
	resp.AuthorizedOperations = s.clusterAuthorizedOperations(cx, req.IncludeClusterAuthorizedOperations)
	// With an authorizer (authz.go), a topic is described only to a
	// principal with DESCRIBE on it, and its authorized operations are
	// the principal's (KIP-430).
	describe := func(img *controller.Image, t *controller.Topic) kmsg.MetadataResponseTopic {
		mt := topicMetadata(req, img, t)
		if req.IncludeTopicAuthorizedOperations {
			mt.AuthorizedOperations = s.authorizedOperations(cx, true, acl.ResourceTopic, t.Name)
		}
		return mt
	}
	unauthorized := func(name *string, id [16]byte) kmsg.MetadataResponseTopic {
		mt := kmsg.NewMetadataResponseTopic()
		mt.Topic, mt.TopicID = name, id
		mt.ErrorCode = kerr.TopicAuthorizationFailed.Code
		return mt
	}

	// v0 has no way to ask for no topics: an empty list means all of them.
	// From v1 a null list means all, and an empty one none.
	if req.Topics == nil || (req.Version == 0 && len(req.Topics) == 0) {
		for _, name := range img.TopicNames() {
			if s.authorize(cx, acl.OpDescribe, acl.ResourceTopic, name) {
				resp.Topics = append(resp.Topics, describe(img, img.Topic(name)))
			}
		}
		return resp
	}

	// v4 added allow_auto_topic_creation; before it a Metadata request
	// always allowed it, subject to the broker's setting.
	autoCreate := s.cfg.AutoCreateTopics && (req.Version < 4 || req.AllowAutoTopicCreation)
	created := 0
	var mq *mutationQuota // the client's controller mutation quota, once a topic is to be created
	seen := make(map[string]bool)
	for i := range req.Topics {
		rt := &req.Topics[i]
		if rt.Topic == nil || rt.TopicID != ([16]byte{}) {
			// By id (KIP-516), v10+: never created automatically. A
			// non-zero id decides, as in Kafka: the Java admin client
			// sends the name "" beside the id.
			t := img.TopicByID(controller.TopicID(rt.TopicID))
			if t == nil {
				mt := kmsg.NewMetadataResponseTopic()
				mt.TopicID = rt.TopicID
				mt.ErrorCode = kerr.UnknownTopicID.Code
				resp.Topics = append(resp.Topics, mt)
				continue
			}
			if !s.authorize(cx, acl.OpDescribe, acl.ResourceTopic, t.Name) {
				resp.Topics = append(resp.Topics, unauthorized(nil, rt.TopicID))
				continue
			}
			resp.Topics = append(resp.Topics, describe(img, t))
			continue
		}
		name := *rt.Topic
		if seen[name] {
			continue // Kafka answers each topic once
		}
		seen[name] = true
		if !s.authorize(cx, acl.OpDescribe, acl.ResourceTopic, name) {
			// Whether it exists or not: its existence is not told.
			resp.Topics = append(resp.Topics, unauthorized(&name, [16]byte{}))
			continue
		}
		t := img.Topic(name)
		if t == nil && autoCreate && !s.authorizeCluster(cx, acl.OpCreate) && !s.authorize(cx, acl.OpCreate, acl.ResourceTopic, name) {
			// Kafka creates a topic for a Metadata request only with
			// CREATE on the cluster or on the topic.
			resp.Topics = append(resp.Topics, unauthorized(&name, [16]byte{}))
			continue
		}
		if t == nil {
			var err error
			if name == group.OffsetsTopic && s.cfg.Groups != nil {
				// As Kafka does, whatever allow_auto_topic_creation says:
				// created with the coordinator's settings.
				t, err = s.offsetsTopic()
			} else if name == txn.StateTopic && s.cfg.Txns != nil {
				t, err = s.txnStateTopic()
			} else if err = s.autoCreateRefusal(name, autoCreate, created); err == nil {
				created++
				if mq == nil {
					// Kafka's broker forwards the creation to its
					// controller as a CreateTopics of the client's, of
					// a version that is strict (KIP-599).
					mq = s.newMutationQuota(cx, 0)
				}
				t, err = s.autoCreate(name, mq)
			}
			if err != nil {
				resp.Topics = append(resp.Topics, metadataTopicError(name, err))
				continue
			}
		}
		// The image this broker applied after the creation, which names
		// the new topic's brokers.
		resp.Topics = append(resp.Topics, describe(n.Image(), t))
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
// (auto.create.topics.enable, num.partitions, default.replication.factor)
// through the controller, and waits until this broker applied it. A topic
// created meanwhile by another request is as good.
//
// The creation takes the client's controller mutation quota (KIP-599),
// strictly, as Kafka's controller does with the CreateTopics the broker
// forwards for it: over the quota, the topic is not created and the
// answer is UNKNOWN_TOPIC_OR_PARTITION (Kafka's answer while a topic is
// missing; the client asks again). The Metadata answer is not throttled
// for it, as Kafka's broker does not throttle it.
func (s *Server) autoCreate(name string, mq *mutationQuota) (*controller.Topic, error) {
	parts := int(s.eng.NumPartitions())
	if err := mq.take(parts); err != nil {
		return nil, fmt.Errorf("%w: %s: %w", engine.ErrUnknownTopicOrPartition, name, err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), adminTimeout)
	defer cancel()
	n := s.cfg.Node
	t, err := n.Controller().CreateTopic(ctx, controller.CreateTopicRequest{Name: name, Partitions: s.eng.NumPartitions(), ReplicationFactor: -1,
		MaxTotal: s.maxTotalPartitions()})
	if err != nil {
		mq.give(parts)
		if !errors.Is(err, controller.ErrTopicExists) {
			return nil, err
		}
	}
	if err := s.waitApplied(ctx); err != nil {
		return nil, err
	}
	if t = n.Image().Topic(name); t == nil {
		return nil, fmt.Errorf("%w: %s", engine.ErrUnknownTopicOrPartition, name)
	}
	s.log.Info("topic auto-created", "topic", name, "partitions", len(t.Partitions))
	return t, nil
}

// metadataErrorCode maps the errors a Metadata topic can carry.
func metadataErrorCode(err error) int16 {
	if errors.Is(err, errAutoCreateLater) {
		// Retriable: the topic will exist on the next round.
		return kerr.LeaderNotAvailable.Code
	}
	return errorCode(err)
}

// topicMetadata describes one topic as img has it.
func topicMetadata(req *kmsg.MetadataRequest, img *controller.Image, t *controller.Topic) kmsg.MetadataResponseTopic {
	mt := kmsg.NewMetadataResponseTopic()
	name := t.Name
	mt.Topic = &name
	mt.TopicID = [16]byte(t.ID)
	// Clients leave internal topics out of regex subscriptions and tools
	// hide them.
	mt.IsInternal = isInternalTopic(name)
	if req.IncludeTopicAuthorizedOperations {
		mt.AuthorizedOperations = topicOperationsAll
	} else {
		mt.AuthorizedOperations = authorizedOperationsNone
	}
	mt.Partitions = make([]kmsg.MetadataResponseTopicPartition, len(t.Partitions))
	for i, p := range t.Partitions {
		mp := &mt.Partitions[i]
		mp.Default()
		mp.Partition = int32(i)
		mp.Leader = p.Leader
		mp.LeaderEpoch = p.LeaderEpoch
		mp.Replicas = p.Replicas
		mp.ISR = p.ISR
		mp.OfflineReplicas = offlineReplicas(img, &p)
		if p.Leader < 0 {
			mp.ErrorCode = kerr.LeaderNotAvailable.Code
		}
	}
	return mt
}

// offlineReplicas are Kafka's offline replicas of p: on a broker that is
// not live, or reported offline by theirs (KIP-112, KIP-858).
func offlineReplicas(img *controller.Image, p *controller.Partition) []int32 {
	out := []int32{}
	for _, r := range p.Replicas {
		if b, ok := img.Broker(r); !ok || b.Fenced || slices.Contains(p.Offline, r) {
			out = append(out, r)
		}
	}
	return out
}

// liveBrokers lists the brokers of img that are not fenced, at their
// address on the named listener (those without it are left out, as Kafka
// does), for Metadata and DescribeCluster.
func liveBrokers(img *controller.Image, listener string) []kmsg.MetadataResponseBroker {
	var out []kmsg.MetadataResponseBroker
	for _, b := range img.Brokers() {
		if b.Fenced {
			continue
		}
		addr, ok := b.Endpoint(listener)
		host, port, ok2 := splitHostPort(addr)
		if !ok || !ok2 {
			continue
		}
		mb := kmsg.NewMetadataResponseBroker()
		mb.NodeID, mb.Host, mb.Port = b.ID, host, port
		if b.Rack != "" {
			rack := b.Rack
			mb.Rack = &rack
		}
		out = append(out, mb)
	}
	return out
}

func splitHostPort(addr string) (string, int32, bool) {
	host, p, err := net.SplitHostPort(addr)
	if err != nil {
		return "", 0, false
	}
	port, err := strconv.ParseInt(p, 10, 32)
	if err != nil {
		return "", 0, false
	}
	return host, int32(port), true
}
