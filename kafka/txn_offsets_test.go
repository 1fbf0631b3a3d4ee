package kafka_test

import (
	"context"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// TestTxnOffsetCommitVisibleOnCommit: offsets a transactional producer
// commits for a group (TxnOffsetCommit) stay invisible to OffsetFetch
// (and UNSTABLE_OFFSET_COMMIT to a require_stable fetch, KIP-447) until
// the transaction's COMMIT marker lands on the group's partition of
// __consumer_offsets; an aborted transaction's offsets never show; and
// after a restart the replay of that partition keeps exactly the
// committed ones.
func TestTxnOffsetCommitVisibleOnCommit(t *testing.T) {
	b := startBroker(t, brokerOpts{})
	createTopic(t, b, "src", 1, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cl := b.client()
	const txnID, groupID = "offsets-txn", "offsets-group"
	req := func(r kmsg.Request) kmsg.Response {
		t.Helper()
		for {
			resp, err := cl.Request(ctx, r)
			if err != nil {
				t.Fatalf("%s: %v", kmsg.NameForKey(r.Key()), err)
			}
			// Retry what clients retry while markers are written.
			if e, ok := resp.(*kmsg.InitProducerIDResponse); ok && e.ErrorCode == kerr.ConcurrentTransactions.Code {
				time.Sleep(20 * time.Millisecond)
				continue
			}
			if e, ok := resp.(*kmsg.AddOffsetsToTxnResponse); ok && e.ErrorCode == kerr.ConcurrentTransactions.Code {
				time.Sleep(20 * time.Millisecond)
				continue
			}
			return resp
		}
	}
	init := kmsg.NewPtrInitProducerIDRequest()
	init.TransactionalID, init.TransactionTimeoutMillis = kmsg.StringPtr(txnID), 60000
	ir := req(init).(*kmsg.InitProducerIDResponse)
	if ir.ErrorCode != 0 {
		t.Fatalf("InitProducerId: %v", kerr.ErrorForCode(ir.ErrorCode))
	}
	commitIn := func(offset int64, commit bool) {
		t.Helper()
		add := kmsg.NewPtrAddOffsetsToTxnRequest()
		add.TransactionalID, add.ProducerID, add.ProducerEpoch, add.Group = txnID, ir.ProducerID, ir.ProducerEpoch, groupID
		if code := req(add).(*kmsg.AddOffsetsToTxnResponse).ErrorCode; code != 0 {
			t.Fatalf("AddOffsetsToTxn: %v", kerr.ErrorForCode(code))
		}
		tc := kmsg.NewPtrTxnOffsetCommitRequest()
		tc.TransactionalID, tc.Group, tc.ProducerID, tc.ProducerEpoch = txnID, groupID, ir.ProducerID, ir.ProducerEpoch
		tc.Generation = -1
		tt := kmsg.NewTxnOffsetCommitRequestTopic()
		tt.Topic = "src"
		tp := kmsg.NewTxnOffsetCommitRequestTopicPartition()
		tp.Partition, tp.Offset = 0, offset
		tt.Partitions = append(tt.Partitions, tp)
		tc.Topics = append(tc.Topics, tt)
		r := req(tc).(*kmsg.TxnOffsetCommitResponse)
		if len(r.Topics) != 1 || r.Topics[0].Partitions[0].ErrorCode != 0 {
			t.Fatalf("TxnOffsetCommit: %+v", r)
		}
		// Not visible while the transaction is open.
		if off, code := fetchOffset(t, ctx, cl, groupID, false); off == offset || code != 0 {
			t.Fatalf("offset %d (%v) visible before the transaction ended", off, kerr.ErrorForCode(code))
		}
		if _, code := fetchOffset(t, ctx, cl, groupID, true); code != kerr.UnstableOffsetCommit.Code {
			t.Fatalf("require_stable fetch of a pending offset: %v, want UNSTABLE_OFFSET_COMMIT", kerr.ErrorForCode(code))
		}
		end := kmsg.NewPtrEndTxnRequest()
		end.TransactionalID, end.ProducerID, end.ProducerEpoch, end.Commit = txnID, ir.ProducerID, ir.ProducerEpoch, commit
		er := req(end).(*kmsg.EndTxnResponse)
		if er.ErrorCode != 0 {
			t.Fatalf("EndTxn: %v", kerr.ErrorForCode(er.ErrorCode))
		}
		if er.Version >= 5 {
			// Transactions v2 (KIP-890): every end bumps the epoch,
			// and the answer names the producer to go on with.
			if er.ProducerEpoch != ir.ProducerEpoch+1 {
				t.Fatalf("EndTxn v5 answered epoch %d after %d", er.ProducerEpoch, ir.ProducerEpoch)
			}
			ir.ProducerID, ir.ProducerEpoch = er.ProducerID, er.ProducerEpoch
		}
	}
	waitOffset := func(want int64) {
		t.Helper()
		deadline := time.Now().Add(10 * time.Second)
		for {
			off, code := fetchOffset(t, ctx, cl, groupID, true)
			if code == 0 && off == want {
				return
			}
			if time.Now().After(deadline) {
				t.Fatalf("committed offset %d (%v), want %d", off, kerr.ErrorForCode(code), want)
			}
			time.Sleep(10 * time.Millisecond)
		}
	}
	commitIn(42, true)
	waitOffset(42)
	commitIn(99, false)
	waitOffset(42) // the aborted 99 never shows, and is no longer pending

	b.Restart()
	cl = b.client()
	waitOffset(42)
}

// fetchOffset reads group's committed offset of src-0 (-1: none).
func fetchOffset(t *testing.T, ctx context.Context, cl *kgo.Client, group string, requireStable bool) (int64, int16) {
	t.Helper()
	of := kmsg.NewPtrOffsetFetchRequest()
	of.Group, of.RequireStable = group, requireStable
	ot := kmsg.NewOffsetFetchRequestTopic()
	ot.Topic, ot.Partitions = "src", []int32{0}
	of.Topics = append(of.Topics, ot)
	resp, err := cl.Request(ctx, of)
	if err != nil {
		t.Fatal(err)
	}
	r := resp.(*kmsg.OffsetFetchResponse)
	if r.ErrorCode != 0 {
		return -1, r.ErrorCode
	}
	if len(r.Groups) > 0 {
		g := r.Groups[0]
		if g.ErrorCode != 0 || len(g.Topics) == 0 {
			return -1, g.ErrorCode
		}
		p := g.Topics[0].Partitions[0]
		return p.Offset, p.ErrorCode
	}
	if len(r.Topics) == 0 {
		return -1, 0
	}
	p := r.Topics[0].Partitions[0]
	return p.Offset, p.ErrorCode
}
