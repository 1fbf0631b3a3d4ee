package kafka

import (
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"ringlog/engine"
	"ringlog/engine/group"
	"ringlog/internal/acl"
)

// TxnOffsetCommit, v0 to v6 (KIP-98; v3 adds the group's member and
// generation, KIP-447): a transactional producer commits its consumer
// group's offsets inside its transaction; the group coordinator keeps them
// pending until the transaction's marker lands on the group's partition of
// __consumer_offsets. From v5 (transactions v2, KIP-890 part 2) the
// producer no longer sends AddOffsetsToTxn: the group's partition is added
// to the transaction here, through the transaction coordinator, before
// the offsets are written (Kafka's group coordinator does the same). v6
// (KIP-1319) names topics by id and answers GROUP_ID_NOT_FOUND and
// STALE_MEMBER_EPOCH where older versions get ILLEGAL_GENERATION
// (engine/group's TxnOffsetCommit).
func init() {
	register(api{key: kmsg.TxnOffsetCommit, min: 0, max: 6, async: handleTxnOffsetCommit})
}

func handleTxnOffsetCommit(s *Server, cx *reqCtx, kreq kmsg.Request) {
	req := kreq.(*kmsg.TxnOffsetCommitRequest)
	reply := func(r *kmsg.TxnOffsetCommitResponse) {
		r.SetVersion(req.Version)
		cx.reply(r)
	}
	// With an authorizer: WRITE on the transactional id, READ on the
	// group (every partition refused otherwise), READ on each topic (its
	// partitions TOPIC_AUTHORIZATION_FAILED, the others committed), in
	// Kafka's order.
	if s.cfg.Authorizer != nil {
		switch {
		case !s.authorize(cx, acl.OpWrite, acl.ResourceTransactionalID, req.TransactionalID):
			reply(txnOffsetCommitRefused(req, req.Topics, kerr.TransactionalIDAuthorizationFailed.Code))
			return
		case !s.authorize(cx, acl.OpRead, acl.ResourceGroup, req.Group):
			reply(txnOffsetCommitRefused(req, req.Topics, kerr.GroupAuthorizationFailed.Code))
			return
		}
		var kept, denied []kmsg.TxnOffsetCommitRequestTopic
		for _, t := range req.Topics {
			if s.authorizeTopic(cx, acl.OpRead, t.Topic, t.TopicID) {
				kept = append(kept, t)
			} else {
				denied = append(denied, t)
			}
		}
		if len(denied) > 0 {
			refusedResp := txnOffsetCommitRefused(req, denied, kerr.TopicAuthorizationFailed.Code)
			if len(kept) == 0 {
				reply(refusedResp)
				return
			}
			refused := refusedResp.Topics
			sub := *req
			sub.Topics = kept
			req = &sub
			inner := reply
			reply = func(r *kmsg.TxnOffsetCommitResponse) {
				r.Topics = append(r.Topics, refused...)
				inner(r)
			}
		}
	}
	if req.Version < 5 || s.cfg.Groups == nil {
		s.cfg.Groups.TxnOffsetCommit(req, reply)
		return
	}
	tp := engine.TP{Topic: group.OffsetsTopic, Partition: s.cfg.Groups.PartitionOf(req.Group)}
	s.txnPartitions(req.TransactionalID, req.ProducerID, req.ProducerEpoch, []engine.TP{tp}, true, func(code int16, _ []int16) {
		if code == 0 {
			s.cfg.Groups.TxnOffsetCommit(req, reply)
			return
		}
		if code == kerr.ProducerFenced.Code {
			code = kerr.InvalidProducerEpoch.Code
		}
		resp := req.ResponseKind().(*kmsg.TxnOffsetCommitResponse)
		for _, rt := range req.Topics {
			st := kmsg.NewTxnOffsetCommitResponseTopic()
			st.Topic, st.TopicID = rt.Topic, rt.TopicID
			for _, rp := range rt.Partitions {
				sp := kmsg.NewTxnOffsetCommitResponseTopicPartition()
				sp.Partition, sp.ErrorCode = rp.Partition, code
				st.Partitions = append(st.Partitions, sp)
			}
			resp.Topics = append(resp.Topics, st)
		}
		reply(resp)
	})
}

// txnOffsetCommitRefused answers every partition of topics with code.
func txnOffsetCommitRefused(req *kmsg.TxnOffsetCommitRequest, topics []kmsg.TxnOffsetCommitRequestTopic, code int16) *kmsg.TxnOffsetCommitResponse {
	resp := req.ResponseKind().(*kmsg.TxnOffsetCommitResponse)
	for _, rt := range topics {
		st := kmsg.NewTxnOffsetCommitResponseTopic()
		st.Topic, st.TopicID = rt.Topic, rt.TopicID
		for _, rp := range rt.Partitions {
			sp := kmsg.NewTxnOffsetCommitResponseTopicPartition()
			sp.Partition, sp.ErrorCode = rp.Partition, code
			st.Partitions = append(st.Partitions, sp)
		}
		resp.Topics = append(resp.Topics, st)
	}
	return resp
}
