package kafka

import (
	"context"
	"sync"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"ringlog/engine"
	"ringlog/engine/txn"
	"ringlog/segment/batch"
)

// Transactional produce verification (KIP-890 part 1) and implicit adds
// (part 2). A transactions v1 producer must add a partition to its
// transaction (AddPartitionsToTxn) before it produces there; a produce
// that arrives without it, a delayed retry after the transaction ended say,
// would open a transaction on the partition that no marker ever ends,
// holding its last stable offset back forever (a "hanging transaction").
// So the partition leader asks the transaction coordinator, with
// AddPartitionsToTxn v4 verify_only (or directly when it is the
// coordinator), whether each partition is in the producer's ongoing
// transaction, and refuses the ones that are not with INVALID_TXN_STATE, as
// Kafka does. A transactions v2 producer (Produce v12+) sends no
// AddPartitionsToTxn: the leader adds the partitions for it (v5), at the
// producer's epoch, which EndTxn bumped, so a late produce of an ended
// transaction is fenced rather than added.
//
// As in Kafka, the question is skipped when the producer's transaction is
// already open, at the producer's epoch, on every partition of the request
// (engine.TxnOngoing; Kafka's hasOngoingTransaction): only a transaction's
// first batch on a partition pays the coordinator's round trip, and the
// append says that it relies on the open transaction (AppendOptions.
// OngoingTxn), so the shard refuses the batch if a marker ended the
// transaction in between, as Kafka's append does for a batch without its
// verification guard.

// verifyTxnProduce verifies req's transactional partitions and calls done
// with the refused ones and their codes, on a goroutine that may block (never
// a shard's); ongoing says that the coordinator was not asked because
// every partition had the producer's transaction open.
func (s *Server) verifyTxnProduce(req *kmsg.ProduceRequest, done func(refused map[engine.TP]int16, ongoing bool)) {
	id := *req.TransactionID
	var tps []engine.TP
	var pid int64 = -1
	var epoch int16 = -1
	for i := range req.Topics {
		rt := &req.Topics[i]
		name := rt.Topic
		if req.Version >= 13 {
			info, ok := s.eng.TopicByID(rt.TopicID)
			if !ok {
				continue // answered UNKNOWN_TOPIC_ID
			}
			name = info.Name
		}
		for j := range rt.Partitions {
			h, err := batch.ParseHeader(rt.Partitions[j].Records)
			if err != nil || !h.Transactional() || h.ProducerID < 0 {
				continue // refused later for its own reasons, or not transactional
			}
			if pid < 0 {
				pid, epoch = h.ProducerID, h.ProducerEpoch
			}
			tps = append(tps, engine.TP{Topic: name, Partition: rt.Partitions[j].Partition})
		}
	}
	if len(tps) == 0 {
		done(nil, false)
		return
	}
	ongoing := true
	for _, tp := range tps {
		if !s.eng.TxnOngoing(tp, pid, epoch) {
			ongoing = false
			break
		}
	}
	if ongoing {
		done(nil, true)
		return
	}
	// Produce v12 and later (transactions v2, KIP-890 part 2) adds the
	// partitions to the transaction; earlier versions only verify them.
	add := req.Version >= 12
	s.txnPartitions(id, pid, epoch, tps, add, func(code int16, per []int16) {
		refused := map[engine.TP]int16{}
		for i, tp := range tps {
			c := code
			if c == 0 && per != nil {
				c = per[i]
			}
			if c = produceVerifyCode(c, add); c != 0 {
				refused[tp] = c
			}
		}
		done(refused, false)
	})
}

// txnPartitions asks the coordinator of transactional id id about tps of
// producer pid at epoch: with add, to add them to the producer's
// transaction (AddPartitionsToTxn v5 from a broker, KIP-890 part 2), else
// whether they are in it (v4 verify_only). The coordinator is this
// broker's own, asked directly, or another broker's, asked over the
// inter-broker listener. answer gets a code for the whole transaction, or
// 0 and a code per partition (nil: all 0), on a goroutine that may block
// (never a shard's).
//
// The previous transaction may still be writing its markers: the
// coordinator then holds the question until they are written (up to
// Kafka's add.partitions.to.txn.retry.backoff.max.ms, 100 ms; see
// engine/txn's whenSettled) rather than answering CONCURRENT_TRANSACTIONS,
// which Kafka's brokers retry after 20 ms and more.
func (s *Server) txnPartitions(id string, pid int64, epoch int16, tps []engine.TP, add bool, answer func(code int16, per []int16)) {
	img := s.cfg.Node.Image()
	part, ok := img.Partition(txn.StateTopic, s.cfg.Txns.PartitionOf(id))
	switch {
	case !ok || part.Leader < 0:
		go answer(kerr.CoordinatorNotAvailable.Code, nil)
	case part.Leader == s.cfg.NodeID || s.cfg.Markers == nil:
		// The answers come on a shard goroutine, which must not queue
		// appends to shards.
		if add {
			s.cfg.Txns.AddPartitions(id, pid, epoch, tps, func(code int16) { go answer(code, nil) })
			return
		}
		s.cfg.Txns.VerifyPartitions(id, pid, epoch, tps, func(code int16, per []int16) { go answer(code, per) })
	default:
		b, ok := img.Broker(part.Leader)
		if !ok || b.Fenced {
			go answer(kerr.CoordinatorNotAvailable.Code, nil)
			return
		}
		go func() {
			code, per := s.cfg.Markers.verify(part.Leader, b.Addr, id, pid, epoch, tps, add)
			if add && code == 0 {
				// An add has one outcome for all its partitions, which
				// the local AddPartitions answers as one code and the
				// wire carries per partition: answer it the same way,
				// so that the callers, which read only the code of an
				// add, see a refusal (TxnOffsetCommit wrote its offsets
				// outside the transaction when another broker's
				// coordinator refused the add).
				for _, c := range per {
					if c != 0 {
						code = c
						break
					}
				}
				per = nil
			}
			answer(code, per)
		}()
	}
}

// produceVerifyCode is what a produce is answered for a verification's
// code (Kafka's AddPartitionsToTxnManager): a partition not in the
// transaction is INVALID_TXN_STATE; a coordinator that cannot answer now
// NOT_ENOUGH_REPLICAS, which producers retry; a fenced producer
// INVALID_PRODUCER_EPOCH. An add (transactions v2) that meets the previous
// transaction still ending is CONCURRENT_TRANSACTIONS, which v2 producers
// retry.
func produceVerifyCode(code int16, add bool) int16 {
	switch code {
	case 0:
		return 0
	case kerr.ConcurrentTransactions.Code:
		if add {
			return code
		}
		return kerr.NotEnoughReplicas.Code
	case kerr.TransactionAbortable.Code, kerr.InvalidTxnState.Code, kerr.InvalidProducerIDMapping.Code:
		return kerr.InvalidTxnState.Code
	case kerr.ProducerFenced.Code, kerr.InvalidProducerEpoch.Code:
		return kerr.InvalidProducerEpoch.Code
	}
	return kerr.NotEnoughReplicas.Code
}

// verify asks the coordinator broker id at addr, with AddPartitionsToTxn
// v4 verify_only, whether tps are in the producer's transaction, or with
// add, v5, to add them. It blocks for the round trip.
func (ms *MarkerSender) verify(id int32, addr, txnID string, pid int64, epoch int16, tps []engine.TP, add bool) (int16, []int16) {
	cl, err := ms.peer(id, addr)
	if err != nil {
		return kerr.CoordinatorNotAvailable.Code, nil
	}
	seeds := cl.SeedBrokers()
	if len(seeds) == 0 {
		return kerr.CoordinatorNotAvailable.Code, nil
	}
	req := kmsg.NewPtrAddPartitionsToTxnRequest()
	req.Version = 4
	if add {
		req.Version = 5
	}
	t := kmsg.NewAddPartitionsToTxnRequestTransaction()
	t.TransactionalID, t.ProducerID, t.ProducerEpoch, t.VerifyOnly = txnID, pid, epoch, !add
	for _, tp := range tps {
		if n := len(t.Topics); n == 0 || t.Topics[n-1].Topic != tp.Topic {
			t.Topics = append(t.Topics, kmsg.AddPartitionsToTxnRequestTransactionTopic{Topic: tp.Topic})
		}
		rt := &t.Topics[len(t.Topics)-1]
		rt.Partitions = append(rt.Partitions, tp.Partition)
	}
	req.Transactions = append(req.Transactions, t)
	ctx, cancel := context.WithTimeout(ms.ctx, ms.cfg.Timeout)
	defer cancel()
	kresp, err := seeds[0].Request(ctx, req)
	if err != nil {
		return kerr.CoordinatorNotAvailable.Code, nil
	}
	resp := kresp.(*kmsg.AddPartitionsToTxnResponse)
	if resp.ErrorCode != 0 {
		return resp.ErrorCode, nil
	}
	codes := map[engine.TP]int16{}
	for _, rt := range resp.Transactions {
		if rt.TransactionalID != txnID {
			continue
		}
		for _, t := range rt.Topics {
			for _, p := range t.Partitions {
				codes[engine.TP{Topic: t.Topic, Partition: p.Partition}] = p.ErrorCode
			}
		}
	}
	per := make([]int16, len(tps))
	for i, tp := range tps {
		c, ok := codes[tp]
		if !ok {
			c = kerr.UnknownServerError.Code
		}
		per[i] = c
	}
	return 0, per
}

// produceOrder keeps a connection's produce requests in the order they
// came while some wait for their verification: each is a slot in a queue,
// run once it and every slot before it are ready. Only the connection's
// network goroutine adds slots (wait, run); any goroutine may make one
// ready. A nil produceOrder (a request from no connection) runs at once.
type produceOrder struct {
	mu       sync.Mutex
	queue    []*orderSlot
	draining bool
}

type orderSlot struct {
	ready bool
	fn    func()
}

// run runs fn in order: at once when nothing waits before it.
func (o *produceOrder) run(fn func()) {
	if o == nil {
		fn()
		return
	}
	o.mu.Lock()
	if len(o.queue) == 0 && !o.draining {
		o.mu.Unlock()
		fn()
		return
	}
	o.queue = append(o.queue, &orderSlot{ready: true, fn: fn})
	o.mu.Unlock()
	o.drain()
}

// wait takes a slot for a request that is not ready yet.
func (o *produceOrder) wait() *orderSlot {
	if o == nil {
		return nil
	}
	sl := &orderSlot{}
	o.mu.Lock()
	o.queue = append(o.queue, sl)
	o.mu.Unlock()
	return sl
}

// ready makes sl ready with fn, and runs what is ready at the head of
// the queue.
func (o *produceOrder) ready(sl *orderSlot, fn func()) {
	if o == nil {
		fn()
		return
	}
	o.mu.Lock()
	sl.ready, sl.fn = true, fn
	o.mu.Unlock()
	o.drain()
}

// drain runs the ready slots at the head of the queue, in order, one
// drainer at a time (a slot made ready meanwhile is found by the running
// drainer's next look).
func (o *produceOrder) drain() {
	o.mu.Lock()
	if o.draining {
		o.mu.Unlock()
		return
	}
	o.draining = true
	for len(o.queue) > 0 && o.queue[0].ready {
		sl := o.queue[0]
		o.queue[0] = nil
		o.queue = o.queue[1:]
		o.mu.Unlock()
		sl.fn()
		o.mu.Lock()
	}
	o.draining = false
	o.mu.Unlock()
}
