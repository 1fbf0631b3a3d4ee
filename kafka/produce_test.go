package kafka_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"ringlog/engine"
	"ringlog/kafka"
	"ringlog/segment/batch"
)

// ioPaths runs fn against a broker on each I/O path: io_uring with gnet
// (where the machine has them) and portable.
func ioPaths(t *testing.T, opts brokerOpts, fn func(t *testing.T, b *testBroker)) {
	for _, portable := range []bool{false, true} {
		name := "default"
		if portable {
			name = "portable"
		}
		t.Run(name, func(t *testing.T) {
			o := opts
			o.Portable = portable
			fn(t, startBroker(t, o))
		})
	}
}

// readValues reads a partition's records back through the engine, from
// the files the broker serves fetches from.
func readValues(t testing.TB, b *testBroker, tp engine.TP) []string {
	t.Helper()
	res, err := b.Engine.Read(tp, 0, 64<<20, true, engine.ReadUncommitted)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Release()
	var out []string
	for _, r := range res.Regions {
		buf := make([]byte, r.Len)
		if err := r.ReadAt(buf); err != nil {
			t.Fatal(err)
		}
		it := batch.Split(buf)
		for it.Next() {
			h, err := batch.Validate(it.Batch(), batch.Stored)
			if err != nil {
				t.Fatal(err)
			}
			if err := batch.Records(h, it.Batch(), 64<<20, func(r *batch.Record) error {
				out = append(out, string(r.Value))
				return nil
			}); err != nil {
				t.Fatal(err)
			}
		}
		if err := it.Err(); err != nil {
			t.Fatal(err)
		}
	}
	return out
}

// TestProduceKgoIdempotent produces with franz-go's defaults (idempotent,
// acks=all, several requests in flight) to several partitions and checks
// every record is there once, in order, through ListOffsets and the log.
func TestProduceKgoIdempotent(t *testing.T) {
	ioPaths(t, brokerOpts{}, func(t *testing.T, b *testBroker) {
		const parts, perPart = 4, 600
		createTopic(t, b, "idem", parts, nil)
		cl := b.client(kgo.DefaultProduceTopic("idem"), kgo.RecordPartitioner(kgo.ManualPartitioner()),
			kgo.ProducerLinger(time.Millisecond))
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		errs := make(chan error, parts*perPart)
		for i := range perPart {
			for p := range int32(parts) {
				r := &kgo.Record{Partition: p, Value: []byte(fmt.Sprintf("p%d-%d", p, i))}
				cl.Produce(ctx, r, func(r *kgo.Record, err error) { errs <- err })
			}
		}
		for range parts * perPart {
			if err := <-errs; err != nil {
				t.Fatal(err)
			}
		}

		adm := b.admin()
		ends, err := adm.ListEndOffsets(ctx, "idem")
		if err != nil || ends.Error() != nil {
			t.Fatal(err, ends.Error())
		}
		starts, err := adm.ListStartOffsets(ctx, "idem")
		if err != nil || starts.Error() != nil {
			t.Fatal(err, starts.Error())
		}
		for p := range int32(parts) {
			end, _ := ends.Lookup("idem", p)
			start, _ := starts.Lookup("idem", p)
			if end.Offset != perPart || start.Offset != 0 {
				t.Errorf("partition %d: offsets [%d, %d), want [0, %d)", p, start.Offset, end.Offset, perPart)
			}
			got := readValues(t, b, engine.TP{Topic: "idem", Partition: p})
			if len(got) != perPart {
				t.Fatalf("partition %d: %d records in the log, want %d", p, len(got), perPart)
			}
			for i, v := range got {
				if want := fmt.Sprintf("p%d-%d", p, i); v != want {
					t.Fatalf("partition %d offset %d: %q, want %q", p, i, v, want)
				}
			}
		}
	})
}

// initProducerID asks the broker for an idempotent producer id.
func initProducerID(t testing.TB, w *wireConn) int64 {
	t.Helper()
	req := kmsg.NewPtrInitProducerIDRequest()
	req.Version = 4
	resp := w.roundTrip(req).(*kmsg.InitProducerIDResponse)
	if resp.ErrorCode != 0 || resp.ProducerID < 0 || resp.ProducerEpoch != 0 {
		t.Fatalf("InitProducerId: code %d, id %d, epoch %d", resp.ErrorCode, resp.ProducerID, resp.ProducerEpoch)
	}
	return resp.ProducerID
}

func producePart(t testing.TB, resp kmsg.Response) kmsg.ProduceResponseTopicPartition {
	t.Helper()
	r := resp.(*kmsg.ProduceResponse)
	if len(r.Topics) != 1 || len(r.Topics[0].Partitions) != 1 {
		t.Fatalf("produce response shape: %+v", r)
	}
	return r.Topics[0].Partitions[0]
}

// TestProduceDuplicateRetry sends the same idempotent batch twice, as a
// producer retrying after a lost response does: the second answer carries
// the first one's offset and nothing is written twice. A sequence gap is
// OUT_OF_ORDER_SEQUENCE_NUMBER.
func TestProduceDuplicateRetry(t *testing.T) {
	b := startBroker(t, brokerOpts{})
	createTopic(t, b, "dup", 1, nil)
	tp := engine.TP{Topic: "dup", Partition: 0}
	w := dialWire(t, b.Addr)
	pid := initProducerID(t, w)

	first := producePart(t, w.roundTrip(kafka.ProduceReq(9, -1, "dup", 0, kafka.MakeBatch(t, "a", 3, pid, 0))))
	if first.ErrorCode != 0 || first.BaseOffset != 0 || first.LogStartOffset != 0 {
		t.Fatalf("first produce: %+v", first)
	}
	second := producePart(t, w.roundTrip(kafka.ProduceReq(9, -1, "dup", 0, kafka.MakeBatch(t, "a", 3, pid, 0))))
	if second.ErrorCode != 0 || second.BaseOffset != first.BaseOffset {
		t.Fatalf("retried produce: code %d, base offset %d, want 0 and %d", second.ErrorCode, second.BaseOffset, first.BaseOffset)
	}
	if st, _ := b.Engine.State(tp); st.LEO != 3 {
		t.Fatalf("log end offset %d after a duplicate, want 3", st.LEO)
	}

	next := producePart(t, w.roundTrip(kafka.ProduceReq(9, -1, "dup", 0, kafka.MakeBatch(t, "b", 2, pid, 3))))
	if next.ErrorCode != 0 || next.BaseOffset != 3 {
		t.Fatalf("next in sequence: %+v", next)
	}
	gap := producePart(t, w.roundTrip(kafka.ProduceReq(9, -1, "dup", 0, kafka.MakeBatch(t, "c", 1, pid, 10))))
	if gap.ErrorCode != kerr.OutOfOrderSequenceNumber.Code || gap.BaseOffset != -1 {
		t.Fatalf("sequence gap: code %d base %d, want %d", gap.ErrorCode, gap.BaseOffset, kerr.OutOfOrderSequenceNumber.Code)
	}
	if gap.LogStartOffset != 0 {
		t.Errorf("sequence gap: log start offset %d, want 0 (Kafka's answer)", gap.LogStartOffset)
	}
	if gap.ErrorMessage == nil {
		t.Error("v9 error carries no message")
	}
	if st, _ := b.Engine.State(tp); st.LEO != 5 {
		t.Fatalf("log end offset %d, want 5", st.LEO)
	}

	// Epoch fencing: once epoch 1 has written, epoch 0 is refused; a new
	// epoch starts its sequence at 0.
	withEpoch := func(b []byte, epoch int16) []byte {
		h := kafka.MustHeader(t, b)
		h.ProducerEpoch = epoch
		out, err := kafka.EncodeBatch(h, b)
		if err != nil {
			t.Fatal(err)
		}
		return out
	}
	if p := producePart(t, w.roundTrip(kafka.ProduceReq(9, -1, "dup", 0, withEpoch(kafka.MakeBatch(t, "d", 1, pid, 1), 1)))); p.ErrorCode != kerr.OutOfOrderSequenceNumber.Code {
		t.Fatalf("new epoch at sequence 1: code %d", p.ErrorCode)
	}
	if p := producePart(t, w.roundTrip(kafka.ProduceReq(9, -1, "dup", 0, withEpoch(kafka.MakeBatch(t, "d", 1, pid, 0), 1)))); p.ErrorCode != 0 || p.BaseOffset != 5 {
		t.Fatalf("new epoch at sequence 0: %+v", p)
	}
	if p := producePart(t, w.roundTrip(kafka.ProduceReq(9, -1, "dup", 0, kafka.MakeBatch(t, "d", 1, pid, 5)))); p.ErrorCode != kerr.InvalidProducerEpoch.Code {
		t.Fatalf("fenced epoch: code %d, want INVALID_PRODUCER_EPOCH", p.ErrorCode)
	}
}

// TestProduceAcksZero: no response for acks=0, and a closed connection
// when it fails (the only signal such a producer gets).
func TestProduceAcksZero(t *testing.T) {
	ioPaths(t, brokerOpts{}, func(t *testing.T, b *testBroker) {
		createTopic(t, b, "zero", 1, nil)
		w := dialWire(t, b.Addr)
		w.send(kafka.ProduceReq(7, 0, "zero", 0, kafka.MakeBatch(t, "z", 2, -1, 0)))
		// A Metadata request after it is answered first: nothing came for
		// the produce, and the connection is alive.
		md := kmsg.NewPtrMetadataRequest()
		md.Version = 1
		md.Topics = []kmsg.MetadataRequestTopic{}
		corr := w.send(md)
		w.recv(corr, md.ResponseKind())
		if st, _ := b.Engine.State(engine.TP{Topic: "zero", Partition: 0}); st.HW != 2 {
			t.Fatalf("high watermark %d after acks=0 produce, want 2", st.HW)
		}
		w.send(kafka.ProduceReq(7, 0, "zero", 0, kafka.MakeBatch(t, "z", 1, -1, 0)))
		w.expectNothing(100 * time.Millisecond)

		// Unknown partition: the connection is closed.
		w.send(kafka.ProduceReq(7, 0, "zero", 5, kafka.MakeBatch(t, "z", 1, -1, 0)))
		w.expectClosed()
	})
}

// TestProduceErrors covers the per-partition error codes clients act on.
func TestProduceErrors(t *testing.T) {
	b := startBroker(t, brokerOpts{})
	createTopic(t, b, "errs", 2, map[string]string{"max.message.bytes": "2000"})
	createTopic(t, b, "strict", 1, map[string]string{"min.insync.replicas": "2"})
	info, _ := b.Engine.Topic("errs")
	w := dialWire(t, b.Addr)
	good := func() []byte { return kafka.MakeBatch(t, "e", 1, -1, 0) }

	corrupt := good()
	corrupt[len(corrupt)-1] ^= 0xff // CRC no longer matches
	compressedBad := good()
	compressedBad[batch.AttributesPos+1] |= 7 // codec 7 does not exist
	batch.Encode(compressedBad[:0], kafka.MustHeader(t, compressedBad), compressedBad[batch.RecordsPos:])
	messageSet := good()
	messageSet[batch.MagicPos] = 1
	txn := kafka.MakeBatch(t, "t", 1, 5, 0)
	txnHdr := kafka.MustHeader(t, txn)
	txnHdr.Attributes |= batch.AttrTransactional
	txn, _ = batch.Encode(nil, txnHdr, txn[batch.RecordsPos:])
	big := kafka.MakeBatch(t, string(make([]byte, 3000)), 1, -1, 0)
	future := good()
	fh := kafka.MustHeader(t, future)
	fh.BaseTimestamp += 2 * 3600_000 // message.timestamp.after.max.ms is an hour
	fh.MaxTimestamp = fh.BaseTimestamp
	future, _ = kafka.EncodeBatch(fh, future)

	cases := []struct {
		name    string
		req     *kmsg.ProduceRequest
		code    int16
		written bool
	}{
		{"ok", kafka.ProduceReq(8, 1, "errs", 0, good()), 0, true},
		{"unknown topic", kafka.ProduceReq(8, 1, "nope", 0, good()), kerr.UnknownTopicOrPartition.Code, false},
		{"unknown partition", kafka.ProduceReq(8, 1, "errs", 7, good()), kerr.UnknownTopicOrPartition.Code, false},
		{"crc", kafka.ProduceReq(8, 1, "errs", 0, corrupt), kerr.CorruptMessage.Code, false},
		{"codec", kafka.ProduceReq(8, 1, "errs", 0, compressedBad), kerr.InvalidRecord.Code, false},
		{"null records", kafka.ProduceReq(8, 1, "errs", 0, nil), kerr.InvalidRecord.Code, false},
		{"too large", kafka.ProduceReq(8, 1, "errs", 0, big), kerr.MessageTooLarge.Code, false},
		{"timestamp too far ahead", kafka.ProduceReq(8, 1, "errs", 0, future), kerr.InvalidTimestamp.Code, false},
		{"magic 1 in v8", kafka.ProduceReq(8, 1, "errs", 0, messageSet), kerr.UnsupportedVersion.Code, false},
		{"produce v2", kafka.ProduceReq(2, 1, "errs", 0, good()), kerr.UnsupportedVersion.Code, false},
		{"produce v0", kafka.ProduceReq(0, 1, "errs", 0, good()), kerr.UnsupportedVersion.Code, false},
		{"acks 2", kafka.ProduceReq(8, 2, "errs", 0, good()), kerr.InvalidRequiredAcks.Code, false},
		{"transactional batch", kafka.ProduceReq(8, 1, "errs", 0, txn), kerr.TransactionalIDAuthorizationFailed.Code, false},
		// min.insync.replicas is capped at the replica count, as Kafka 4
		// caps it: one replica in sync of one is enough.
		{"acks all, min.insync.replicas 2 of one replica", kafka.ProduceReq(8, -1, "strict", 0, good()), 0, true},
		{"acks 1, min.insync.replicas 2", kafka.ProduceReq(8, 1, "strict", 0, good()), 0, true},
	}
	txnReq := kafka.ProduceReq(8, 1, "errs", 0, good())
	txnReq.TransactionID = kmsg.StringPtr("tx")
	cases = append(cases, struct {
		name    string
		req     *kmsg.ProduceRequest
		code    int16
		written bool
	}{"transactional id, records outside a transaction", txnReq, 0, true})
	v13 := kafka.ProduceReq(13, 1, "", 1, good())
	v13.Topics[0].TopicID = info.ID
	unknownID := kafka.ProduceReq(13, 1, "", 0, good())
	unknownID.Topics[0].TopicID = [16]byte{1, 2, 3}
	cases = append(cases, []struct {
		name    string
		req     *kmsg.ProduceRequest
		code    int16
		written bool
	}{{"v13 by id", v13, 0, true}, {"v13 unknown id", unknownID, kerr.UnknownTopicID.Code, false}}...)

	refusedByLog := map[string]bool{"codec": true, "null records": true, "timestamp too far ahead": true}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			p := producePart(t, w.roundTrip(c.req))
			if p.ErrorCode != c.code {
				t.Fatalf("error code %d (%v), want %d (%v)", p.ErrorCode, kerr.ErrorForCode(p.ErrorCode), c.code, kerr.ErrorForCode(c.code))
			}
			if c.written != (p.BaseOffset >= 0) {
				t.Fatalf("base offset %d", p.BaseOffset)
			}
			// The log start offset comes with success and with the errors
			// of the log's own checks, as Kafka answers (internal/difftest).
			wantStart := int64(-1)
			if c.written || refusedByLog[c.name] {
				wantStart = 0
			}
			if c.req.Version >= 5 && p.LogStartOffset != wantStart {
				t.Fatalf("log start offset %d, want %d", p.LogStartOffset, wantStart)
			}
			// A refused timestamp names the record (KIP-467), as Kafka does.
			if c.name == "timestamp too far ahead" && (len(p.ErrorRecords) != 1 || p.ErrorRecords[0].RelativeOffset != 0 ||
				p.ErrorMessage == nil || *p.ErrorMessage != "One or more records have been rejected due to invalid timestamp") {
				t.Fatalf("record errors %+v, message %v", p.ErrorRecords, p.ErrorMessage)
			}
			if c.req.Version == 13 && p.Partition != c.req.Topics[0].Partitions[0].Partition {
				t.Fatalf("partition %d", p.Partition)
			}
		})
	}
}

// TestProduceManyPartitionsOneRequest spans partitions on both shards: the
// response comes once, after the last partition's append, with every
// partition answered in request order.
func TestProduceManyPartitionsOneRequest(t *testing.T) {
	b := startBroker(t, brokerOpts{})
	createTopic(t, b, "wide", 8, nil)
	createTopic(t, b, "wide2", 3, nil)
	w := dialWire(t, b.Addr)
	req := kmsg.NewPtrProduceRequest()
	req.Version, req.Acks = 11, -1
	for _, topic := range []string{"wide", "wide2"} {
		rt := kmsg.NewProduceRequestTopic()
		rt.Topic = topic
		for p := int32(7); p >= 0; p-- { // reverse order, and 3..7 unknown in wide2
			rp := kmsg.NewProduceRequestTopicPartition()
			rp.Partition = p
			rp.Records = kafka.MakeBatch(t, topic, int(p)+1, -1, 0)
			rt.Partitions = append(rt.Partitions, rp)
		}
		req.Topics = append(req.Topics, rt)
	}
	resp := w.roundTrip(req).(*kmsg.ProduceResponse)
	if len(resp.Topics) != 2 {
		t.Fatalf("%d topics", len(resp.Topics))
	}
	for ti, rt := range resp.Topics {
		for i, p := range rt.Partitions {
			want := int32(7 - i)
			if p.Partition != want {
				t.Fatalf("%s: partition %d at %d, want %d", rt.Topic, p.Partition, i, want)
			}
			unknown := ti == 1 && want >= 3
			switch {
			case unknown && p.ErrorCode != kerr.UnknownTopicOrPartition.Code:
				t.Errorf("%s-%d: code %d, want UNKNOWN_TOPIC_OR_PARTITION", rt.Topic, want, p.ErrorCode)
			case !unknown && (p.ErrorCode != 0 || p.BaseOffset != 0):
				t.Errorf("%s-%d: code %d base %d", rt.Topic, want, p.ErrorCode, p.BaseOffset)
			}
		}
	}
	for p := range int32(8) {
		if st, _ := b.Engine.State(engine.TP{Topic: "wide", Partition: p}); st.HW != int64(p)+1 {
			t.Errorf("wide-%d: high watermark %d, want %d", p, st.HW, p+1)
		}
	}
}

// TestProduceLogAppendTime: a LogAppendTime topic reports the broker's
// timestamp in the response.
func TestProduceLogAppendTime(t *testing.T) {
	b := startBroker(t, brokerOpts{})
	createTopic(t, b, "lat", 1, map[string]string{"message.timestamp.type": "LogAppendTime"})
	w := dialWire(t, b.Addr)
	before := time.Now().UnixMilli()
	p := producePart(t, w.roundTrip(kafka.ProduceReq(9, 1, "lat", 0, kafka.MakeBatch(t, "l", 1, -1, 0))))
	if p.ErrorCode != 0 || p.LogAppendTime < before || p.LogAppendTime > time.Now().UnixMilli() {
		t.Fatalf("%+v: log append time not the broker's clock", p)
	}
	p = producePart(t, w.roundTrip(kafka.ProduceReq(9, 1, "idem-none", 0, kafka.MakeBatch(t, "l", 1, -1, 0))))
	if p.LogAppendTime != -1 || p.LogStartOffset != -1 {
		t.Fatalf("failed partition: %+v", p)
	}
}

func TestProduceToInternalTopicRefused(t *testing.T) {
	b := startBroker(t, brokerOpts{})
	cl := b.client(kgo.DefaultProduceTopic("__consumer_offsets"))
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	err := cl.ProduceSync(ctx, &kgo.Record{Key: []byte("k"), Value: []byte("forged group state")}).FirstErr()
	if !errors.Is(err, kerr.InvalidTopicException) {
		t.Fatalf("produce to __consumer_offsets: %v, want INVALID_TOPIC_EXCEPTION", err)
	}
}
