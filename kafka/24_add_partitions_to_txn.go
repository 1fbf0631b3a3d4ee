package kafka

import (
	"ringlog/internal/acl"
	"sync"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"ringlog/engine"
)

// AddPartitionsToTxn, v0 to v5 (KIP-98). v0 to v3 come from producers:
// one transaction, whose partitions join it. v4 and v5 (KIP-890 part 1)
// come from brokers only, may carry several transactions, and mark with
// verify_only the ones a partition leader only asks about: is this
// partition in the producer's transaction? (see verifyTxnProduce). As in
// Kafka's KafkaApis, a partition of a topic this broker does not know
// fails the whole transaction: UNKNOWN_TOPIC_OR_PARTITION for it,
// OPERATION_NOT_ATTEMPTED for the others; so does, with an authorizer, a
// topic the producer may not WRITE (TOPIC_AUTHORIZATION_FAILED), and a
// transactional id it may not WRITE fails all its partitions
// (TRANSACTIONAL_ID_AUTHORIZATION_FAILED).
func init() {
	register(api{key: kmsg.AddPartitionsToTxn, min: 0, max: 5, async: handleAddPartitionsToTxn})
}

func handleAddPartitionsToTxn(s *Server, cx *reqCtx, kreq kmsg.Request) {
	req := kreq.(*kmsg.AddPartitionsToTxnRequest)
	resp := req.ResponseKind().(*kmsg.AddPartitionsToTxnResponse)
	txns := req.Transactions
	if req.Version < 4 {
		// The single transaction of a producer's request, in v4's shape.
		t := kmsg.NewAddPartitionsToTxnRequestTransaction()
		t.TransactionalID, t.ProducerID, t.ProducerEpoch = req.TransactionalID, req.ProducerID, req.ProducerEpoch
		for _, rt := range req.Topics {
			t.Topics = append(t.Topics, kmsg.AddPartitionsToTxnRequestTransactionTopic{Topic: rt.Topic, Partitions: rt.Partitions})
		}
		txns = []kmsg.AddPartitionsToTxnRequestTransaction{t}
	} else if !s.clusterAction(cx) {
		// Newer versions come from brokers only (CLUSTER_ACTION).
		resp.ErrorCode = kerr.ClusterAuthorizationFailed.Code
		cx.reply(resp)
		return
	}
	results := make([]kmsg.AddPartitionsToTxnResponseTransaction, len(txns))
	var mu sync.Mutex // the results of transactions answered from several shards
	g := newReplyGather(func() {
		if req.Version < 4 {
			for _, t := range results[0].Topics {
				resp.Topics = append(resp.Topics, kmsg.AddPartitionsToTxnResponseTopic{Topic: t.Topic, Partitions: v3Partitions(t.Partitions)})
			}
		} else {
			resp.Transactions = results
		}
		cx.reply(resp)
	})
	img := s.cfg.Node.Image()
	for i := range txns {
		t := &txns[i]
		var tps []engine.TP
		unknown := false
		// A producer's request (before v4) needs WRITE on the
		// transactional id and on each topic; an internal topic is never
		// a producer's to write, as in Kafka. A broker's (v4+) was
		// checked for CLUSTER_ACTION above.
		txnRefused := req.Version < 4 && !s.authorize(cx, acl.OpWrite, acl.ResourceTransactionalID, t.TransactionalID)
		var refused map[string]bool
		for _, rt := range t.Topics {
			if req.Version < 4 && s.cfg.Authorizer != nil && !refused[rt.Topic] &&
				(isInternalTopic(rt.Topic) || !s.authorize(cx, acl.OpWrite, acl.ResourceTopic, rt.Topic)) {
				if refused == nil {
					refused = make(map[string]bool)
				}
				refused[rt.Topic] = true
			}
			for _, p := range rt.Partitions {
				tps = append(tps, engine.TP{Topic: rt.Topic, Partition: p})
				if _, ok := img.Partition(rt.Topic, p); !ok {
					unknown = true
				}
			}
		}
		result := func(code func(tp engine.TP, i int) int16) {
			r := kmsg.NewAddPartitionsToTxnResponseTransaction()
			r.TransactionalID = t.TransactionalID
			for j, tp := range tps {
				if n := len(r.Topics); n == 0 || r.Topics[n-1].Topic != tp.Topic {
					r.Topics = append(r.Topics, kmsg.AddPartitionsToTxnResponseTransactionTopic{Topic: tp.Topic})
				}
				rt := &r.Topics[len(r.Topics)-1]
				rt.Partitions = append(rt.Partitions, kmsg.AddPartitionsToTxnResponseTransactionTopicPartition{Partition: tp.Partition, ErrorCode: code(tp, j)})
			}
			mu.Lock()
			results[i] = r
			mu.Unlock()
		}
		if txnRefused {
			result(func(engine.TP, int) int16 { return kerr.TransactionalIDAuthorizationFailed.Code })
			continue
		}
		if unknown || refused != nil {
			result(func(tp engine.TP, _ int) int16 {
				if refused[tp.Topic] {
					return kerr.TopicAuthorizationFailed.Code
				}
				if _, ok := img.Partition(tp.Topic, tp.Partition); !ok {
					return kerr.UnknownTopicOrPartition.Code
				}
				return kerr.OperationNotAttempted.Code
			})
			continue
		}
		g.add()
		if t.VerifyOnly {
			s.cfg.Txns.VerifyPartitions(t.TransactionalID, t.ProducerID, t.ProducerEpoch, tps, func(code int16, per []int16) {
				result(func(_ engine.TP, j int) int16 {
					if code != 0 {
						return code
					}
					return per[j]
				})
				g.done()
			})
			continue
		}
		s.cfg.Txns.AddPartitions(t.TransactionalID, t.ProducerID, t.ProducerEpoch, tps, func(code int16) {
			if req.Version < 2 && code == kerr.ProducerFenced.Code {
				// Clients before v2 do not know PRODUCER_FENCED.
				code = kerr.InvalidProducerEpoch.Code
			}
			result(func(engine.TP, int) int16 { return code })
			g.done()
		})
	}
	g.done()
}

func v3Partitions(ps []kmsg.AddPartitionsToTxnResponseTransactionTopicPartition) []kmsg.AddPartitionsToTxnResponseTopicPartition {
	out := make([]kmsg.AddPartitionsToTxnResponseTopicPartition, len(ps))
	for i, p := range ps {
		out[i] = kmsg.AddPartitionsToTxnResponseTopicPartition{Partition: p.Partition, ErrorCode: p.ErrorCode}
	}
	return out
}
