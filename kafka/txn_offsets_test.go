package kafka_test

import (
	"context"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/twmb/franz-go/pkg/kversion"
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
	src := createTopic(t, b, "src", 1, nil)
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
		tt.Topic, tt.TopicID = "src", src.ID // by name to v5, by id from v6
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

// TestTxnOffsetCommitV6: TxnOffsetCommit v6 (KIP-1319) names topics by
// id: a known id commits (visible by name once the transaction commits),
// an unknown one is UNKNOWN_TOPIC_ID; a commit from a generation of a group
// that does not exist is GROUP_ID_NOT_FOUND, where v5 answers
// ILLEGAL_GENERATION, as Kafka's group coordinator does.
func TestTxnOffsetCommitV6(t *testing.T) {
	b := startBroker(t, brokerOpts{})
	src := createTopic(t, b, "src", 1, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cl := b.client()
	v5 := kversion.Stable()
	v5.SetMaxKeyVersion(int16(kmsg.TxnOffsetCommit), 5)
	cl5 := b.client(kgo.MaxVersions(v5))
	const txnID, groupID = "v6-txn", "v6-group"
	init := kmsg.NewPtrInitProducerIDRequest()
	init.TransactionalID, init.TransactionTimeoutMillis = kmsg.StringPtr(txnID), 60000
	var ir *kmsg.InitProducerIDResponse
	for {
		r, err := init.RequestWith(ctx, cl)
		if err != nil {
			t.Fatal(err)
		}
		if ir = r; ir.ErrorCode != kerr.ConcurrentTransactions.Code && ir.ErrorCode != kerr.CoordinatorLoadInProgress.Code {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	if ir.ErrorCode != 0 {
		t.Fatalf("InitProducerId: %v", kerr.ErrorForCode(ir.ErrorCode))
	}
	commit := func(c *kgo.Client, group string, generation int32, memberID string, ids ...[16]byte) *kmsg.TxnOffsetCommitResponse {
		t.Helper()
		tc := kmsg.NewPtrTxnOffsetCommitRequest()
		tc.TransactionalID, tc.Group, tc.ProducerID, tc.ProducerEpoch = txnID, group, ir.ProducerID, ir.ProducerEpoch
		tc.Generation, tc.MemberID = generation, memberID
		for _, id := range ids {
			tt := kmsg.NewTxnOffsetCommitRequestTopic()
			tt.Topic, tt.TopicID = "src", id
			tp := kmsg.NewTxnOffsetCommitRequestTopicPartition()
			tp.Partition, tp.Offset = 0, 7
			tt.Partitions = append(tt.Partitions, tp)
			tc.Topics = append(tc.Topics, tt)
		}
		r, err := tc.RequestWith(ctx, c)
		if err != nil {
			t.Fatal(err)
		}
		if len(r.Topics) != len(ids) {
			t.Fatalf("TxnOffsetCommit v%d answered %d topics for %d", r.Version, len(r.Topics), len(ids))
		}
		return r
	}
	unknownID := [16]byte{1, 2, 3}
	r := commit(cl, groupID, -1, "", src.ID, unknownID)
	if r.Version != 6 {
		t.Fatalf("TxnOffsetCommit v%d, want v6", r.Version)
	}
	if c0, c1 := r.Topics[0].Partitions[0].ErrorCode, r.Topics[1].Partitions[0].ErrorCode; c0 != 0 || c1 != kerr.UnknownTopicID.Code ||
		r.Topics[0].TopicID != src.ID || r.Topics[1].TopicID != unknownID {
		t.Fatalf("v6 by id: %+v", r.Topics)
	}
	for c, want := range map[*kgo.Client]int16{cl: kerr.GroupIDNotFound.Code, cl5: kerr.IllegalGeneration.Code} {
		r := commit(c, "v6-no-such-group", 3, "member", src.ID)
		if code := r.Topics[0].Partitions[0].ErrorCode; code != want {
			t.Errorf("v%d commit of generation 3 to a group that does not exist: %v, want %v", r.Version, kerr.ErrorForCode(code), kerr.ErrorForCode(want))
		}
	}
	end := kmsg.NewPtrEndTxnRequest()
	end.TransactionalID, end.ProducerID, end.ProducerEpoch, end.Commit = txnID, ir.ProducerID, ir.ProducerEpoch, true
	er, err := end.RequestWith(ctx, cl)
	if err != nil || er.ErrorCode != 0 {
		t.Fatalf("EndTxn: %v %v", err, kerr.ErrorForCode(er.ErrorCode))
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		off, code := fetchOffset(t, ctx, cl, groupID, true)
		if code == 0 && off == 7 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("committed offset %d (%v), want 7", off, kerr.ErrorForCode(code))
		}
		time.Sleep(10 * time.Millisecond)
	}
}
