package kafka_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"ringlog/engine"
	"ringlog/kafka"
	"ringlog/segment/batch"
)

// txnRecords is a producer batch of n records "<prefix>-<i>" inside a
// transaction of producer pid (epoch 0) at sequence seq, as a
// transactional producer sends it.
func txnRecords(t testing.TB, prefix string, n int, pid int64, seq int32) []byte {
	t.Helper()
	b := kafka.MakeBatch(t, prefix, n, pid, seq)
	h := kafka.MustHeader(t, b)
	h.Attributes |= batch.AttrTransactional
	out, err := kafka.EncodeBatch(h, b)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// consumeIso reads topic from the start with a kgo consumer at the given
// isolation until it has want records, then polls once more for a while to
// make sure nothing else comes. It returns the record values in order.
func consumeIso(t *testing.T, b *testBroker, topic string, iso kgo.IsolationLevel, want int) []string {
	t.Helper()
	cl := b.client(kgo.ConsumeTopics(topic), kgo.FetchIsolationLevel(iso),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.FetchMaxWait(200*time.Millisecond))
	var got []string
	deadline := time.Now().Add(15 * time.Second)
	for len(got) < want && time.Now().Before(deadline) {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		fs := cl.PollFetches(ctx)
		cancel()
		fs.EachRecord(func(r *kgo.Record) { got = append(got, string(r.Value)) })
	}
	ctx, cancel := context.WithTimeout(context.Background(), 700*time.Millisecond)
	defer cancel()
	cl.PollFetches(ctx).EachRecord(func(r *kgo.Record) { got = append(got, string(r.Value)) })
	return got
}

// TestTransactionsOnTheWire: the log side alone, without the transaction
// coordinator: producer ids from InitProducerId, their transactional
// batches appended through the broker's engine and markers written through
// the engine, as the coordinator writes them (txn_e2e_test.go runs the
// whole path from a transactional producer); then, on the wire, a kgo consumer at
// read_committed sees only committed records and stops at the last stable
// offset while a transaction is open, one at read_uncommitted sees every
// record, and ListOffsets latest answers the LSO and the HW by isolation
// level. A commit of the open transaction then lets the waiting
// read_committed consumer go on.
func TestTransactionsOnTheWire(t *testing.T) {
	b := startBroker(t, brokerOpts{})
	const topic = "txn"
	createTopic(t, b, topic, 1, nil)
	tp := engine.TP{Topic: topic, Partition: 0}
	cl := b.client()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()

	w := dialWire(t, b.Addr)
	pids := make([]int64, 2)
	for i := range pids {
		req := kmsg.NewPtrInitProducerIDRequest()
		resp, err := req.RequestWith(ctx, cl)
		if err != nil || resp.ErrorCode != 0 {
			t.Fatalf("InitProducerID: %v %+v", err, resp)
		}
		pids[i] = resp.ProducerID
	}
	produce := func(records []byte) {
		t.Helper()
		if h := kafka.MustHeader(t, records); !h.Transactional() {
			resp := w.roundTrip(kafka.ProduceReq(9, -1, topic, 0, records)).(*kmsg.ProduceResponse)
			if code := resp.Topics[0].Partitions[0].ErrorCode; code != 0 {
				t.Fatalf("produce: error %d", code)
			}
			return
		}
		done := make(chan error, 1)
		b.Engine.Append(tp, records, engine.AppendOptions{RequireISR: true}, func(_ engine.AppendResult, err error) { done <- err })
		if err := <-done; err != nil {
			t.Fatal(err)
		}
	}
	marker := func(pid int64, commit bool) {
		t.Helper()
		done := make(chan error, 1)
		b.Engine.AppendMarker(tp, engine.Marker{ProducerID: pid, Commit: commit, CoordinatorEpoch: 0},
			engine.AppendOptions{RequireISR: true}, func(_ engine.AppendResult, err error) { done <- err })
		if err := <-done; err != nil {
			t.Fatal(err)
		}
	}

	produce(txnRecords(t, "committed", 3, pids[0], 0))
	marker(pids[0], true)
	produce(kafka.MakeBatch(t, "plain1", 1, -1, 0))
	produce(txnRecords(t, "aborted", 2, pids[1], 0))
	marker(pids[1], false)
	produce(kafka.MakeBatch(t, "plain2", 1, -1, 0))
	produce(txnRecords(t, "open", 2, pids[0], 3))
	openAt := engineState(t, b, tp).LEO - 2
	produce(kafka.MakeBatch(t, "plain3", 1, -1, 0))

	st := engineState(t, b, tp)
	if st.LSO != openAt || st.HW != st.LEO {
		t.Fatalf("LSO %d HW %d LEO %d, want the LSO at the open transaction (%d)", st.LSO, st.HW, st.LEO, openAt)
	}

	committed := consumeIso(t, b, topic, kgo.ReadCommitted(), 5)
	if want := "committed-0 committed-1 committed-2 plain1-0 plain2-0"; strings.Join(committed, " ") != want {
		t.Fatalf("read_committed consumed %q, want %q", committed, want)
	}
	all := consumeIso(t, b, topic, kgo.ReadUncommitted(), 10)
	if want := "committed-0 committed-1 committed-2 plain1-0 aborted-0 aborted-1 plain2-0 open-0 open-1 plain3-0"; strings.Join(all, " ") != want {
		t.Fatalf("read_uncommitted consumed %q, want %q", all, want)
	}

	adm := b.admin()
	ends, err := adm.ListEndOffsets(ctx, topic)
	if err != nil {
		t.Fatal(err)
	}
	stable, err := adm.ListCommittedOffsets(ctx, topic)
	if err != nil {
		t.Fatal(err)
	}
	if o, _ := ends.Lookup(topic, 0); o.Offset != st.HW {
		t.Fatalf("ListOffsets latest read_uncommitted: %+v, want %d", o, st.HW)
	}
	if o, _ := stable.Lookup(topic, 0); o.Offset != st.LSO {
		t.Fatalf("ListOffsets latest read_committed: %+v, want %d", o, st.LSO)
	}

	// A read_committed consumer waiting at the LSO gets the rest once the
	// transaction commits.
	rc := b.client(kgo.ConsumeTopics(topic), kgo.FetchIsolationLevel(kgo.ReadCommitted()),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	var got []string
	for len(got) < 5 {
		pctx, pcancel := context.WithTimeout(ctx, 5*time.Second)
		rc.PollFetches(pctx).EachRecord(func(r *kgo.Record) { got = append(got, string(r.Value)) })
		pcancel()
		if pctx.Err() != nil && len(got) < 5 {
			t.Fatalf("read_committed consumer got %q", got)
		}
	}
	marker(pids[0], true)
	for len(got) < 8 {
		pctx, pcancel := context.WithTimeout(ctx, 5*time.Second)
		rc.PollFetches(pctx).EachRecord(func(r *kgo.Record) { got = append(got, string(r.Value)) })
		pcancel()
		if pctx.Err() != nil && len(got) < 8 {
			t.Fatalf("after the commit the read_committed consumer got %q", got)
		}
	}
	if want := "committed-0 committed-1 committed-2 plain1-0 plain2-0 open-0 open-1 plain3-0"; strings.Join(got, " ") != want {
		t.Fatalf("after the commit: %q, want %q", got, want)
	}
	if o, err := adm.ListCommittedOffsets(ctx, topic); err != nil {
		t.Fatal(err)
	} else if lo, _ := o.Lookup(topic, 0); lo.Offset != engineState(t, b, tp).HW {
		t.Fatalf("ListOffsets read_committed after the commit: %+v", lo)
	}
}

func engineState(t testing.TB, b *testBroker, tp engine.TP) engine.PartitionState {
	t.Helper()
	st, err := b.Engine.State(tp)
	if err != nil {
		t.Fatal(err)
	}
	return st
}
