package difftest

import (
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// initProducerIDReq asks for a producer id of an idempotent producer (no
// transactional id); pid and epoch are those it had (-1: none).
func initProducerIDReq(pid int64, epoch int16) *kmsg.InitProducerIDRequest {
	req := kmsg.NewPtrInitProducerIDRequest()
	req.SetVersion(vInitProducerID)
	req.TransactionTimeoutMillis = 60_000
	req.ProducerID, req.ProducerEpoch = pid, epoch
	return req
}

// TestIdempotentProducer: InitProducerId, then batches in sequence, a
// duplicate (answered with the original offset), a gap
// (OUT_OF_ORDER_SEQUENCE_NUMBER), wrong epochs and unknown producers.
func TestIdempotentProducer(t *testing.T) {
	run(t, func(s *side) {
		topic := name(s.t, "")
		s.createTopic(topic, 2, nil)
		p := part{topic: topic}
		// Kafka answers COORDINATOR_LOAD_IN_PROGRESS until its broker has a
		// block of producer ids from the controller.
		s.eventually("a producer id", func() kmsg.Request { return initProducerIDReq(-1, -1) }, func(r kmsg.Response) bool {
			return r.(*kmsg.InitProducerIDResponse).ErrorCode == 0
		})
		init := s.do("init producer id", initProducerIDReq(-1, -1)).(*kmsg.InitProducerIDResponse)
		pid, epoch := init.ProducerID, init.ProducerEpoch
		produce := func(label string, epoch int16, seq int32, values ...string) {
			s.do(label, produceReq(vProduceNames, -1, p, batch(baseTimestamp, pid, epoch, seq, values...)))
		}
		produce("seq 0", epoch, 0, "a", "b", "c")
		produce("seq 3", epoch, 3, "d")
		produce("seq 3 again (a duplicate)", epoch, 3, "d")
		produce("seq 0 again (an older duplicate)", epoch, 0, "a", "b", "c")
		produce("seq 6 (a gap)", epoch, 6, "x")
		produce("seq 2 (overlapping)", epoch, 2, "x", "y")
		produce("seq 4", epoch, 4, "e", "f")
		produce("epoch+1, seq 5", epoch+1, 5, "x")
		produce("epoch+1, seq 0", epoch+1, 0, "g")
		produce("the old epoch", epoch, 6, "x")
		s.do("unknown producer, seq 0", produceReq(vProduceNames, -1, p, batch(baseTimestamp, pid+5000, 0, 0, "h")))
		s.do("unknown producer, seq 7", produceReq(vProduceNames, -1, p, batch(baseTimestamp, pid+5001, 0, 7, "x")))
		s.do("negative sequence", produceReq(vProduceNames, -1, part{topic: topic, partition: 1}, batch(baseTimestamp, pid, epoch+1, -5, "x")))
		s.do("acks 1", produceReq(vProduceNames, 1, part{topic: topic, partition: 1}, batch(baseTimestamp, pid, epoch+1, 0, "i")))
		s.do("the log", fetchReq(vFetchNames, p, 0, 1<<20))
		s.do("init again with the producer's id", initProducerIDReq(pid, epoch+1))
		s.do("init again with a wrong epoch", initProducerIDReq(pid, epoch+7))
		s.do("init with an unknown producer id", initProducerIDReq(pid+9000, 0))

		s.slow(func() {
			// Transactions (D13 until issue 12 built them). Kafka creates
			// __transaction_state for the first transactional id and
			// answers COORDINATOR_NOT_AVAILABLE meanwhile.
			id := name(s.t, "txn")
			s.eventually("a transaction coordinator", func() kmsg.Request { return findCoordinatorReq(1, id) }, func(r kmsg.Response) bool {
				return r.(*kmsg.FindCoordinatorResponse).Coordinators[0].ErrorCode != kerr.CoordinatorNotAvailable.Code
			})
			s.do("find a transaction coordinator", findCoordinatorReq(1, id))
			s.eventually("a loaded transaction coordinator", func() kmsg.Request {
				r := initProducerIDReq(-1, -1)
				r.TransactionalID = kmsg.StringPtr(name(s.t, "txn-probe"))
				return r
			}, func(r kmsg.Response) bool {
				code := r.(*kmsg.InitProducerIDResponse).ErrorCode
				return code != kerr.CoordinatorLoadInProgress.Code && code != kerr.NotCoordinator.Code && code != kerr.CoordinatorNotAvailable.Code
			})
			txn := initProducerIDReq(-1, -1)
			txn.TransactionalID = kmsg.StringPtr(id)
			s.do("init a transactional producer", txn)
		})
	})
}
