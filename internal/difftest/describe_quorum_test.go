package difftest

import (
	"testing"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// vDescribeQuorum is DescribeQuorum's newest version (KIP-853's v2).
const vDescribeQuorum = 2

func describeQuorumReq(version int16, topic string, partitions ...int32) *kmsg.DescribeQuorumRequest {
	req := kmsg.NewPtrDescribeQuorumRequest()
	req.SetVersion(version)
	rt := kmsg.NewDescribeQuorumRequestTopic()
	rt.Topic = topic
	for _, p := range partitions {
		rp := kmsg.NewDescribeQuorumRequestTopicPartition()
		rp.Partition = p
		rt.Partitions = append(rt.Partitions, rp)
	}
	req.Topics = append(req.Topics, rt)
	return req
}

// quorumShape keeps of a DescribeQuorum answer what two quorums share:
// each figure becomes its sign (1 set, 0, -1 unknown). Kafka counts
// records of its metadata log and ringlog raft entries (ARCHITECTURE.md,
// "Roles"), and both leaders' clocks and epochs are their own; what must
// match is the structure, who is leader, voter and observer, and which
// figures are known.
func quorumShape(r kmsg.Response) {
	sign := func(v *int64) { *v = min(max(*v, -1), 1) }
	for i := range r.(*kmsg.DescribeQuorumResponse).Topics {
		t := &r.(*kmsg.DescribeQuorumResponse).Topics[i]
		for j := range t.Partitions {
			p := &t.Partitions[j]
			p.LeaderEpoch = min(max(p.LeaderEpoch, -1), 1)
			sign(&p.HighWatermark)
			for _, rs := range [][]kmsg.DescribeQuorumResponseTopicPartitionReplicaState{p.CurrentVoters, p.Observers} {
				for k := range rs {
					sign(&rs[k].LogEndOffset)
					sign(&rs[k].LastFetchTimestamp)
					sign(&rs[k].LastCaughtUpTimestamp)
				}
			}
		}
	}
}

// TestDescribeQuorum: the metadata quorum of a single node as v2, v1 and
// v0 answer it (its shape: quorumShape), and a request naming another
// topic or partition than __cluster_metadata-0.
func TestDescribeQuorum(t *testing.T) {
	run(t, func(s *side) {
		for _, v := range []int16{vDescribeQuorum, 1, 0} {
			quorumShape(s.do("the metadata partition v"+string(rune('0'+v)), describeQuorumReq(v, "__cluster_metadata", 0)))
		}
		s.do("another topic", describeQuorumReq(vDescribeQuorum, name(s.t, "t"), 0))
		s.do("another partition", describeQuorumReq(vDescribeQuorum, "__cluster_metadata", 1))
		s.do("two partitions", describeQuorumReq(vDescribeQuorum, "__cluster_metadata", 0, 1))
	})
}
