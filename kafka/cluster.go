package kafka

import (
	"context"
	"errors"
	"fmt"
	"net"
	"slices"
	"strconv"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"ringlog/engine"
	"ringlog/engine/group"
	"ringlog/replication/controller"
)

// A broker in a cluster (Config.Node set) answers from the controller's
// metadata as its node last applied it: the brokers that are registered
// and not fenced, each partition's leader, leader epoch, replicas and ISR.
// Topic administration goes to the controller, and the answer waits until
// this broker applied the change, so that a client that creates a topic
// and then asks this broker for metadata sees it. __consumer_offsets is a
// topic of the cluster like any other, created when first needed
// (offsetsTopic, 10_find_coordinator.go).

// adminTimeout bounds one controller request made for a client.
const adminTimeout = 30 * time.Second

// clusterBrokers lists the live brokers for Metadata and DescribeCluster.
func (s *Server) clusterBrokers(img *controller.Image) []kmsg.MetadataResponseBroker {
	var out []kmsg.MetadataResponseBroker
	for _, b := range img.Brokers() {
		if b.Fenced {
			continue
		}
		host, port, ok := splitHostPort(b.Addr)
		if !ok {
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

// handleMetadataCluster is Metadata for a broker in a cluster.
func (s *Server) handleMetadataCluster(req *kmsg.MetadataRequest, resp *kmsg.MetadataResponse) kmsg.Response {
	n := s.cfg.Node
	img := n.Image()
	resp.Brokers = s.clusterBrokers(img)
	clusterID := s.eng.ClusterID()
	resp.ClusterID = &clusterID
	resp.ControllerID = n.Controller().LeaderID()
	if req.IncludeClusterAuthorizedOperations {
		resp.AuthorizedOperations = clusterOperationsAll
	} else {
		resp.AuthorizedOperations = authorizedOperationsNone
	}
	if req.Topics == nil || (req.Version == 0 && len(req.Topics) == 0) {
		for _, name := range img.TopicNames() {
			resp.Topics = append(resp.Topics, s.clusterTopicMetadata(req, img, img.Topic(name)))
		}
		return resp
	}
	autoCreate := s.cfg.AutoCreateTopics && (req.Version < 4 || req.AllowAutoTopicCreation)
	created := 0
	seen := make(map[string]bool)
	for i := range req.Topics {
		rt := &req.Topics[i]
		if rt.Topic == nil {
			t := img.TopicByID(controller.TopicID(rt.TopicID))
			if t == nil {
				mt := kmsg.NewMetadataResponseTopic()
				mt.TopicID = rt.TopicID
				mt.ErrorCode = kerr.UnknownTopicID.Code
				resp.Topics = append(resp.Topics, mt)
				continue
			}
			resp.Topics = append(resp.Topics, s.clusterTopicMetadata(req, img, t))
			continue
		}
		name := *rt.Topic
		if seen[name] {
			continue
		}
		seen[name] = true
		t := img.Topic(name)
		if t == nil {
			var err error
			if name == group.OffsetsTopic && s.cfg.Groups != nil {
				// As Kafka does, whatever allow_auto_topic_creation says:
				// created with the coordinator's settings.
				t, err = s.offsetsTopic()
			} else if err = s.autoCreateRefusal(name, autoCreate, created); err == nil {
				created++
				t, err = s.clusterAutoCreate(name)
			}
			if err != nil {
				resp.Topics = append(resp.Topics, metadataTopicError(name, err))
				continue
			}
		}
		resp.Topics = append(resp.Topics, s.clusterTopicMetadata(req, n.Image(), t))
	}
	return resp
}

// clusterAutoCreate creates a topic with the cluster's defaults through the
// controller and waits until this broker hosts it.
func (s *Server) clusterAutoCreate(name string) (*controller.Topic, error) {
	ctx, cancel := context.WithTimeout(context.Background(), adminTimeout)
	defer cancel()
	n := s.cfg.Node
	t, err := n.Controller().CreateTopic(ctx, controller.CreateTopicRequest{Name: name, Partitions: s.eng.NumPartitions(), ReplicationFactor: -1})
	if err != nil && !errors.Is(err, controller.ErrTopicExists) {
		return nil, err
	}
	if err := s.clusterSync(ctx); err != nil {
		return nil, err
	}
	if t = n.Image().Topic(name); t == nil {
		return nil, fmt.Errorf("%w: %s", engine.ErrUnknownTopicOrPartition, name)
	}
	s.log.Info("topic auto-created", "topic", name, "partitions", len(t.Partitions))
	return t, nil
}

// clusterSync waits until this broker's node applied everything the
// controller applied here so far (a write just made included).
func (s *Server) clusterSync(ctx context.Context) error {
	n := s.cfg.Node
	return n.WaitApplied(ctx, n.Controller().Image().Index)
}

// clusterTopicMetadata describes one topic from the controller's image.
func (s *Server) clusterTopicMetadata(req *kmsg.MetadataRequest, img *controller.Image, t *controller.Topic) kmsg.MetadataResponseTopic {
	mt := kmsg.NewMetadataResponseTopic()
	name := t.Name
	mt.Topic = &name
	mt.TopicID = [16]byte(t.ID)
	mt.IsInternal = name == group.OffsetsTopic
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
		mp.OfflineReplicas = []int32{}
		for _, r := range p.Replicas {
			if b, ok := img.Broker(r); !ok || b.Fenced {
				mp.OfflineReplicas = append(mp.OfflineReplicas, r)
			}
		}
		if p.Leader < 0 {
			mp.ErrorCode = kerr.LeaderNotAvailable.Code
		}
	}
	return mt
}

// leaderCode is the answer to a consumer's request for tp: 0 when this
// broker leads tp; UNKNOWN_TOPIC_OR_PARTITION when the cluster has no such
// partition; NOT_LEADER_OR_FOLLOWER when another broker leads it (Kafka's
// codes: either makes a client refresh its metadata, but only the second
// says that the partition exists).
func (s *Server) leaderCode(tp engine.TP) int16 {
	if _, ok := s.cfg.Node.Leads(tp); ok {
		return 0
	}
	if t := s.cfg.Node.Image().Topic(tp.Topic); t == nil || tp.Partition < 0 || int(tp.Partition) >= len(t.Partitions) {
		return kerr.UnknownTopicOrPartition.Code
	}
	return kerr.NotLeaderForPartition.Code
}

// replicaOf reports whether broker id is one of tp's replicas.
func (s *Server) replicaOf(tp engine.TP, id int32) bool {
	p, ok := s.cfg.Node.Image().Partition(tp.Topic, tp.Partition)
	return ok && slices.Contains(p.Replicas, id)
}
