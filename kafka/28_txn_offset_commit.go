package kafka

import (
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"ringlog/engine"
	"ringlog/engine/group"
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
