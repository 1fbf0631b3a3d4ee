package difftest

import (
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// sessionFetch is a fetch in session id at epoch of the given partitions
// (each from offset with 1 MiB), forgetting those in forget; it does not
// wait.
func sessionFetch(version int16, topic string, id [16]byte, sid, epoch int32, offsets map[int32]int64, forget ...int32) *kmsg.FetchRequest {
	req := kmsg.NewPtrFetchRequest()
	req.SetVersion(version)
	req.ReplicaID, req.MaxWaitMillis, req.MinBytes, req.MaxBytes = -1, 0, 0, 50<<20
	req.SessionID, req.SessionEpoch = sid, epoch
	if len(offsets) > 0 {
		t := kmsg.NewFetchRequestTopic()
		t.Topic, t.TopicID = topic, id
		for p := range int32(8) { // in partition order
			off, ok := offsets[p]
			if !ok {
				continue
			}
			fp := kmsg.NewFetchRequestTopicPartition()
			fp.Partition, fp.FetchOffset, fp.PartitionMaxBytes = p, off, 1<<20
			fp.CurrentLeaderEpoch, fp.LastFetchedEpoch, fp.LogStartOffset = -1, -1, -1
			t.Partitions = append(t.Partitions, fp)
		}
		req.Topics = append(req.Topics, t)
	}
	if len(forget) > 0 {
		ft := kmsg.NewFetchRequestForgottenTopic()
		ft.Topic, ft.TopicID, ft.Partitions = topic, id, forget
		req.ForgottenTopics = append(req.ForgottenTopics, ft)
	}
	return req
}

// TestFetchSessions: KIP-227 fetch sessions, by topic name (v12) and id
// (v18): a full fetch opening a session, incremental fetches naming new
// positions, nothing, a forgotten partition, and the answers (which
// partitions an incremental response names); a wrong epoch, a replayed
// one, a session used with the other naming, a session closed by a
// sessionless fetch and used again. The transcripts compare partitions by
// their index, so the order in which each broker lists them (partitions
// that returned records move to the end of the session) is compared
// apart.
func TestFetchSessions(t *testing.T) {
	order := map[string][]string{}
	run(t, func(s *side) {
		topic := name(s.t, "")
		id := s.createTopic(topic, 3, nil)
		end := map[int32]int64{}
		for p := range int32(3) {
			end[p] = s.produce(topic, p, plain("a", "b")) + 2
		}
		noted := func(label string, r kmsg.Response) {
			var ps []string
			for _, t := range r.(*kmsg.FetchResponse).Topics {
				for _, p := range t.Partitions {
					ps = append(ps, fmt.Sprint(p.Partition))
				}
			}
			order[s.name] = append(order[s.name], label+": "+strings.Join(ps, " "))
		}
		for _, v := range []int16{vFetchNames, vFetch} {
			from0 := map[int32]int64{0: 0, 1: 0, 2: 0}
			open := s.do("open a session", sessionFetch(v, topic, id, 0, 0, from0)).(*kmsg.FetchResponse)
			sid := open.SessionID
			s.do("every partition at its end", sessionFetch(v, topic, id, sid, 1, end))
			s.do("nothing named, nothing new", sessionFetch(v, topic, id, sid, 2, nil))
			end[1] = s.produce(topic, 1, plain("c")) + 1
			noted("one record", s.do("a record on partition 1", sessionFetch(v, topic, id, sid, 3, nil)))
			end[0] = s.produce(topic, 0, plain("d")) + 1
			end[2] = s.produce(topic, 2, plain("e")) + 1
			noted("all", s.do("records on every partition, 1's again", sessionFetch(v, topic, id, sid, 4, nil)))
			s.do("the same epoch again", sessionFetch(v, topic, id, sid, 4, nil))
			s.do("an epoch ahead", sessionFetch(v, topic, id, sid, 9, nil))
			s.do("new positions, partition 2 forgotten", sessionFetch(v, topic, id, sid, 5, map[int32]int64{0: end[0], 1: end[1]}, 2))
			s.produce(topic, 2, plain("f"))
			end[0] = s.produce(topic, 0, plain("g")) + 1
			s.do("records on 0 and on the forgotten partition", sessionFetch(v, topic, id, sid, 6, nil))
			other := int16(vFetch)
			if v == vFetch {
				other = vFetchNames
			}
			s.do("the session with the other naming", sessionFetch(other, topic, id, sid, 7, nil))
			s.do("closed by a sessionless fetch", sessionFetch(v, topic, id, sid, -1, map[int32]int64{0: 0}))
			s.do("the closed session", sessionFetch(v, topic, id, sid, 7, nil))
			end[2] = s.produce(topic, 2, plain("h")) + 1
		}
	})
	if !slices.Equal(order["kafka"], order["ringlog"]) {
		t.Errorf("partition order of the responses:\n kafka   %q\n ringlog %q", order["kafka"], order["ringlog"])
	}
}
