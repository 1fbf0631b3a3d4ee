package kafka

import (
	"errors"
	"fmt"
	"sync/atomic"
	"time"
	"unsafe"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"ringlog/engine"
	"ringlog/engine/group"
	"ringlog/internal/acl"
	"ringlog/internal/kwire"
	"ringlog/segment/batch"
)

// Produce, v0 to v13.
//
// v0 to v2 carry message sets (magic 0 and 1), which ringlog does not
// store; they are still advertised because librdkafka (and so kcat)
// turns compression off against a broker that does not list Produce v0.
// Such requests, and any batch that is not magic 2 in a newer request, are
// answered per partition with UNSUPPORTED_VERSION, which clients report
// instead of retrying.
//
// The handler runs on the connection's network goroutine and calls
// engine.Append there, partition after partition. That is what keeps a
// connection's produce requests in order on every partition: an idempotent
// producer with several requests in flight numbers its batches, and a
// batch overtaking the one before it would be refused as out of order.
// Each Append answers through a done callback, on the partition's shard
// goroutine; the callback that finishes the last partition encodes the
// response and replies.
func init() {
	register(api{key: kmsg.Produce, min: 0, max: 13, async: handleProduce, bigRequests: true, check: checkProduceShape})
}

// produceMagicMinVersion is the first Produce version whose records are
// RecordBatch v2 (KIP-98).
const produceMagicMinVersion = 3

// produce is one Produce request waiting for its partitions.
type produce struct {
	cx   *reqCtx
	acks int16
	resp *kmsg.ProduceResponse
	// pending counts the partitions not yet answered, plus one held by the
	// handler until it has issued every append: the response must not go
	// out while the handler still fills it in.
	pending atomic.Int64
	// failed is set when a partition failed: an acks=0 producer, which
	// reads no response, learns of it by losing its connection.
	failed atomic.Bool
	// answered holds, for an acks=all request, one flag per
	// partition sent to the engine: set by whichever of the engine's
	// answer and the request's timeout comes first (see timeout).
	answered []atomic.Bool
	timer    *time.Timer
	// frameRefs counts the holders of the request's frame, whose bytes
	// the engine writes: one per partition handed to the engine, until its
	// done callback, plus one held by the handler until it has issued every
	// append. The response's own countdown (pending) does not do: an
	// acks=all request that timed out is answered while its appends may
	// still be writing. The last holder gives the frame back to netpoll
	// (Recycle), unless an append failed (frameKept): a shard whose ring
	// broke answers requests whose writes may still be in the kernel.
	frameRefs atomic.Int64
	frameKept atomic.Bool
	// parkedAt is when the last of an acks=all request's partitions was
	// written here and began waiting for the in-sync replicas (netpoll's
	// clock): LocalTime ends and RemoteTime begins there. Stored by the
	// shards (AppendOptions.Written), read by finish.
	parkedAt atomic.Int64
}

// unrefFrame drops one holder of the request's frame.
func (p *produce) unrefFrame() {
	if p.frameRefs.Add(-1) == 0 && !p.frameKept.Load() {
		p.cx.c.Recycle(p.cx.seq)
	}
}

func handleProduce(s *Server, cx *reqCtx, kreq kmsg.Request) {
	req := kreq.(*kmsg.ProduceRequest)
	p := &produce{cx: cx, acks: req.Acks, resp: req.ResponseKind().(*kmsg.ProduceResponse)}
	p.resp.Topics = make([]kmsg.ProduceResponseTopic, len(req.Topics))
	for i := range req.Topics {
		rt := &req.Topics[i]
		t := &p.resp.Topics[i]
		t.Default()
		t.Topic, t.TopicID = rt.Topic, rt.TopicID
		t.Partitions = make([]kmsg.ProduceResponseTopicPartition, len(rt.Partitions))
		for j := range rt.Partitions {
			t.Partitions[j].Default()
			t.Partitions[j].Partition = rt.Partitions[j].Partition
		}
	}
	// Each partition slot of the response is written by exactly one
	// callback; the atomic countdown orders those writes before the
	// encoding by the last one.
	p.pending.Store(1)
	p.frameRefs.Store(1)

	// Request-wide refusals answer every partition with the same code.
	reqErr := func() (int16, string) {
		switch {
		case req.Version < produceMagicMinVersion:
			return kerr.UnsupportedVersion.Code, fmt.Sprintf("produce v%d carries message sets; ringlog stores RecordBatch v2 only (produce v3+)", req.Version)
		case req.TransactionID != nil && !s.authorize(cx, acl.OpWrite, acl.ResourceTransactionalID, *req.TransactionID):
			return kerr.TransactionalIDAuthorizationFailed.Code, kerr.TransactionalIDAuthorizationFailed.Message
		case req.TransactionID != nil && s.cfg.Txns == nil:
			// A broker without a transaction coordinator (a Server built
			// without one). The error must be one that clients do not
			// retry: TRANSACTIONAL_ID_AUTHORIZATION_FAILED is fatal to a
			// transactional producer in the Java client and in franz-go,
			// where a retriable code such as COORDINATOR_NOT_AVAILABLE
			// would make the client spin.
			return kerr.TransactionalIDAuthorizationFailed.Code, "this broker has no transaction coordinator"
		case req.Acks != 0 && req.Acks != 1 && req.Acks != -1:
			return kerr.InvalidRequiredAcks.Code, fmt.Sprintf("acks %d: want -1, 0 or 1", req.Acks)
		}
		return 0, ""
	}
	if code, msg := reqErr(); code != 0 {
		for i := range p.resp.Topics {
			for j := range p.resp.Topics[i].Partitions {
				p.fail(&p.resp.Topics[i].Partitions[j], code, msg)
			}
		}
		p.finish()
		p.unrefFrame()
		return
	}

	// A connection's produce requests reach the engine in the order they
	// came (an idempotent producer pipelines them, and its sequence
	// numbers must arrive in order): one waiting for its verification
	// holds back those after it.
	var order *produceOrder
	if cx.session != nil {
		order = &cx.session.produces
	}
	if req.TransactionID == nil {
		order.run(func() { s.produceVerified(cx, req, p, nil, false) })
		return
	}
	// KIP-890 part 1: the transaction coordinator must know every
	// partition a transactional batch goes to, or the batch would open a
	// transaction on it that nothing ends.
	slot := order.wait()
	// The coordinator's answer (maybe another broker's) is a wait on
	// others: RemoteTime, as Kafka counts its produce verification.
	cx.park()
	s.verifyTxnProduce(req, func(refused map[engine.TP]int16, ongoing bool) {
		order.ready(slot, func() {
			cx.resume()
			s.produceVerified(cx, req, p, refused, ongoing)
		})
	})
}

// produceVerified appends the partitions of req, but those refused (with
// their code) by the transaction coordinator's verification; ongoing: the
// coordinator was not asked, as the producer's transaction was open on
// every partition (verifyTxnProduce).
func (s *Server) produceVerified(cx *reqCtx, req *kmsg.ProduceRequest, p *produce, refused map[engine.TP]int16, ongoing bool) {
	opts := engine.AppendOptions{RequireISR: req.Acks == -1, OngoingTxn: ongoing}
	if req.Acks == -1 && s.parkingTimed() {
		opts.Written = func() { p.parkedAt.Store(now()) }
	}
	if req.Acks == -1 {
		// An acks=all answer waits for the in-sync replicas, at most the
		// request's timeout.ms (Kafka's produce purgatory).
		n := 0
		for i := range req.Topics {
			n += len(req.Topics[i].Partitions)
		}
		p.answered = make([]atomic.Bool, n)
	}
	// The partitions go to the engine together, so that each shard is
	// woken once per request rather than once per partition.
	var items []engine.AppendItem
	var outs []*kmsg.ProduceResponseTopicPartition // per item, for timeout
	for i := range req.Topics {
		rt := &req.Topics[i]
		t := &p.resp.Topics[i]
		name := rt.Topic
		if req.Version >= 13 {
			// KIP-516: v13 names topics by id only.
			info, ok := s.eng.TopicByID(rt.TopicID)
			if !ok {
				for j := range t.Partitions {
					p.fail(&t.Partitions[j], kerr.UnknownTopicID.Code, "unknown topic id")
				}
				continue
			}
			name = info.Name
		}
		if !s.authorize(cx, acl.OpWrite, acl.ResourceTopic, name) {
			for j := range t.Partitions {
				p.fail(&t.Partitions[j], kerr.TopicAuthorizationFailed.Code, "")
			}
			continue
		}
		for j := range rt.Partitions {
			rp := &rt.Partitions[j]
			out := &t.Partitions[j]
			if name == group.OffsetsTopic {
				// Only the coordinator writes its topic, as in Kafka: a
				// client's record there would be replayed as group state.
				p.fail(out, kerr.InvalidTopicException.Code, "cannot append to internal topic "+name)
				continue
			}
			if code, msg := checkProduceBatches(rp.Records, req.TransactionID != nil); code != 0 {
				p.fail(out, code, msg)
				continue
			}
			if code := refused[engine.TP{Topic: name, Partition: rp.Partition}]; code != 0 {
				p.fail(out, code, "the transaction coordinator does not have this partition in the producer's transaction")
				continue
			}
			p.pending.Add(1)
			p.frameRefs.Add(1)
			slot := len(items)
			tp := engine.TP{Topic: name, Partition: rp.Partition}
			items = append(items, engine.AppendItem{TP: tp, Records: rp.Records,
				// The shard calls Done on its goroutine: a panic there
				// would stop the shard, so run catches it and closes the
				// connection, as for any handler.
				Done: func(r engine.AppendResult, err error) {
					s.run(cx, func() { p.appended(s, tp, slot, out, r, err) })
				}})
			if p.answered != nil {
				outs = append(outs, out)
			}
		}
	}
	if p.answered != nil && len(items) > 0 {
		p.timer = time.AfterFunc(time.Duration(max(req.TimeoutMillis, 0))*time.Millisecond, func() { p.timeout(outs) })
	}
	if len(items) > 0 {
		var n int64
		for i := range items {
			n += int64(len(items[i].Records))
		}
		if d := s.throttle(cx, quotaProduce, n); d > 0 {
			p.resp.ThrottleMillis = int32(d.Milliseconds())
		}
	}
	s.eng.AppendBatch(items, opts)
	p.finish()
	p.unrefFrame()
}

// timeout answers the partitions of an acks=all request that the engine
// has not answered by the request's timeout.ms with REQUEST_TIMED_OUT, as
// Kafka's purgatory does: the records were appended on the leader and may
// yet be committed, or not. outs[i] is the response slot of items[i].
func (p *produce) timeout(outs []*kmsg.ProduceResponseTopicPartition) {
	for i, out := range outs {
		if !p.answered[i].Swap(true) {
			p.fail(out, kerr.RequestTimedOut.Code, "the in-sync replicas did not acknowledge the records within the request's timeout")
			p.finish()
		}
	}
}

// logStartOnError reports whether Kafka tells the log start offset with an
// error: it does for what the partition's log refused while appending (a
// sequence or epoch an idempotent producer got wrong, an invalid record or
// timestamp, too few in-sync replicas), not for requests that never reached
// a log (unknown or moved partitions) nor for batches refused by their size
// or damage (MESSAGE_TOO_LARGE, CORRUPT_MESSAGE), nor for a storage error
// (internal/difftest compares this with Apache Kafka).
func logStartOnError(code int16) bool {
	switch code {
	case kerr.OutOfOrderSequenceNumber.Code, kerr.InvalidProducerEpoch.Code, kerr.InvalidRecord.Code,
		kerr.InvalidTimestamp.Code, kerr.NotEnoughReplicas.Code:
		return true
	}
	return false
}

// fail records a partition's error. Kafka answers a failed partition with
// base offset -1 and, but for the errors of logStartOnError, no log start
// offset.
func (p *produce) fail(out *kmsg.ProduceResponseTopicPartition, code int16, msg string) {
	out.ErrorCode = code
	out.BaseOffset = -1
	out.LogAppendTime = -1
	out.LogStartOffset = -1
	if msg != "" {
		out.ErrorMessage = &msg // v8+ (KIP-467); older versions omit it
	}
	p.failed.Store(true)
}

// recordErrors names the records of a refused batch (v8+, KIP-467), with
// Kafka's message for the whole partition: a client shows it, and the
// records' own messages say what each did wrong.
func recordErrors(out *kmsg.ProduceResponseTopicPartition, re *engine.RecordsError) {
	out.ErrorRecords = make([]kmsg.ProduceResponseTopicPartitionErrorRecord, len(re.Records))
	for i, r := range re.Records {
		er := &out.ErrorRecords[i]
		er.Default()
		er.RelativeOffset, er.ErrorMessage = r.BatchIndex, kmsg.StringPtr(r.Message)
	}
	msg := "One or more records have been rejected due to invalid timestamp"
	if !errors.Is(re, engine.ErrInvalidTimestamp) {
		msg = fmt.Sprintf("One or more records have been rejected due to %d record errors", len(re.Records))
	}
	out.ErrorMessage = &msg
}

// finish counts down one partition (or the handler's own hold) and sends
// the response after the last. It runs on a shard goroutine or the network
// goroutine and must not block: encoding and Reply do not.
func (p *produce) finish() {
	if p.pending.Add(-1) != 0 {
		return
	}
	if p.timer != nil {
		p.timer.Stop()
	}
	if at := p.parkedAt.Load(); at != 0 {
		p.cx.times.parkedAt = at // waiting for the ISR since, until now
	}
	if p.acks == 0 {
		p.cx.noReply()
		if p.failed.Load() {
			// Kafka closes the connection of an acks=0 producer whose
			// produce failed: with no response, losing the connection is
			// the only way the client learns to refresh its metadata.
			p.cx.c.Close()
		}
		return
	}
	p.cx.reply(p.resp)
}

// produceErrorCode is errorCode with Produce's own readings.
func produceErrorCode(err error) int16 {
	if errors.Is(err, batch.ErrMagic) {
		// A message set (magic 0 or 1) inside a v3+ request.
		return kerr.UnsupportedVersion.Code
	}
	return errorCode(err)
}

// checkProduceBatches looks at the headers of a partition's records for
// what the engine would accept but this broker must refuse: a message set
// of magic 0 or 1 (whose layout the engine would misjudge as a damaged
// batch, CORRUPT_MESSAGE, where the truth is UNSUPPORTED_VERSION), and a
// transactional batch in a request without a transactional id (Kafka
// answers TRANSACTIONAL_ID_AUTHORIZATION_FAILED: the transaction is
// nobody's), or a control batch (only the broker writes markers). It reads
// headers only; the engine validates the rest (framing, CRC, records).
func checkProduceBatches(records []byte, transactionalID bool) (int16, string) {
	for pos := 0; pos < len(records); {
		rest := records[pos:]
		// The magic byte sits at the same place in every message format.
		if len(rest) <= batch.MagicPos {
			return 0, ""
		}
		if m := int8(rest[batch.MagicPos]); m != batch.MagicV2 {
			return kerr.UnsupportedVersion.Code, fmt.Sprintf("record batch magic %d at byte %d: ringlog stores magic 2 only", m, pos)
		}
		h, err := batch.ParseHeader(rest)
		if err != nil {
			return 0, "" // the engine reports it
		}
		if h.Transactional() && !transactionalID {
			return kerr.TransactionalIDAuthorizationFailed.Code, "transactional record batch in a produce request without a transactional id"
		}
		if h.Control() {
			return kerr.InvalidRecord.Code, "control batch: only the broker writes transaction markers"
		}
		if h.Size() > len(rest) {
			return 0, ""
		}
		pos += h.Size()
	}
	return 0, ""
}

// Sizes of the structures that decoding and answering a Produce request
// allocate per topic and per partition.
const (
	produceTopicCost     = int(unsafe.Sizeof(kmsg.ProduceRequestTopic{}) + unsafe.Sizeof(kmsg.ProduceResponseTopic{}))
	producePartitionCost = int(unsafe.Sizeof(kmsg.ProduceRequestTopicPartition{}) + unsafe.Sizeof(kmsg.ProduceResponseTopicPartition{}))
	// tagCost is the price of one unknown tagged field, which kmsg keeps in
	// a map: 100 to 160 bytes measured, the map's growth included.
	tagCost = 160
)

// checkProduceShape walks a Produce body the way kmsg will decode it and
// adds up what decoding and answering it will allocate, before any of it
// is allocated. A Produce request may be as large as a frame (100 MiB),
// and kmsg allocates an array as soon as it reads its count, bounded only
// by the bytes left: 100 MiB of two-byte topic entries would cost gigabytes
// of structures. The structures of a Produce request are held to
// MaxRequestBytes, the limit every other request has for its whole size;
// the records themselves are not copied (kmsg aliases them). kwire reads
// by kmsg's rules, so the walk and the decoding agree on every count.
func checkProduceShape(s *Server, version int16, body []byte) error {
	budget := s.cfg.MaxRequestBytes
	flexible := version >= 9
	r := kwire.NewReader(body, flexible)
	spend := func(count, cost int) bool {
		n := max(count, 0)
		if n > budget/cost {
			return false
		}
		budget -= n * cost
		return true
	}
	tags := func() bool { return !flexible || spend(r.Tags(), tagCost) }
	if version >= 3 {
		r.NullableStr() // transactional_id
	}
	r.Skip(2 + 4) // acks, timeout
	topics := r.ArrayLen()
	if !spend(int(topics), produceTopicCost) {
		return fmt.Errorf("%w: produce with %d topics", errBadRequest, topics)
	}
	for i := int32(0); i < topics && !r.Bad(); i++ {
		if version >= 13 {
			r.UUID()
		} else {
			r.Str()
		}
		parts := r.ArrayLen()
		if !spend(int(parts), producePartitionCost) {
			return fmt.Errorf("%w: produce with %d partitions in one topic", errBadRequest, parts)
		}
		for j := int32(0); j < parts && !r.Bad(); j++ {
			r.Skip(4) // partition
			r.NullableBytes()
			if !tags() {
				return fmt.Errorf("%w: produce with too many tagged fields", errBadRequest)
			}
		}
		if !tags() {
			return fmt.Errorf("%w: produce with too many tagged fields", errBadRequest)
		}
	}
	if !tags() {
		return fmt.Errorf("%w: produce with too many tagged fields", errBadRequest)
	}
	if r.Bad() {
		return fmt.Errorf("%w: malformed produce v%d", errBadRequest, version)
	}
	return nil
}

// appended answers one partition of the request once the engine has its
// append's result (Done, on the shard's goroutine).
func (p *produce) appended(s *Server, tp engine.TP, slot int, out *kmsg.ProduceResponseTopicPartition, r engine.AppendResult, err error) {
	if err != nil {
		p.frameKept.Store(true)
	}
	defer p.unrefFrame()
	if p.answered != nil && p.answered[slot].Swap(true) {
		return // timed out and answered already
	}
	if err != nil {
		code := produceErrorCode(err)
		p.fail(out, code, err.Error())
		if re, ok := engine.AsRecordsError(err); ok {
			recordErrors(out, re)
		}
		if logStartOnError(code) {
			if st, err := s.eng.State(tp); err == nil {
				out.LogStartOffset = st.LogStartOffset
			}
		}
	} else {
		out.BaseOffset = r.BaseOffset
		out.LogAppendTime = r.LogAppendTime
		out.LogStartOffset = r.LogStartOffset
	}
	p.finish()
}
