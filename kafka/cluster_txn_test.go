//go:build unix

package kafka_test

import (
	"context"
	"fmt"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// clusterTxnProps are clusterGroupProps with fewer partitions of the two
// internal topics (each is created with replication factor 3 and
// min.insync.replicas 2 on three brokers).
const clusterTxnProps = clusterGroupProps + `offsets.topic.num.partitions=4
transaction.state.log.num.partitions=4
`

// TestClusterTxn: transactions on three broker processes. franz-go's
// consume-transform-produce test, TestTxnEtl, runs against three brokers
// in cmd/ringlog (TestFranzGoTxnEtlCluster: GroupTransactSession,
// read_committed, members coming and going, coordinators and leaders
// spread over the brokers); this covers what it does not reach. A
// TxnOffsetCommit whose add to the transaction is refused by the
// transaction coordinator on another broker is refused. The leader of an
// open transaction's partitions is SIGKILLed (cluster_txn_kill_test.go).
// A transactional producer commits while the coordinator of its
// transactional id (the leader of its partition of __transaction_state)
// is SIGKILLed: the new leader replays the partition, finishes what the
// old one left prepared, and the producer goes on committing;
// read_committed shows every committed transaction whole and nothing of
// the others.
func TestClusterTxn(t *testing.T) {
	t.Parallel() // broker processes: the test waits on them far more than it computes
	if testing.Short() {
		t.Skip("starts three broker processes")
	}
	c := startCluster(t, 3, clusterTxnProps)
	adm := kadm.NewClient(c.client())
	isr2 := map[string]*string{"min.insync.replicas": kadm.StringPtr("2")}
	c.createTopic(adm, "txn-fo", 3, 3, isr2)
	c.createTopic(adm, "txn-lk", 6, 3, isr2)
	t.Run("offsets refused by another broker's coordinator", func(t *testing.T) { testTxnOffsetCommitRemoteRefusal(t, c) })
	// It restarts the broker it kills: before the coordinator failover,
	// which does not.
	t.Run("partition leader killed", func(t *testing.T) { testTxnPartitionLeaderKilled(t, c, "txn-lk") })
	t.Run("coordinator failover", func(t *testing.T) { testTxnCoordinatorFailover(t, c) })
}

func testTxnCoordinatorFailover(t *testing.T, c *testCluster) {
	const txnID, perTxn = "failover-txn", 20
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	cl := c.client(kgo.TransactionalID(txnID), kgo.DefaultProduceTopic("txn-fo"), kgo.RecordPartitioner(kgo.RoundRobinPartitioner()),
		kgo.TransactionTimeout(20*time.Second), kgo.RetryBackoffFn(func(int) time.Duration { return 50 * time.Millisecond }))
	committed, unknown := map[int]bool{}, map[int]bool{}
	txn := func(i int) {
		if err := cl.BeginTransaction(); err != nil {
			t.Fatalf("transaction %d: begin: %v", i, err)
		}
		var rs []*kgo.Record
		for j := range perTxn {
			rs = append(rs, &kgo.Record{Value: fmt.Appendf(nil, "%d-%d", i, j)})
		}
		perr := cl.ProduceSync(ctx, rs...).FirstErr()
		commit := kgo.TransactionEndTry(perr == nil)
		if err := cl.EndTransaction(ctx, commit); err != nil {
			// The outcome of an end that failed is not known: abort
			// (as franz-go documents) and accept either.
			unknown[i] = true
			if err := cl.EndTransaction(ctx, kgo.TryAbort); err != nil {
				t.Logf("transaction %d: abort after %v", i, err)
			}
			return
		}
		if commit {
			committed[i] = true
		}
	}
	coordinator := func() int32 {
		req := kmsg.NewPtrFindCoordinatorRequest()
		req.CoordinatorType, req.CoordinatorKey = 1, txnID
		resp, err := req.RequestWith(ctx, c.client())
		if err != nil || resp.ErrorCode != 0 {
			return -1
		}
		return resp.NodeID
	}
	i := 0
	for ; i < 5; i++ {
		txn(i)
	}
	victim := coordinator()
	if victim < 1 || len(committed) != 5 {
		t.Fatalf("coordinator %d, %d of 5 transactions committed", victim, len(committed))
	}
	t.Logf("killing broker %d, the coordinator of %s", victim, txnID)
	c.procs[victim-1].signal(syscall.SIGKILL)
	killed := time.Now()
	before := len(committed)
	for ; len(committed) < before+5 && ctx.Err() == nil; i++ {
		txn(i)
	}
	t.Logf("%d more transactions committed %v after the kill (%d of unknown outcome)", len(committed)-before,
		time.Since(killed).Round(time.Millisecond), len(unknown))
	if now := coordinator(); now == victim || now < 1 {
		t.Fatalf("the coordinator is broker %d after the kill of %d", now, victim)
	}

	// read_committed: whole committed transactions, nothing else.
	cons := c.client(kgo.ConsumeTopics("txn-fo"), kgo.FetchIsolationLevel(kgo.ReadCommitted()),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.FetchMaxWait(100*time.Millisecond))
	got := map[int]int{}
	want := len(committed) * perTxn
	total := 0
	for deadline := time.Now().Add(20 * time.Second); total < want && time.Now().Before(deadline); {
		pctx, pcancel := context.WithTimeout(ctx, time.Second)
		cons.PollFetches(pctx).EachRecord(func(r *kgo.Record) {
			var n, j int
			fmt.Sscanf(strings.ReplaceAll(string(r.Value), "-", " "), "%d %d", &n, &j)
			got[n]++
			total++
		})
		pcancel()
	}
	for n := range i {
		switch {
		case committed[n] && got[n] != perTxn:
			t.Errorf("committed transaction %d: %d of %d records read", n, got[n], perTxn)
		case unknown[n] && got[n] != 0 && got[n] != perTxn:
			t.Errorf("transaction %d (outcome unknown): %d of %d records read", n, got[n], perTxn)
		case !committed[n] && !unknown[n] && got[n] != 0:
			t.Errorf("aborted transaction %d: %d records read", n, got[n])
		}
	}
}

// coordinatorOf returns the node id FindCoordinator names for key (type
// 0 a group, 1 a transactional id), or -1.
func (c *testCluster) coordinatorOf(ctx context.Context, cl *kgo.Client, typ int8, key string) int32 {
	req := kmsg.NewPtrFindCoordinatorRequest()
	req.CoordinatorType, req.CoordinatorKey = typ, key
	resp, err := req.RequestWith(ctx, cl)
	if err != nil || resp.ErrorCode != 0 {
		return -1
	}
	return resp.NodeID
}

// testTxnOffsetCommitRemoteRefusal: TxnOffsetCommit v5+ (transactions v2)
// adds the group's partition of __consumer_offsets to the transaction
// through the transaction coordinator before it writes the offsets. When
// that coordinator is another broker and refuses the add (here a stale
// epoch; in franz-go's TestTxnEtl on three brokers, CONCURRENT_TRANSACTIONS
// while the previous transaction's markers were being written), the
// offsets must be refused too. They were written: the other broker's
// answer comes per partition and only the request's code was read, so the
// offsets were left pending outside any transaction (UNSTABLE_OFFSET_COMMIT
// for ever), and the producer's EndTxn, for a transaction the coordinator
// never saw begin, was INVALID_TXN_STATE. Then the same commit at the
// right epoch is accepted and shows once the transaction commits.
func testTxnOffsetCommitRemoteRefusal(t *testing.T, c *testCluster) {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cl := c.client()
	var txnID, groupID string
	for i := 0; txnID == ""; i++ {
		if i == 100 {
			t.Fatal("no transactional id and group with coordinators on different brokers in 100 tries")
		}
		tid, gid := fmt.Sprintf("remote-txn-%d", i), fmt.Sprintf("remote-group-%d", i)
		tc, gc := c.coordinatorOf(ctx, cl, 1, tid), c.coordinatorOf(ctx, cl, 0, gid)
		if tc >= 1 && gc >= 1 && tc != gc {
			txnID, groupID = tid, gid
			t.Logf("%s coordinated by broker %d, %s by broker %d", tid, tc, gid, gc)
		}
	}
	initReq := kmsg.NewPtrInitProducerIDRequest()
	initReq.TransactionalID, initReq.TransactionTimeoutMillis = &txnID, 60_000
	init, err := initReq.RequestWith(ctx, cl)
	if err != nil || init.ErrorCode != 0 {
		t.Fatalf("InitProducerId: %v %v", err, init)
	}
	td, err := kadm.NewClient(cl).ListTopics(ctx, "txn-fo")
	if err != nil || td["txn-fo"].Err != nil {
		t.Fatalf("txn-fo's metadata: %v %v", err, td["txn-fo"].Err)
	}
	commitOffset := func(epoch int16) int16 {
		req := kmsg.NewPtrTxnOffsetCommitRequest()
		req.TransactionalID, req.Group, req.ProducerID, req.ProducerEpoch = txnID, groupID, init.ProducerID, epoch
		req.Generation = -1
		rt := kmsg.NewTxnOffsetCommitRequestTopic()
		// By name up to v5, by id from v6 (KIP-1319).
		rt.Topic, rt.TopicID = "txn-fo", td["txn-fo"].ID
		rp := kmsg.NewTxnOffsetCommitRequestTopicPartition()
		rp.Partition, rp.Offset = 0, 7
		rt.Partitions = append(rt.Partitions, rp)
		req.Topics = append(req.Topics, rt)
		resp, err := req.RequestWith(ctx, cl)
		if err != nil || len(resp.Topics) != 1 || len(resp.Topics[0].Partitions) != 1 {
			t.Fatalf("TxnOffsetCommit: %v %+v", err, resp)
		}
		if resp.Version < 5 {
			t.Fatalf("TxnOffsetCommit v%d, want v5", resp.Version)
		}
		return resp.Topics[0].Partitions[0].ErrorCode
	}
	// fetched is the group's offset of txn-fo-0 as a require_stable
	// OffsetFetch sees it, and its code.
	fetched := func() (int64, int16) {
		req := kmsg.NewPtrOffsetFetchRequest()
		req.Group, req.RequireStable = groupID, true
		rt := kmsg.NewOffsetFetchRequestTopic()
		rt.Topic, rt.Partitions = "txn-fo", []int32{0}
		req.Topics = append(req.Topics, rt)
		resp, err := req.RequestWith(ctx, cl)
		if err != nil {
			t.Fatal(err)
		}
		if resp.ErrorCode != 0 {
			return -1, resp.ErrorCode
		}
		for _, g := range resp.Groups {
			if g.ErrorCode != 0 {
				return -1, g.ErrorCode
			}
			for _, rt := range g.Topics {
				for _, p := range rt.Partitions {
					return p.Offset, p.ErrorCode
				}
			}
		}
		for _, rt := range resp.Topics {
			for _, p := range rt.Partitions {
				return p.Offset, p.ErrorCode
			}
		}
		t.Fatalf("OffsetFetch: no partition in %+v", resp)
		return -1, 0
	}

	// The group's coordinator has the add checked by the transaction's,
	// which refuses a partition it does not know yet
	// (UNKNOWN_TOPIC_OR_PARTITION, as Kafka's metadata check does):
	// __consumer_offsets may have just been created, and a loaded suite
	// run asked before that broker had learned it.
	code := commitOffset(init.ProducerEpoch + 1)
	for known := time.Now().Add(15 * time.Second); code == kerr.UnknownTopicOrPartition.Code && time.Now().Before(known); {
		time.Sleep(50 * time.Millisecond)
		code = commitOffset(init.ProducerEpoch + 1)
	}
	if code != kerr.InvalidProducerEpoch.Code {
		t.Fatalf("TxnOffsetCommit at a stale epoch, the add refused by broker %d: %v, want INVALID_PRODUCER_EPOCH",
			c.coordinatorOf(ctx, cl, 1, txnID), kerr.ErrorForCode(code))
	}
	if off, code := fetched(); off != -1 || code != 0 {
		t.Fatalf("after the refused commit the group's offset is %d (%v), want none", off, kerr.ErrorForCode(code))
	}

	if code := commitOffset(init.ProducerEpoch); code != 0 {
		t.Fatalf("TxnOffsetCommit: %v", kerr.ErrorForCode(code))
	}
	end := kmsg.NewPtrEndTxnRequest()
	end.TransactionalID, end.ProducerID, end.ProducerEpoch, end.Commit = txnID, init.ProducerID, init.ProducerEpoch, true
	if resp, err := end.RequestWith(ctx, cl); err != nil || resp.ErrorCode != 0 {
		t.Fatalf("EndTxn: %v %v", err, resp)
	}
	for {
		off, code := fetched()
		if off == 7 && code == 0 {
			return
		}
		if ctx.Err() != nil {
			t.Fatalf("the committed offset: %d (%v), want 7", off, kerr.ErrorForCode(code))
		}
		time.Sleep(50 * time.Millisecond)
	}
}
