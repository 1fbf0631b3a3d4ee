package kafka

import (
	"sync"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"ringlog/engine"
	"ringlog/engine/group"
	"ringlog/internal/acl"
	"ringlog/replication/node"
)

// WriteTxnMarkers, v0 to v2 (KIP-98; v2 adds KIP-1228's transaction
// version per marker): a transaction coordinator asks this broker, the
// leader of the partitions named, to end a producer's transaction on each
// with a COMMIT or ABORT marker. Only brokers send it: on a listener that
// authenticates, the principal must be a super user, as for replica
// fetches (clusterAction); anyone else gets CLUSTER_AUTHORIZATION_FAILED
// for every partition, as Kafka answers without CLUSTER_ACTION. A marker
// is answered once the partition's high watermark covers it (acks=all, as
// Kafka appends markers). A marker on a partition of __consumer_offsets
// also settles the producer's pending offset commits there
// (TxnOffsetCommit). A marker of transactions v2 (version 2 or more) must
// come at an epoch above that of the producer's batches here, or at the
// same one when nothing is open (a retry), as Kafka's ProducerAppendInfo
// checks it (engine.Marker); before v2 the version is 0, and the marker is
// checked as transactions v1's are.
func init() {
	register(api{key: kmsg.WriteTxnMarkers, min: 0, max: 2, async: handleWriteTxnMarkers})
}

func handleWriteTxnMarkers(s *Server, cx *reqCtx, kreq kmsg.Request) {
	req := kreq.(*kmsg.WriteTxnMarkersRequest)
	resp := req.ResponseKind().(*kmsg.WriteTxnMarkersResponse)
	// Kafka lets a principal with ALTER on the cluster write markers too
	// (with an authorizer), before it asks for CLUSTER_ACTION.
	allowed := (s.cfg.Authorizer != nil && s.authorizeCluster(cx, acl.OpAlter)) || s.clusterAction(cx)
	var mu sync.Mutex
	g := newReplyGather(func() { cx.reply(resp) })
	resp.Markers = make([]kmsg.WriteTxnMarkersResponseMarker, len(req.Markers))
	for i := range req.Markers {
		rm := &req.Markers[i]
		out := &resp.Markers[i]
		out.ProducerID = rm.ProducerID
		out.Topics = make([]kmsg.WriteTxnMarkersResponseMarkerTopic, len(rm.Topics))
		m := engine.Marker{ProducerID: rm.ProducerID, ProducerEpoch: rm.ProducerEpoch, Commit: rm.Committed, CoordinatorEpoch: rm.CoordinatorEpoch,
			TransactionVersion: int16(rm.TransactionVersion)}
		var tps []engine.TP
		var outs []*kmsg.WriteTxnMarkersResponseMarkerTopicPartition
		for j := range rm.Topics {
			rt := &rm.Topics[j]
			ot := &out.Topics[j]
			ot.Topic = rt.Topic
			ot.Partitions = make([]kmsg.WriteTxnMarkersResponseMarkerTopicPartition, len(rt.Partitions))
			for k, part := range rt.Partitions {
				op := &ot.Partitions[k]
				op.Partition = part
				if !allowed {
					op.ErrorCode = kerr.ClusterAuthorizationFailed.Code
					continue
				}
				tps = append(tps, engine.TP{Topic: rt.Topic, Partition: part})
				outs = append(outs, op)
			}
		}
		for range tps {
			g.add()
		}
		writeMarkers(s.eng, s.cfg.Node, s.cfg.Groups, tps, m, func(i int, code int16) {
			mu.Lock()
			outs[i].ErrorCode = code
			mu.Unlock()
			g.done()
		})
	}
	g.done()
}

// writeMarkers appends m to each of tps, which this broker leads, and
// calls done with the index of the partition in tps and its error code
// once the high watermark covers it (on a shard goroutine, or the
// caller's when refused at once). The markers go to each shard together
// (engine.AppendMarkers). On a partition of __consumer_offsets the group
// coordinator then settles the producer's pending offsets, committed or
// dropped with the marker (Kafka's onTransactionCompleted). It must not
// be called on a shard goroutine.
func writeMarkers(eng *engine.Core, n *node.Node, groups *group.Coordinator, tps []engine.TP, m engine.Marker, done func(i int, code int16)) {
	items := make([]engine.MarkerItem, 0, len(tps))
	for i, tp := range tps {
		if code := leaderCode(eng, n, tp); code != 0 {
			done(i, code)
			continue
		}
		items = append(items, engine.MarkerItem{TP: tp, Done: func(_ engine.AppendResult, err error) {
			if err != nil {
				done(i, errorCode(err))
				return
			}
			if tp.Topic == group.OffsetsTopic && groups != nil {
				groups.TxnCompleted(tp.Partition, m.ProducerID, m.Commit)
			}
			done(i, 0)
		}})
	}
	if len(items) > 0 {
		eng.AppendMarkers(m, items, engine.AppendOptions{RequireISR: true})
	}
}
