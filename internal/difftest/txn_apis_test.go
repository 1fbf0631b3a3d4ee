package difftest

import (
	"cmp"
	"encoding/binary"
	"hash/crc32"
	"slices"
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

const (
	vDescribeProducers    = 0
	vListTransactions     = 2
	vEndTxn               = 5
	vTxnOffsetCommit      = 6
	vTxnOffsetCommitNames = 5
)

// txnBatch is batch with the transactional attribute set (KIP-98).
func txnBatch(ts, pid int64, epoch int16, seq int32, values ...string) []byte {
	b := batch(ts, pid, epoch, seq, values...)
	binary.BigEndian.PutUint16(b[21:], binary.BigEndian.Uint16(b[21:])|0x10)
	binary.BigEndian.PutUint32(b[17:], crc32.Checksum(b[21:], castagnoli))
	return b
}

// txnProducer finds id's transaction coordinator and initializes its
// producer (unrecorded): Kafka creates __transaction_state at the first
// FindCoordinator for a transaction, and loads it.
func (s *side) txnProducer(id string) *kmsg.InitProducerIDResponse {
	s.eventually("a transaction coordinator", func() kmsg.Request { return findCoordinatorReq(1, id) }, func(r kmsg.Response) bool {
		return r.(*kmsg.FindCoordinatorResponse).Coordinators[0].ErrorCode == 0
	})
	init := initProducerIDReq(-1, -1)
	init.TransactionalID = &id
	txn := s.eventually("a transactional producer id", func() kmsg.Request { return init }, func(r kmsg.Response) bool {
		code := r.(*kmsg.InitProducerIDResponse).ErrorCode
		return code != kerr.CoordinatorLoadInProgress.Code && code != kerr.NotCoordinator.Code &&
			code != kerr.CoordinatorNotAvailable.Code && code != kerr.ConcurrentTransactions.Code
	}).(*kmsg.InitProducerIDResponse)
	if txn.ErrorCode != 0 {
		s.fail("InitProducerId for %s: %v", id, kerr.ErrorForCode(txn.ErrorCode))
	}
	return txn
}

func endTxnReq(id string, txn *kmsg.InitProducerIDResponse, commit bool) *kmsg.EndTxnRequest {
	end := kmsg.NewPtrEndTxnRequest()
	end.SetVersion(vEndTxn)
	end.TransactionalID, end.ProducerID, end.ProducerEpoch, end.Commit = id, txn.ProducerID, txn.ProducerEpoch, commit
	return end
}

func describeProducersReq(topic string, partitions ...int32) *kmsg.DescribeProducersRequest {
	req := kmsg.NewPtrDescribeProducersRequest()
	req.SetVersion(vDescribeProducers)
	t := kmsg.NewDescribeProducersRequestTopic()
	t.Topic, t.Partitions = topic, partitions
	req.Topics = append(req.Topics, t)
	return req
}

func listTransactionsReq(pattern *string, states ...string) *kmsg.ListTransactionsRequest {
	req := kmsg.NewPtrListTransactionsRequest()
	req.SetVersion(vListTransactions)
	req.StateFilters, req.TransactionalIDPattern = states, pattern
	return req
}

// TestTxnAPIs: DescribeProducers (KIP-664) of an idempotent producer and
// of a transactional one before and after its commit, with the errors of
// unknown and invalid partitions; ListTransactions v2 (KIP-1152) with
// transactional id patterns, valid and not, around the same transaction.
func TestTxnAPIs(t *testing.T) {
	run(t, func(s *side) {
		topic := name(s.t, "")
		s.createTopic(topic, 2, nil)
		p0 := part{topic: topic}
		s.eventually("a producer id", func() kmsg.Request { return initProducerIDReq(-1, -1) }, func(r kmsg.Response) bool {
			return r.(*kmsg.InitProducerIDResponse).ErrorCode == 0
		})
		idem := s.quiet(initProducerIDReq(-1, -1)).(*kmsg.InitProducerIDResponse)
		s.do("idempotent seq 0", produceReq(vProduceNames, -1, p0, batch(baseTimestamp, idem.ProducerID, idem.ProducerEpoch, 0, "a", "b", "c")))
		s.do("idempotent seq 3", produceReq(vProduceNames, -1, p0, batch(baseTimestamp+10, idem.ProducerID, idem.ProducerEpoch, 3, "d")))
		s.do("producers of an idempotent producer's partition, an empty one and one that does not exist",
			describeProducersReq(topic, 0, 1, 2))
		s.do("producers of a topic that does not exist", describeProducersReq(name(s.t, "missing"), 0))
		s.do("producers of an invalid topic name", describeProducersReq("bad/name", 0))

		id := name(s.t, "txn")
		txn := s.txnProducer(id)
		p1 := part{topic: topic, partition: 1}
		s.do("an idempotent batch before the transaction", produceReq(vProduceNames, -1, p1, batch(baseTimestamp, idem.ProducerID, idem.ProducerEpoch, 0, "x")))
		// Produce v12 and later add the partition to the transaction
		// (KIP-890 part 2) on both brokers.
		tp := produceReq(vProduceNames, -1, p1, txnBatch(baseTimestamp+20, txn.ProducerID, txn.ProducerEpoch, 0, "t1", "t2"))
		tp.TransactionID = &id
		s.do("a transactional batch", tp)
		s.do("producers with a transaction open", describeProducersReq(topic, 1))

		pat := func(p string) *string { return &p }
		// The transaction's own coordinator partition has loaded, but
		// __transaction_state's other partitions may still be loading
		// (both brokers answer COORDINATOR_LOAD_IN_PROGRESS then: a CI
		// run under load caught ringlog there).
		s.eventually("every coordinator partition loaded", func() kmsg.Request { return listTransactionsReq(nil) }, func(r kmsg.Response) bool {
			return r.(*kmsg.ListTransactionsResponse).ErrorCode == 0
		})
		s.do("transactions matching the id", listTransactionsReq(pat(id)))
		s.do("transactions matching a pattern of the id", listTransactionsReq(pat(name(s.t, "t.n"))))
		s.do("a pattern matching part of the id only", listTransactionsReq(pat(name(s.t, "t"))))
		s.do("a pattern and a state filter", listTransactionsReq(pat(id+"|nothing"), "Ongoing"))
		s.do("a pattern and another state", listTransactionsReq(pat(id), "CompleteCommit"))
		s.do("an invalid pattern", listTransactionsReq(pat("(")))
		s.do("an unbalanced pattern", listTransactionsReq(pat("a)|(b")))
		s.do("an invalid pattern and unknown states", listTransactionsReq(pat("["), "Unknown"))

		s.do("commit", endTxnReq(id, txn, true))
		// The markers are written after EndTxn is answered.
		after := s.eventually("the marker", func() kmsg.Request { return describeProducersReq(topic, 1) }, func(r kmsg.Response) bool {
			ps := r.(*kmsg.DescribeProducersResponse).Topics[0].Partitions[0].ActiveProducers
			for _, p := range ps {
				if p.ProducerID == txn.ProducerID {
					return p.CurrentTxnStartOffset == -1
				}
			}
			return false
		}).(*kmsg.DescribeProducersResponse)
		// The marker's timestamp is the broker's clock: checked here on
		// each side, then written over so that the rest compares.
		for i, p := range after.Topics[0].Partitions[0].ActiveProducers {
			if p.ProducerID == txn.ProducerID {
				if p.LastTimestamp < baseTimestamp+21 {
					s.fail("the marker left the last timestamp at %d", p.LastTimestamp)
				}
				after.Topics[0].Partitions[0].ActiveProducers[i].LastTimestamp = -2
			}
		}
		s.record(s.mainConn(), "producers after the commit", describeProducersReq(topic, 1), after, nil)
		s.eventually("the transaction complete", func() kmsg.Request { return listTransactionsReq(&id) }, func(r kmsg.Response) bool {
			ts := r.(*kmsg.ListTransactionsResponse).TransactionStates
			return len(ts) == 1 && ts[0].TransactionState == "CompleteCommit"
		})
		s.do("transactions matching the id after the commit", listTransactionsReq(pat(id)))
	})
}

// txnOffsetCommitReq commits offset for partition 0 of each topic (by id
// from v6, by name before) in txn's transaction.
func txnOffsetCommitReq(version int16, id string, txn *kmsg.InitProducerIDResponse, group, member string, generation int32, topics ...part) *kmsg.TxnOffsetCommitRequest {
	req := kmsg.NewPtrTxnOffsetCommitRequest()
	req.SetVersion(version)
	req.TransactionalID, req.Group, req.ProducerID, req.ProducerEpoch = id, group, txn.ProducerID, txn.ProducerEpoch
	req.MemberID, req.Generation = member, generation
	for _, p := range topics {
		t := kmsg.NewTxnOffsetCommitRequestTopic()
		t.Topic, t.TopicID = p.topic, p.id
		tp := kmsg.NewTxnOffsetCommitRequestTopicPartition()
		tp.Partition, tp.Offset = p.partition, 5
		t.Partitions = append(t.Partitions, tp)
		req.Topics = append(req.Topics, t)
	}
	return req
}

// TestTxnOffsetCommitV6: TxnOffsetCommit v6 (KIP-1319) in one transaction:
// topics by id (one unknown), a generation of a group that does not exist
// (v6 and v5), and a KIP-848 member committing at its epoch, a newer one
// (v6 and v5) and under an unknown member id; the committed offset once
// the transaction commits.
func TestTxnOffsetCommitV6(t *testing.T) {
	run(t, func(s *side) {
		topic, group := name(s.t, ""), name(s.t, "")
		tid := s.createTopic(topic, 1, nil)
		byID := part{topic: topic, id: tid}
		s.coordinated(group)
		id := name(s.t, "txn")
		txn := s.txnProducer(id)

		// Kafka answers the topics its request handler refuses (an unknown
		// id) before those its coordinator took, ringlog in the request's
		// order; v6 names topics by id only, which is how clients match
		// them (the ids differ between the brokers, so the comparison
		// cannot): the refused topics go first here on both sides.
		req := txnOffsetCommitReq(vTxnOffsetCommit, id, txn, group, "", -1, byID, part{id: [16]byte{1, 2, 3}})
		r := s.quiet(req).(*kmsg.TxnOffsetCommitResponse)
		slices.SortStableFunc(r.Topics, func(a, b kmsg.TxnOffsetCommitResponseTopic) int {
			return cmp.Compare(b.Partitions[0].ErrorCode, a.Partitions[0].ErrorCode)
		})
		s.record(s.mainConn(), "by id, one unknown", req, r, nil)
		missing := name(s.t, "missing")
		s.do("a generation of a group that does not exist", txnOffsetCommitReq(vTxnOffsetCommit, id, txn, missing, "m", 3, byID))
		s.do("a generation of a group that does not exist, v5", txnOffsetCommitReq(vTxnOffsetCommitNames, id, txn, missing, "m", 3, part{topic: topic}))

		cgroup := name(s.t, "848")
		s.coordinated(cgroup)
		m := &consumer{c: s.mainConn(), group: cgroup, id: "difftest-member-a-0000"}
		m.take(s.quietOn(m.c, consumerHeartbeatReq(cgroup, m.id, 0, topic)).(*kmsg.ConsumerGroupHeartbeatResponse))
		s.settle(1, m)
		s.do("a member at its epoch", txnOffsetCommitReq(vTxnOffsetCommit, id, txn, cgroup, m.id, m.epoch, byID))
		s.do("a member at a newer epoch", txnOffsetCommitReq(vTxnOffsetCommit, id, txn, cgroup, m.id, m.epoch+1, byID))
		s.do("a member at a newer epoch, v5", txnOffsetCommitReq(vTxnOffsetCommitNames, id, txn, cgroup, m.id, m.epoch+1, part{topic: topic}))
		s.do("an unknown member", txnOffsetCommitReq(vTxnOffsetCommit, id, txn, cgroup, "difftest-nobody-00000", m.epoch, byID))

		s.do("commit", endTxnReq(id, txn, true))
		s.eventually("the committed offset", func() kmsg.Request {
			r := fetchOffsetsReq(group, topic, 0)
			r.RequireStable = true
			return r
		}, func(r kmsg.Response) bool {
			g := r.(*kmsg.OffsetFetchResponse).Groups[0]
			return g.ErrorCode == 0 && len(g.Topics) == 1 && g.Topics[0].Partitions[0].ErrorCode == 0 && g.Topics[0].Partitions[0].Offset == 5
		})
		s.do("the offsets after the commit", fetchOffsetsReq(group, topic, 0))
		s.do("the member's offsets after the commit", fetchOffsetsReq(cgroup, topic, 0))
		s.doOn(m.c, "leave", consumerHeartbeatReq(cgroup, m.id, -1))
	})
}
