package kafka_test

import (
	"context"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"ringlog/engine"
	"ringlog/kafka"
)

// TestListOffsetsByTimeKadm produces records with known timestamps and
// looks offsets up by time, earliest and latest through kadm (ListOffsets
// as franz-go's admin client sends it), on both I/O paths.
func TestListOffsetsByTimeKadm(t *testing.T) {
	ioPaths(t, brokerOpts{}, func(t *testing.T, b *testBroker) {
		createTopic(t, b, "times", 2, nil)
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		cl := b.client(kgo.DefaultProduceTopic("times"), kgo.RecordPartitioner(kgo.ManualPartitioner()))
		base := time.Now().Add(-time.Hour).Truncate(time.Second)
		// Partition 0: offsets 0..9 at base + i seconds, one per request so
		// that each batch has its own timestamp range.
		for i := range 10 {
			r := &kgo.Record{Partition: 0, Value: []byte("v"), Timestamp: base.Add(time.Duration(i) * time.Second)}
			if err := cl.ProduceSync(ctx, r).FirstErr(); err != nil {
				t.Fatal(err)
			}
		}
		adm := b.admin()
		for _, c := range []struct {
			at   time.Time
			want int64
		}{
			{base.Add(-time.Minute), 0},
			{base, 0},
			{base.Add(3 * time.Second), 3},
			{base.Add(3*time.Second + time.Millisecond), 4},
			{base.Add(9 * time.Second), 9},
			{base.Add(time.Minute), 10}, // after every record: kadm turns -1 into the end offset
		} {
			res, err := adm.ListOffsetsAfterMilli(ctx, c.at.UnixMilli(), "times")
			if err != nil || res.Error() != nil {
				t.Fatal(err, res.Error())
			}
			got, _ := res.Lookup("times", 0)
			if got.Offset != c.want {
				t.Errorf("after %v: offset %d, want %d", c.at.Sub(base), got.Offset, c.want)
			}
			if empty, _ := res.Lookup("times", 1); empty.Offset != 0 {
				t.Errorf("empty partition by time: offset %d, want its end, 0", empty.Offset)
			}
		}

		if _, err := b.Engine.DeleteRecords(engine.TP{Topic: "times", Partition: 0}, 4); err != nil {
			t.Fatal(err)
		}
		starts, err := adm.ListStartOffsets(ctx, "times")
		if err != nil || starts.Error() != nil {
			t.Fatal(err, starts.Error())
		}
		ends, err := adm.ListEndOffsets(ctx, "times")
		if err != nil || ends.Error() != nil {
			t.Fatal(err, ends.Error())
		}
		s0, _ := starts.Lookup("times", 0)
		e0, _ := ends.Lookup("times", 0)
		e1, _ := ends.Lookup("times", 1)
		if s0.Offset != 4 || e0.Offset != 10 || e1.Offset != 0 {
			t.Fatalf("start %d end %d, empty end %d; want 4, 10, 0", s0.Offset, e0.Offset, e1.Offset)
		}
		if e0.LeaderEpoch != 0 {
			t.Fatalf("leader epoch %d", e0.LeaderEpoch)
		}
	})
}

func listOffsetsPart(t testing.TB, resp kmsg.Response) kmsg.ListOffsetsResponseTopicPartition {
	t.Helper()
	r := resp.(*kmsg.ListOffsetsResponse)
	if len(r.Topics) != 1 || len(r.Topics[0].Partitions) != 1 {
		t.Fatalf("list offsets response shape: %+v", r)
	}
	return r.Topics[0].Partitions[0]
}

// TestListOffsetsSpecial covers the special timestamps, versions and error
// paths.
func TestListOffsetsSpecial(t *testing.T) {
	b := startBroker(t, brokerOpts{})
	createTopic(t, b, "lo", 1, nil)
	w := dialWire(t, b.Addr)
	now := time.Now().UnixMilli()
	// Three batches; the middle one carries the largest timestamp.
	for i, ts := range []int64{now - 3000, now - 1000, now - 2000} {
		bt := kafka.MakeBatch(t, "x", 2, -1, 0)
		h := kafka.MustHeader(t, bt)
		h.BaseTimestamp, h.MaxTimestamp = ts, ts
		bt, _ = kafka.EncodeBatch(h, bt)
		if p := producePart(t, w.roundTrip(kafka.ProduceReq(9, 1, "lo", 0, bt))); p.ErrorCode != 0 || p.BaseOffset != int64(2*i) {
			t.Fatalf("produce %d: %+v", i, p)
		}
	}
	for _, c := range []struct {
		name    string
		version int16
		ts      int64
		offset  int64
		stamp   int64
	}{
		{"latest v1", 1, -1, 6, -1},
		{"earliest v1", 1, -2, 0, -1},
		{"latest v11", 11, -1, 6, -1},
		{"max timestamp", 7, -3, 2, now - 1000},
		{"earliest local", 8, -4, 0, -1},
		{"latest tiered", 9, -5, -1, -1},
		{"by time", 4, now - 1500, 2, now - 1000},
		{"future", 4, now + 60_000, -1, -1},
	} {
		p := listOffsetsPart(t, w.roundTrip(kafka.ListOffsetsReq(c.version, "lo", 0, c.ts)))
		if p.ErrorCode != 0 || p.Offset != c.offset || p.Timestamp != c.stamp {
			t.Errorf("%s: code %d offset %d timestamp %d, want offset %d timestamp %d", c.name, p.ErrorCode, p.Offset, p.Timestamp, c.offset, c.stamp)
		}
		if c.version >= 4 && c.offset >= 0 && p.LeaderEpoch != 0 {
			t.Errorf("%s: leader epoch %d", c.name, p.LeaderEpoch)
		}
	}

	// Errors, per partition.
	check := func(name string, req *kmsg.ListOffsetsRequest, want int16) {
		t.Helper()
		for _, rt := range w.roundTrip(req).(*kmsg.ListOffsetsResponse).Topics {
			for _, p := range rt.Partitions {
				if p.ErrorCode != want {
					t.Errorf("%s: %s-%d code %d, want %d", name, rt.Topic, p.Partition, p.ErrorCode, want)
				}
			}
		}
	}
	check("unknown topic", kafka.ListOffsetsReq(5, "nope", 0, -1), kerr.UnknownTopicOrPartition.Code)
	check("unknown partition", kafka.ListOffsetsReq(5, "lo", 3, -1), kerr.UnknownTopicOrPartition.Code)
	check("bad timestamp", kafka.ListOffsetsReq(5, "lo", 0, -17), kerr.InvalidRequest.Code)
	future := kafka.ListOffsetsReq(5, "lo", 0, -1)
	future.Topics[0].Partitions[0].CurrentLeaderEpoch = 4
	check("newer leader epoch", future, kerr.UnknownLeaderEpoch.Code)
	current := kafka.ListOffsetsReq(5, "lo", 0, -1)
	current.Topics[0].Partitions[0].CurrentLeaderEpoch = 0
	check("current leader epoch", current, 0)
	dup := kafka.ListOffsetsReq(5, "lo", 0, -1)
	dup.Topics[0].Partitions = append(dup.Topics[0].Partitions, dup.Topics[0].Partitions[0])
	check("duplicate partition", dup, kerr.InvalidRequest.Code)
	iso := kafka.ListOffsetsReq(5, "lo", 0, -1)
	iso.IsolationLevel = 1
	check("read committed", iso, 0)
	iso.IsolationLevel = 3
	check("bad isolation level", iso, kerr.InvalidRequest.Code)

	// v0 is not served: the connection is closed.
	w.send(kafka.ListOffsetsReq(0, "lo", 0, -1))
	w.expectClosed()
}

// TestOffsetForLeaderEpoch: where epochs end, on every version, and the
// current leader epoch checks.
func TestOffsetForLeaderEpoch(t *testing.T) {
	b := startBroker(t, brokerOpts{})
	createTopic(t, b, "ep", 2, nil)
	w := dialWire(t, b.Addr)
	if p := producePart(t, w.roundTrip(kafka.ProduceReq(9, 1, "ep", 0, kafka.MakeBatch(t, "e", 4, -1, 0)))); p.ErrorCode != 0 {
		t.Fatal(p)
	}
	for _, c := range []struct {
		name           string
		version        int16
		partition      int32
		current, epoch int32
		code           int16
		endEpoch       int32
		endOffset      int64
	}{
		{"current epoch", 4, 0, -1, 0, 0, 0, 4},
		{"current epoch v0", 0, 0, -1, 0, 0, 0, 4},
		{"current epoch v2 checked", 2, 0, 0, 0, 0, 0, 4},
		{"unknown newer epoch", 3, 0, -1, 5, 0, -1, -1},
		{"empty partition", 4, 1, -1, 0, 0, 0, 0},
		{"client ahead", 4, 0, 2, 0, kerr.UnknownLeaderEpoch.Code, -1, -1},
		{"unknown partition", 4, 9, -1, 0, kerr.UnknownTopicOrPartition.Code, -1, -1},
	} {
		resp := w.roundTrip(kafka.OffsetForEpochReq(c.version, "ep", c.partition, c.current, c.epoch)).(*kmsg.OffsetForLeaderEpochResponse)
		p := resp.Topics[0].Partitions[0]
		wantEpoch := c.endEpoch
		if c.version == 0 {
			wantEpoch = -1 // v0 has no leader epoch field: it decodes as its default
		}
		if p.ErrorCode != c.code || p.EndOffset != c.endOffset || p.LeaderEpoch != wantEpoch {
			t.Errorf("%s: code %d epoch %d end %d, want %d %d %d", c.name, p.ErrorCode, p.LeaderEpoch, p.EndOffset, c.code, wantEpoch, c.endOffset)
		}
	}
	resp := w.roundTrip(kafka.OffsetForEpochReq(4, "nope", 0, -1, 0)).(*kmsg.OffsetForLeaderEpochResponse)
	if resp.Topics[0].Partitions[0].ErrorCode != kerr.UnknownTopicOrPartition.Code {
		t.Errorf("unknown topic: %+v", resp.Topics[0].Partitions[0])
	}
}

// TestInitProducerID: idempotent producer ids on every version, distinct,
// never reused after a restart.
func TestInitProducerID(t *testing.T) {
	b := startBroker(t, brokerOpts{})
	seen := map[int64]bool{}
	get := func(w *wireConn, v int16, txn *string) *kmsg.InitProducerIDResponse {
		req := kmsg.NewPtrInitProducerIDRequest()
		req.Version, req.TransactionalID = v, txn
		if txn != nil {
			req.TransactionTimeoutMillis = 60000
		}
		return w.roundTrip(req).(*kmsg.InitProducerIDResponse)
	}
	w := dialWire(t, b.Addr)
	for v := int16(0); v <= 5; v++ {
		r := get(w, v, nil)
		if r.ErrorCode != 0 || r.ProducerEpoch != 0 || r.ProducerID < 0 || seen[r.ProducerID] {
			t.Fatalf("v%d: %+v", v, r)
		}
		seen[r.ProducerID] = true
	}
	// Refusals name no producer: id and epoch -1, as Kafka answers. A
	// transactional id goes to its coordinator, which this broker is not
	// before __transaction_state exists (a client asks FindCoordinator
	// first); engine/txn and txn_e2e_test.go test the rest.
	if r := get(w, 4, kmsg.StringPtr("tx")); r.ErrorCode != kerr.NotCoordinator.Code || r.ProducerID != -1 || r.ProducerEpoch != -1 {
		t.Fatalf("transactional id: %+v", r)
	}
	if r := get(w, 4, kmsg.StringPtr("")); r.ErrorCode != kerr.InvalidRequest.Code || r.ProducerID != -1 || r.ProducerEpoch != -1 {
		t.Fatalf("empty transactional id: %+v", r)
	}
	// A new broker on the same data, on a new port: Restart's reuse of the
	// port is not what is tested here.
	dir := b.dir
	b.Stop()
	b = startBroker(t, brokerOpts{Dir: dir})
	w = dialWire(t, b.Addr)
	r := get(w, 5, nil)
	if r.ErrorCode != 0 || seen[r.ProducerID] {
		t.Fatalf("after restart: %+v (ids before: %v)", r, seen)
	}
}
