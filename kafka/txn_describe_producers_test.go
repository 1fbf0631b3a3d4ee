package kafka_test

import (
	"context"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// describeProducer asks kadm for the producers of partition 0 of topic and
// returns the one with producer id pid.
func describeProducer(t *testing.T, adm *kadm.Client, topic string, pid int64) kadm.DescribedProducer {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	s := make(kadm.TopicsSet)
	s.Add(topic, 0)
	ds, err := adm.DescribeProducers(ctx, s)
	if err != nil {
		t.Fatal(err)
	}
	p, ok := ds[topic].Partitions[0]
	if !ok || p.Err != nil {
		t.Fatalf("describe producers of %s-0: %+v", topic, p)
	}
	d, ok := p.ActiveProducers[pid]
	if !ok {
		t.Fatalf("producer %d not among %s-0's active producers: %+v", pid, topic, p.ActiveProducers)
	}
	return d
}

// TestDescribeProducers: kadm's DescribeProducers shows an idempotent
// producer's id, epoch, last sequence and timestamp; a transactional
// producer's open transaction by its first offset, and after the commit
// no open transaction, the coordinator epoch of the marker and the
// marker's timestamp.
func TestDescribeProducers(t *testing.T) {
	b := startBroker(t, brokerOpts{})
	createTopic(t, b, "dp-idem", 1, nil)
	createTopic(t, b, "dp-txn", 1, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	adm := b.admin()

	start := time.Now().UnixMilli()
	idem := b.client(kgo.DefaultProduceTopic("dp-idem"), kgo.MaxBufferedRecords(1))
	for _, v := range []string{"a", "b", "c"} {
		if err := idem.ProduceSync(ctx, &kgo.Record{Value: []byte(v)}).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	pid, epoch, err := idem.ProducerID(ctx)
	if err != nil {
		t.Fatal(err)
	}
	d := describeProducer(t, adm, "dp-idem", pid)
	if d.ProducerEpoch != epoch || d.LastSequence != 2 || d.CoordinatorEpoch != -1 || d.CurrentTxnStartOffset != -1 ||
		d.LastTimestamp < start || d.LastTimestamp > time.Now().UnixMilli() {
		t.Fatalf("idempotent producer %d epoch %d after 3 records from %d: %+v", pid, epoch, start, d)
	}

	// Two records first, outside the transaction's producer, so that the
	// transaction does not start at offset 0.
	if err := idem.ProduceSync(ctx, &kgo.Record{Topic: "dp-txn", Value: []byte("x")}, &kgo.Record{Topic: "dp-txn", Value: []byte("y")}).FirstErr(); err != nil {
		t.Fatal(err)
	}
	txn := b.client(kgo.TransactionalID("dp-txn-id"), kgo.DefaultProduceTopic("dp-txn"))
	if err := txn.BeginTransaction(); err != nil {
		t.Fatal(err)
	}
	r := &kgo.Record{Value: []byte("open")}
	if err := txn.ProduceSync(ctx, r).FirstErr(); err != nil {
		t.Fatal(err)
	}
	if err := txn.ProduceSync(ctx, &kgo.Record{Value: []byte("open2")}).FirstErr(); err != nil {
		t.Fatal(err)
	}
	tpid, tepoch, err := txn.ProducerID(ctx)
	if err != nil {
		t.Fatal(err)
	}
	d = describeProducer(t, adm, "dp-txn", tpid)
	if r.Offset != 2 || d.CurrentTxnStartOffset != r.Offset || d.ProducerEpoch != tepoch || d.LastSequence != 1 || d.CoordinatorEpoch != -1 {
		t.Fatalf("open transaction of producer %d epoch %d from offset %d: %+v", tpid, tepoch, r.Offset, d)
	}

	beforeCommit := time.Now().UnixMilli()
	if err := txn.EndTransaction(ctx, kgo.TryCommit); err != nil {
		t.Fatal(err)
	}
	// The marker is written after EndTxn is answered: wait for it.
	deadline := time.Now().Add(10 * time.Second)
	for d = describeProducer(t, adm, "dp-txn", tpid); d.CurrentTxnStartOffset != -1; d = describeProducer(t, adm, "dp-txn", tpid) {
		if time.Now().After(deadline) {
			t.Fatalf("transaction still open 10 s after its commit: %+v", d)
		}
		time.Sleep(20 * time.Millisecond)
	}
	// Transactions v2 write the marker at the epoch EndTxn bumped to
	// (KIP-890), which starts the producer's sequences over.
	if d.CoordinatorEpoch < 0 || d.ProducerEpoch != tepoch+1 || d.LastSequence != -1 || d.LastTimestamp < beforeCommit {
		t.Fatalf("after the commit (epoch %d, commit at %d): %+v", tepoch, beforeCommit, d)
	}
}

// TestDescribeProducersErrors: partitions this broker cannot describe get
// Kafka's codes, the others in the same request their producers.
func TestDescribeProducersErrors(t *testing.T) {
	b := startBroker(t, brokerOpts{})
	createTopic(t, b, "dp-err", 1, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cl := b.client(kgo.DefaultProduceTopic("dp-err"))
	if err := cl.ProduceSync(ctx, &kgo.Record{Value: []byte("v")}).FirstErr(); err != nil {
		t.Fatal(err)
	}
	req := kmsg.NewPtrDescribeProducersRequest()
	for _, tt := range []struct {
		topic string
		parts []int32
	}{{"dp-err", []int32{0, 1, -1}}, {"dp-missing", []int32{0}}, {"bad/name", []int32{0}}} {
		rt := kmsg.NewDescribeProducersRequestTopic()
		rt.Topic, rt.Partitions = tt.topic, tt.parts
		req.Topics = append(req.Topics, rt)
	}
	// To the broker itself: the client would route by leader and answer
	// the partitions without one on its own.
	resp, err := req.RequestWith(ctx, cl.DiscoveredBrokers()[0])
	if err != nil {
		t.Fatal(err)
	}
	want := map[string][]int16{
		"dp-err":     {0, kerr.UnknownTopicOrPartition.Code, kerr.UnknownTopicOrPartition.Code},
		"dp-missing": {kerr.UnknownTopicOrPartition.Code},
		"bad/name":   {kerr.InvalidTopicException.Code},
	}
	if len(resp.Topics) != 3 {
		t.Fatalf("%d topics answered, want 3", len(resp.Topics))
	}
	for _, rt := range resp.Topics {
		w := want[rt.Topic]
		if len(rt.Partitions) != len(w) {
			t.Fatalf("%s: %+v", rt.Topic, rt.Partitions)
		}
		for i, p := range rt.Partitions {
			if p.ErrorCode != w[i] {
				t.Errorf("%s-%d: error %d, want %d", rt.Topic, p.Partition, p.ErrorCode, w[i])
			}
			if (p.ErrorCode == 0) != (len(p.ActiveProducers) == 1) {
				t.Errorf("%s-%d: error %d with producers %+v", rt.Topic, p.Partition, p.ErrorCode, p.ActiveProducers)
			}
		}
	}
	if m := resp.Topics[2].Partitions[0].ErrorMessage; m == nil || *m == "" {
		t.Error("INVALID_TOPIC_EXCEPTION without a message")
	}
}
