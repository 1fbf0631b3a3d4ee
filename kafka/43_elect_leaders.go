package kafka

import (
	"cmp"
	"context"
	"slices"
	"strings"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"ringlog/internal/acl"
	"ringlog/replication/controller"
)

// ElectLeaders, v0 to v2 (KIP-183, KIP-460): move partitions' leadership
// through the controller. PREFERRED (v0's only type) gives each partition
// to its preferred replica (the first of its assignment) when that replica
// is live and in the ISR: ELECTION_NOT_NEEDED when it already leads,
// PREFERRED_LEADER_NOT_AVAILABLE when it cannot. UNCLEAN (v1+) gives a
// leaderless partition a leader among its live replicas, in the ISR or not
// (committed records may be lost, as with unclean.leader.election.enable):
// ELECTION_NOT_NEEDED when it has a leader, ELIGIBLE_LEADERS_NOT_AVAILABLE
// when no replica is live. A null partition list means every partition,
// and the answer then leaves out those that needed no election, as
// Kafka's controller does (every topic is named, each with the partitions
// that were elected or could not be). The answer comes once this broker
// applied the new leaders.
func init() {
	register(api{key: kmsg.ElectLeaders, min: 0, max: 2, sync: handleElectLeaders})
}

func handleElectLeaders(s *Server, cx *reqCtx, kreq kmsg.Request) kmsg.Response {
	req := kreq.(*kmsg.ElectLeadersRequest)
	resp := req.ResponseKind().(*kmsg.ElectLeadersResponse)
	if !s.authorizeCluster(cx, acl.OpAlter) {
		// With an authorizer, ALTER on the cluster: the code at the top
		// (v1+) and on every partition named, with no message.
		resp.ErrorCode = kerr.ClusterAuthorizationFailed.Code
		for _, t := range req.Topics {
			rt := kmsg.NewElectLeadersResponseTopic()
			rt.Topic = t.Topic
			for _, p := range t.Partitions {
				rp := kmsg.NewElectLeadersResponseTopicPartition()
				rp.Partition, rp.ErrorCode = p, kerr.ClusterAuthorizationFailed.Code
				rt.Partitions = append(rt.Partitions, rp)
			}
			resp.Topics = append(resp.Topics, rt)
		}
		return resp
	}
	unclean := req.Version >= 1 && req.ElectionType == 1
	if req.Version >= 1 && req.ElectionType != 0 && req.ElectionType != 1 {
		resp.ErrorCode = kerr.InvalidRequest.Code
		return resp
	}
	var tps []controller.TopicPartition
	for _, t := range req.Topics {
		for _, p := range t.Partitions {
			tps = append(tps, controller.TopicPartition{Topic: t.Topic, Partition: p})
		}
	}
	all := req.Topics == nil
	ctx, cancel := context.WithTimeout(context.Background(), adminTimeout)
	defer cancel()
	ctl := s.cfg.Node.Controller()
	var results map[controller.TopicPartition]error
	var err error
	switch {
	case !all && len(tps) == 0:
		return resp // nothing asked
	case unclean:
		results, err = ctl.ElectUncleanLeaders(ctx, tps)
	default:
		results, err = ctl.ElectPreferredLeaders(ctx, tps)
	}
	if err == nil {
		err = s.waitApplied(ctx)
	}
	if err != nil {
		code := adminCode(err)
		if req.Version >= 1 {
			resp.ErrorCode = code
			return resp
		}
		// v0 has no request-wide code: every partition gets it.
		results = map[controller.TopicPartition]error{}
		for _, tp := range tps {
			results[tp] = err
		}
	}
	if all {
		// Every topic is answered, with the partitions that needed an
		// election (possibly none), as Kafka's controller answers.
		tps = tps[:0]
		for tp, e := range results {
			if controller.ErrorCode(e) != kerr.ElectionNotNeeded.Code {
				tps = append(tps, tp)
			}
		}
		slices.SortFunc(tps, func(a, b controller.TopicPartition) int {
			return cmp.Or(strings.Compare(a.Topic, b.Topic), cmp.Compare(a.Partition, b.Partition))
		})
	}
	// listed is each topic's place in an answer for every partition;
	// otherwise a request's partitions are answered in its order, the
	// consecutive ones of a topic under one entry.
	listed := map[string]int{}
	if all {
		for _, name := range s.cfg.Node.Image().TopicNames() {
			rt := kmsg.NewElectLeadersResponseTopic()
			rt.Topic = name
			rt.Partitions = []kmsg.ElectLeadersResponseTopicPartition{}
			listed[name] = len(resp.Topics)
			resp.Topics = append(resp.Topics, rt)
		}
	}
	for _, tp := range tps {
		i, ok := listed[tp.Topic]
		if n := len(resp.Topics); !ok && (n == 0 || resp.Topics[n-1].Topic != tp.Topic) {
			rt := kmsg.NewElectLeadersResponseTopic()
			rt.Topic = tp.Topic
			resp.Topics = append(resp.Topics, rt)
		}
		if !ok {
			i = len(resp.Topics) - 1
		}
		rt := &resp.Topics[i]
		rp := kmsg.NewElectLeadersResponseTopicPartition()
		rp.Partition = tp.Partition
		if e := results[tp]; e != nil {
			rp.ErrorCode, rp.ErrorMessage = adminCode(e), errorMessage(e)
		}
		rt.Partitions = append(rt.Partitions, rp)
	}
	return resp
}
