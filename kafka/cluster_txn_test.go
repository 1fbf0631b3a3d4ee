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
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// clusterTxnProps are clusterGroupProps with fewer partitions of the two
// internal topics (each is created with replication factor 3 and
// min.insync.replicas 2 on three brokers).
const clusterTxnProps = clusterGroupProps + `offsets.topic.num.partitions=4
transaction.state.log.num.partitions=4
`

// TestClusterTxn: transactions on three broker processes. First
// franz-go's consume-transform-produce loop (GroupTransactSession,
// read_committed, members coming and going): the transaction
// coordinators, the group coordinators and the partitions' leaders are
// spread over the brokers, so markers reach most partitions with
// WriteTxnMarkers over the inter-broker listener. Then a transactional
// producer commits while the coordinator of its transactional id (the
// leader of its partition of __transaction_state) is SIGKILLed: the new
// leader replays the partition, finishes what the old one left prepared,
// and the producer goes on committing; read_committed shows every
// committed transaction whole and nothing of the others.
func TestClusterTxn(t *testing.T) {
	if testing.Short() {
		t.Skip("starts three broker processes")
	}
	c := startCluster(t, 3, clusterTxnProps)
	adm := kadm.NewClient(c.client())
	isr2 := map[string]*string{"min.insync.replicas": kadm.StringPtr("2")}
	c.createTopic(adm, "etl-in", 6, 3, isr2)
	c.createTopic(adm, "etl-out", 6, 3, isr2)
	t.Run("etl", func(t *testing.T) { etl(t, c.client, "etl-in", "etl-out", 3000) })
	t.Run("coordinator failover", func(t *testing.T) {
		c.createTopic(adm, "txn-fo", 3, 3, isr2)
		testTxnCoordinatorFailover(t, c)
	})
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
