package difftest

import (
	"slices"
	"testing"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// metadataOf asks for topics with auto-creation as given, and keeps in the
// answer the topics named (a request for every topic lists those of every
// test).
func (s *side) metadataOf(label string, req *kmsg.MetadataRequest, keep ...string) *kmsg.MetadataResponse {
	resp := s.do(label, req).(*kmsg.MetadataResponse)
	if req.Topics == nil {
		resp.Topics = slices.DeleteFunc(resp.Topics, func(t kmsg.MetadataResponseTopic) bool {
			return t.Topic == nil || !slices.Contains(keep, *t.Topic)
		})
	}
	return resp
}

// TestMetadata: known and unknown topics, auto-creation, invalid names,
// topics by id, all topics, the internal topic, authorized operations,
// and DescribeCluster.
func TestMetadata(t *testing.T) {
	run(t, func(s *side) {
		topic, auto := name(s.t, ""), name(s.t, "auto")
		id := s.createTopic(topic, 3, nil)
		s.do("one topic", metadataReq(topic))
		s.do("unknown topic", metadataReq(name(s.t, "nope")))
		s.do("invalid name", metadataReq("bad name!"))
		s.do("no topics", func() kmsg.Request {
			r := metadataReq()
			r.Topics = []kmsg.MetadataRequestTopic{}
			return r
		}())
		s.metadataOf("all topics", func() *kmsg.MetadataRequest {
			r := metadataReq()
			r.Topics = nil
			return r
		}(), topic)
		s.do("by id", func() kmsg.Request {
			r := kmsg.NewPtrMetadataRequest()
			r.SetVersion(vMetadata)
			rt := kmsg.NewMetadataRequestTopic()
			rt.TopicID = id
			r.Topics = append(r.Topics, rt)
			return r
		}())
		s.do("unknown id", func() kmsg.Request {
			r := kmsg.NewPtrMetadataRequest()
			r.SetVersion(vMetadata)
			rt := kmsg.NewMetadataRequestTopic()
			rt.TopicID = [16]byte{7, 7}
			r.Topics = append(r.Topics, rt)
			return r
		}())
		s.do("authorized operations", func() kmsg.Request {
			r := metadataReq(topic)
			r.IncludeTopicAuthorizedOperations = true
			return r
		}())
		s.do("the offsets topic", func() kmsg.Request {
			// FindCoordinator creates it first.
			s.coordinated(name(s.t, "group"))
			return metadataReq("__consumer_offsets")
		}())
		auto1 := metadataReq(auto)
		auto1.AllowAutoTopicCreation = true
		s.do("auto-create", auto1)
		s.waitLeaders(auto, 1)
		s.do("auto-created", metadataReq(auto))
		bad := metadataReq("bad name!")
		bad.AllowAutoTopicCreation = true
		s.do("auto-create an invalid name", bad)

		dc := kmsg.NewPtrDescribeClusterRequest()
		dc.SetVersion(vDescribeCluster)
		s.do("describe cluster", dc)
		dc2 := kmsg.NewPtrDescribeClusterRequest()
		dc2.SetVersion(vDescribeCluster)
		dc2.IncludeClusterAuthorizedOperations, dc2.IncludeFencedBrokers = true, true
		s.do("describe cluster, operations and fenced brokers", dc2)
		dc3 := kmsg.NewPtrDescribeClusterRequest()
		dc3.SetVersion(vDescribeCluster)
		dc3.EndpointType = 2 // controllers
		s.do("describe cluster, controllers", dc3)
	})
}
