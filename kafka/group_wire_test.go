package kafka_test

import (
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// Raw group requests at chosen versions over adminConn, for the tests that
// need exact codes (kgo would retry or hide them).

// consumerMeta is a consumer protocol subscription to topics (KIP-429's
// ConsumerProtocolSubscription, v0).
func consumerMeta(topics ...string) []byte {
	m := kmsg.NewConsumerMemberMetadata()
	m.Topics = topics
	return m.AppendTo(nil)
}

type joinOpts struct {
	version            int16 // 0: v5; -1: v0
	memberID           string
	instance           *string
	protocolType       string
	protocols          []kmsg.JoinGroupRequestProtocol
	sessionMs, rebalMs int32
}

func rangeProtocol(topics ...string) []kmsg.JoinGroupRequestProtocol {
	p := kmsg.NewJoinGroupRequestProtocol()
	p.Name, p.Metadata = "range", consumerMeta(topics...)
	return []kmsg.JoinGroupRequestProtocol{p}
}

func joinReq(groupID string, o joinOpts) *kmsg.JoinGroupRequest {
	req := kmsg.NewPtrJoinGroupRequest()
	req.Group, req.MemberID, req.InstanceID = groupID, o.memberID, o.instance
	req.ProtocolType = "consumer"
	if o.protocolType != "" {
		req.ProtocolType = o.protocolType
	}
	if o.protocolType == "-" {
		req.ProtocolType = ""
	}
	req.Protocols = o.protocols
	req.SessionTimeoutMillis, req.RebalanceTimeoutMillis = 6000, 6000
	if o.sessionMs != 0 {
		req.SessionTimeoutMillis = o.sessionMs
	}
	if o.rebalMs != 0 {
		req.RebalanceTimeoutMillis = o.rebalMs
	}
	return req
}

func (a *adminConn) join(groupID string, o joinOpts) *kmsg.JoinGroupResponse {
	a.t.Helper()
	v := o.version
	switch v {
	case 0:
		v = 5
	case -1:
		v = 0
	}
	return a.do(v, joinReq(groupID, o)).(*kmsg.JoinGroupResponse)
}

// joinNew joins as a new member at v5, going through MEMBER_ID_REQUIRED
// (KIP-394) for a dynamic member, and returns the answer of the join that
// counts.
func (a *adminConn) joinNew(t testing.TB, groupID string, o joinOpts) *kmsg.JoinGroupResponse {
	t.Helper()
	r := a.join(groupID, o)
	if r.ErrorCode == kerr.MemberIDRequired.Code {
		o.memberID = r.MemberID
		r = a.join(groupID, o)
	}
	if r.ErrorCode != 0 {
		t.Fatalf("join %s: %v", groupID, kerr.ErrorForCode(r.ErrorCode))
	}
	return r
}

func (a *adminConn) sync(v int16, groupID, memberID string, gen int32, instance *string, assign map[string][]byte) *kmsg.SyncGroupResponse {
	req := kmsg.NewPtrSyncGroupRequest()
	req.Group, req.MemberID, req.Generation, req.InstanceID = groupID, memberID, gen, instance
	for id, b := range assign {
		ga := kmsg.NewSyncGroupRequestGroupAssignment()
		ga.MemberID, ga.MemberAssignment = id, b
		req.GroupAssignment = append(req.GroupAssignment, ga)
	}
	return a.do(v, req).(*kmsg.SyncGroupResponse)
}

func (a *adminConn) heartbeat(v int16, groupID, memberID string, gen int32, instance *string) int16 {
	req := kmsg.NewPtrHeartbeatRequest()
	req.Group, req.MemberID, req.Generation, req.InstanceID = groupID, memberID, gen, instance
	return a.do(v, req).(*kmsg.HeartbeatResponse).ErrorCode
}

type commitPart struct {
	topic     string
	partition int32
	offset    int64
	epoch     int32
	meta      *string
}

func (a *adminConn) commit(v int16, groupID, memberID string, gen int32, instance *string, parts ...commitPart) *kmsg.OffsetCommitResponse {
	req := kmsg.NewPtrOffsetCommitRequest()
	req.Group, req.MemberID, req.Generation, req.InstanceID = groupID, memberID, gen, instance
	for _, p := range parts {
		if n := len(req.Topics); n == 0 || req.Topics[n-1].Topic != p.topic {
			rt := kmsg.NewOffsetCommitRequestTopic()
			rt.Topic = p.topic
			req.Topics = append(req.Topics, rt)
		}
		rp := kmsg.NewOffsetCommitRequestTopicPartition()
		rp.Partition, rp.Offset, rp.LeaderEpoch, rp.Metadata = p.partition, p.offset, p.epoch, p.meta
		rt := &req.Topics[len(req.Topics)-1]
		rt.Partitions = append(rt.Partitions, rp)
	}
	return a.do(v, req).(*kmsg.OffsetCommitResponse)
}

// commitCodes flattens a commit response's codes, in request order.
func commitCodes(r *kmsg.OffsetCommitResponse) []int16 {
	var out []int16
	for _, t := range r.Topics {
		for _, p := range t.Partitions {
			out = append(out, p.ErrorCode)
		}
	}
	return out
}

// fetchOffsetsV fetches groupID's offsets of topic's partitions at v (< 8).
func (a *adminConn) fetchOffsets(v int16, groupID, topic string, parts ...int32) *kmsg.OffsetFetchResponse {
	req := kmsg.NewPtrOffsetFetchRequest()
	req.Group = groupID
	if topic != "" {
		rt := kmsg.NewOffsetFetchRequestTopic()
		rt.Topic, rt.Partitions = topic, parts
		req.Topics = append(req.Topics, rt)
	}
	return a.do(v, req).(*kmsg.OffsetFetchResponse)
}

func (a *adminConn) leave(v int16, groupID string, members ...kmsg.LeaveGroupRequestMember) *kmsg.LeaveGroupResponse {
	req := kmsg.NewPtrLeaveGroupRequest()
	req.Group = groupID
	if v < 3 {
		req.MemberID = members[0].MemberID
	} else {
		req.Members = members
	}
	return a.do(v, req).(*kmsg.LeaveGroupResponse)
}

func leaving(memberID string, instance *string) kmsg.LeaveGroupRequestMember {
	m := kmsg.NewLeaveGroupRequestMember()
	m.MemberID, m.InstanceID = memberID, instance
	return m
}

func (a *adminConn) describe(v int16, groups ...string) *kmsg.DescribeGroupsResponse {
	req := kmsg.NewPtrDescribeGroupsRequest()
	req.Groups = groups
	return a.do(v, req).(*kmsg.DescribeGroupsResponse)
}

// stableMember joins groupID alone (or as leader of whoever is there) and
// syncs an assignment, returning its member id and generation.
func (a *adminConn) stableMember(t testing.TB, groupID string, o joinOpts, assignment []byte) (string, int32) {
	t.Helper()
	r := a.joinNew(t, groupID, o)
	assign := map[string][]byte{}
	if r.LeaderID == r.MemberID {
		for _, m := range r.Members {
			assign[m.MemberID] = assignment
		}
	}
	s := a.sync(3, groupID, r.MemberID, r.Generation, o.instance, assign)
	if s.ErrorCode != 0 {
		t.Fatalf("sync %s: %v", groupID, kerr.ErrorForCode(s.ErrorCode))
	}
	return r.MemberID, r.Generation
}
