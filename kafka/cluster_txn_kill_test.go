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
)

// Brokers SIGKILLed with a transaction open (issue 12: "a broker SIGKILLed
// mid-transaction ends in a clean commit or abort"). TestClusterTxn's
// coordinator failover kills the transaction coordinator; these kill the
// leader of the transaction's partitions, and a single broker.

// txnLog is what a test's transactions were, by index: committed,
// aborted, or of unknown outcome (an end that failed, then aborted);
// transaction i wrote perTxn records with values "i-j".
type txnLog struct {
	perTxn                      int
	committed, aborted, unknown map[int]bool
}

func newTxnLog(perTxn int) *txnLog {
	return &txnLog{perTxn: perTxn, committed: map[int]bool{}, aborted: map[int]bool{}, unknown: map[int]bool{}}
}

// run runs transaction i with cl (a ManualPartitioner's producer), its
// records spread round robin over partitions; it commits unless abort. A
// failed produce or end is aborted and its outcome unknown (as franz-go
// documents: abort after a failed end).
func (l *txnLog) run(ctx context.Context, t *testing.T, cl *kgo.Client, i int, abort bool, partitions ...int32) {
	t.Helper()
	if err := cl.BeginTransaction(); err != nil {
		t.Fatalf("transaction %d: begin: %v", i, err)
	}
	var rs []*kgo.Record
	for j := range l.perTxn {
		rs = append(rs, &kgo.Record{Partition: partitions[j%len(partitions)], Value: fmt.Appendf(nil, "%d-%d", i, j)})
	}
	perr := cl.ProduceSync(ctx, rs...).FirstErr()
	l.end(ctx, t, cl, i, perr == nil && !abort, perr)
}

// end ends transaction i (commit or abort) and records its outcome.
func (l *txnLog) end(ctx context.Context, t *testing.T, cl *kgo.Client, i int, commit bool, cause error) {
	t.Helper()
	if err := cl.EndTransaction(ctx, kgo.TransactionEndTry(commit)); err != nil {
		t.Logf("transaction %d: end (commit %v): %v; aborting", i, commit, err)
		l.unknown[i] = true
		if err := cl.EndTransaction(ctx, kgo.TryAbort); err != nil {
			t.Logf("transaction %d: abort after %v", i, err)
		}
		return
	}
	switch {
	case commit:
		l.committed[i] = true
	case cause != nil:
		t.Logf("transaction %d: aborted after %v", i, cause)
		l.unknown[i] = true // its produce failed: not what the test chose
	default:
		l.aborted[i] = true
	}
}

// check reads topic from the start with read_committed: every committed
// transaction whole, nothing of an aborted one, all or nothing of one of
// unknown outcome. With uncommitted, read_uncommitted must also show
// every record of the aborted ones (they were written, and are hidden).
func (l *txnLog) check(ctx context.Context, t *testing.T, c *testCluster, topic string, n int, uncommitted bool) {
	t.Helper()
	read := func(iso kgo.IsolationLevel, want int) map[int]int {
		cons := c.client(kgo.ConsumeTopics(topic), kgo.FetchIsolationLevel(iso), kgo.Dialer(c.dial),
			kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.FetchMaxWait(100*time.Millisecond))
		defer cons.Close()
		got := map[int]int{}
		total := 0
		// Up to want records, then a last poll for any beyond.
		for deadline := time.Now().Add(20 * time.Second); ctx.Err() == nil; {
			last := total >= want || time.Now().After(deadline)
			pctx, pcancel := context.WithTimeout(ctx, time.Second)
			cons.PollFetches(pctx).EachRecord(func(r *kgo.Record) {
				var i, j int
				fmt.Sscanf(strings.ReplaceAll(string(r.Value), "-", " "), "%d %d", &i, &j)
				got[i]++
				total++
			})
			pcancel()
			if last {
				break
			}
		}
		return got
	}
	got := read(kgo.ReadCommitted(), len(l.committed)*l.perTxn)
	for i := range n {
		switch {
		case l.committed[i] && got[i] != l.perTxn:
			t.Errorf("read_committed: committed transaction %d: %d of %d records", i, got[i], l.perTxn)
		case l.unknown[i] && got[i] != 0 && got[i] != l.perTxn:
			t.Errorf("read_committed: transaction %d (outcome unknown): %d of %d records", i, got[i], l.perTxn)
		case l.aborted[i] && got[i] != 0:
			t.Errorf("read_committed: aborted transaction %d: %d records", i, got[i])
		}
	}
	if !uncommitted {
		return
	}
	all := read(kgo.ReadUncommitted(), (len(l.committed)+len(l.aborted))*l.perTxn)
	for i := range n {
		if (l.committed[i] || l.aborted[i]) && all[i] != l.perTxn {
			t.Errorf("read_uncommitted: transaction %d (committed %v): %d of %d records", i, l.committed[i], all[i], l.perTxn)
		}
	}
}

// waitStable waits until the last stable offset of every partition of
// topic reaches its high watermark: no transaction holds it back. It fails
// with both per partition when they stay apart for 30 s (markers are
// retried every 100 ms while a partition has no leader).
func waitStable(ctx context.Context, t *testing.T, adm *kadm.Client, topic string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	var lso, hw kadm.ListedOffsets
	var err error
	for {
		if lso, err = adm.ListCommittedOffsets(ctx, topic); err == nil {
			hw, err = adm.ListEndOffsets(ctx, topic)
		}
		stable := err == nil && len(hw[topic]) > 0
		for p, o := range hw[topic] {
			l, ok := lso[topic][p]
			stable = stable && o.Err == nil && ok && l.Err == nil && l.Offset == o.Offset
		}
		if stable {
			return
		}
		if ctx.Err() != nil {
			var s []string
			for p, o := range hw[topic] {
				s = append(s, fmt.Sprintf("%d: LSO %d HW %d", p, lso[topic][p].Offset, o.Offset))
			}
			t.Fatalf("%s: the last stable offsets do not reach the high watermarks (%v): %s", topic, err, strings.Join(s, ", "))
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// testTxnPartitionLeaderKilled: a transactional producer has a
// transaction open on partitions that broker X leads, X not the
// coordinator of its transactional id, when X is SIGKILLed. The producer
// commits (or, its commit failing, aborts); its partitions' leadership
// moves to the in-sync replicas, which have its records (acks=all, min ISR
// 2), and the coordinator writes the markers there. Then one transaction
// aborted on purpose and one committed, and the check: every committed
// transaction read whole with read_committed, nothing of the aborted ones
// (read_uncommitted shows them), and every partition's last stable offset
// at its high watermark, so no partition is stuck behind a transaction
// that nothing will end. X restarts and catches up from the new leaders;
// the check is made again with another transaction across the topic.
func testTxnPartitionLeaderKilled(t *testing.T, c *testCluster, topic string) {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	adm := kadm.NewClient(c.client(kgo.Dialer(c.dial)))
	td, err := adm.ListTopics(ctx, topic)
	if err != nil {
		t.Fatal(err)
	}
	x := td[topic].Partitions[0].Leader
	var led []int32
	for _, p := range td[topic].Partitions.Sorted() {
		if p.Leader == x {
			led = append(led, p.Partition)
		}
	}
	cl := c.client(kgo.Dialer(c.dial))
	var txnID string
	for i := 0; txnID == ""; i++ {
		if i == 100 {
			t.Fatalf("no transactional id coordinated away from broker %d in 100 tries", x)
		}
		id := fmt.Sprintf("leader-killed-%d", i)
		if co := c.coordinatorOf(ctx, cl, 1, id); co >= 1 && co != x {
			txnID = id
			t.Logf("broker %d leads %s %v; %s is coordinated by broker %d", x, topic, led, id, co)
		}
	}
	prod := c.client(kgo.Dialer(c.dial), kgo.TransactionalID(txnID), kgo.DefaultProduceTopic(topic),
		kgo.RecordPartitioner(kgo.ManualPartitioner()), kgo.TransactionTimeout(30*time.Second),
		kgo.RetryBackoffFn(func(int) time.Duration { return 50 * time.Millisecond }))
	l := newTxnLog(20)
	l.run(ctx, t, prod, 0, false, led...)
	if !l.committed[0] {
		t.Fatal("the first transaction, before any kill, did not commit")
	}

	// Transaction 1 is open on X's partitions when X dies.
	if err := prod.BeginTransaction(); err != nil {
		t.Fatal(err)
	}
	var rs []*kgo.Record
	for j := range l.perTxn {
		rs = append(rs, &kgo.Record{Partition: led[j%len(led)], Value: fmt.Appendf(nil, "1-%d", j)})
	}
	if err := prod.ProduceSync(ctx, rs...).FirstErr(); err != nil {
		t.Fatalf("transaction 1: produce: %v", err)
	}
	t.Logf("killing broker %d, the leader of the open transaction's partitions", x)
	c.procs[x-1].signal(syscall.SIGKILL)
	killed := time.Now()
	l.end(ctx, t, prod, 1, true, nil)
	t.Logf("transaction 1 ended %v after the kill (committed %v)", time.Since(killed).Round(time.Millisecond), l.committed[1])
	for _, p := range led {
		for c.leaderOf(topic, p) == x {
			if ctx.Err() != nil {
				t.Fatalf("%s-%d still led by the killed broker %d", topic, p, x)
			}
			time.Sleep(100 * time.Millisecond)
		}
	}
	l.run(ctx, t, prod, 2, true, led...)
	l.run(ctx, t, prod, 3, false, led...)
	t.Logf("leadership moved %v after the kill", time.Since(killed).Round(time.Millisecond))
	waitStable(ctx, t, adm, topic)
	l.check(ctx, t, c, topic, 4, true)

	c.start(int(x - 1))
	if err := c.waitISR(adm, topic, 3, time.Minute); err != nil {
		t.Fatalf("after broker %d restarted: %v", x, err)
	}
	t.Logf("broker %d back in every ISR %v after the kill", x, time.Since(killed).Round(time.Millisecond))
	all := make([]int32, 0, len(td[topic].Partitions))
	for p := range td[topic].Partitions {
		all = append(all, p)
	}
	l.run(ctx, t, prod, 4, false, all...)
	l.run(ctx, t, prod, 5, true, all...)
	waitStable(ctx, t, adm, topic)
	l.check(ctx, t, c, topic, 6, true)
	if !l.committed[4] || !l.aborted[5] {
		t.Fatalf("after the restart: transaction 4 committed %v, transaction 5 aborted %v", l.committed[4], l.aborted[5])
	}
}

// TestTxnBrokerKilledMidTransaction: one broker (the cluster of one
// voter, the binary's process) SIGKILLed with two transactions open,
// records produced and no EndTxn. It restarts on its data: recovery
// finds both transactions open in the logs and in __transaction_state.
// The first producer's retry aborts its transaction (the same client,
// which finds the broker again); the second's is aborted by the
// coordinator at its transaction timeout. Both end CompleteAbort, the
// last stable offset reaches the high watermark on every partition,
// read_committed never shows the aborted records and read_uncommitted
// does. (TestTxnStateSurvivesRestart restarts after a clean stop.)
func TestTxnBrokerKilledMidTransaction(t *testing.T) {
	t.Parallel() // broker processes: the test waits on them far more than it computes
	if testing.Short() {
		t.Skip("starts a broker process and waits for a transaction timeout")
	}
	const topic = "txn-kill"
	c := startCluster(t, 1, clusterTxnProps+"transaction.abort.timed.out.transaction.cleanup.interval.ms=200\n")
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	adm := kadm.NewClient(c.client(kgo.Dialer(c.dial)))
	c.createTopic(adm, topic, 2, 1, nil)
	producer := func(id string, timeout time.Duration) *kgo.Client {
		return c.client(kgo.Dialer(c.dial), kgo.TransactionalID(id), kgo.DefaultProduceTopic(topic),
			kgo.RecordPartitioner(kgo.ManualPartitioner()), kgo.TransactionTimeout(timeout),
			kgo.RetryBackoffFn(func(int) time.Duration { return 50 * time.Millisecond }))
	}
	// Transactions 0 and 1: the retrying producer's, committed then left
	// open; 2 and 3: the timed-out producer's, the same.
	retrying, timedOut := producer("killed-retry", time.Minute), producer("killed-timeout", 5*time.Second)
	l := newTxnLog(10)
	l.run(ctx, t, retrying, 0, false, 0, 1)
	l.run(ctx, t, timedOut, 2, false, 0, 1)
	open := func(cl *kgo.Client, i int) {
		if err := cl.BeginTransaction(); err != nil {
			t.Fatal(err)
		}
		var rs []*kgo.Record
		for j := range l.perTxn {
			rs = append(rs, &kgo.Record{Partition: int32(j % 2), Value: fmt.Appendf(nil, "%d-%d", i, j)})
		}
		if err := cl.ProduceSync(ctx, rs...).FirstErr(); err != nil {
			t.Fatalf("transaction %d: produce: %v", i, err)
		}
	}
	open(retrying, 1)
	open(timedOut, 3)
	// The open transactions hold the last stable offsets back.
	lso, err := adm.ListCommittedOffsets(ctx, topic)
	if err != nil {
		t.Fatal(err)
	}
	hw, err := adm.ListEndOffsets(ctx, topic)
	if err != nil {
		t.Fatal(err)
	}
	for p, o := range hw[topic] {
		if lso[topic][p].Offset >= o.Offset {
			t.Fatalf("%s-%d: LSO %d, HW %d with transactions open", topic, p, lso[topic][p].Offset, o.Offset)
		}
	}

	c.procs[0].signal(syscall.SIGKILL)
	killed := time.Now()
	c.start(0)
	t.Logf("restarted %v after the kill", time.Since(killed).Round(time.Millisecond))
	// The retrying producer aborts (franz-go's documented answer to a
	// failure in a transaction).
	if err := retrying.EndTransaction(ctx, kgo.TryAbort); err != nil {
		t.Fatalf("the retrying producer's abort after the restart: %v", err)
	}
	l.aborted[1] = true
	state := func(id string) string {
		ds, err := adm.DescribeTransactions(ctx, id)
		if err != nil {
			return err.Error()
		}
		if d := ds[id]; d.Err != nil {
			return d.Err.Error()
		}
		return ds[id].State
	}
	for _, id := range []string{"killed-retry", "killed-timeout"} {
		for st := state(id); st != "CompleteAbort"; st = state(id) {
			if ctx.Err() != nil {
				t.Fatalf("%s: state %s, want CompleteAbort", id, st)
			}
			time.Sleep(100 * time.Millisecond)
		}
	}
	t.Logf("both transactions aborted %v after the kill", time.Since(killed).Round(time.Millisecond))
	l.aborted[3] = true
	// The timed-out producer was fenced by the coordinator's abort.
	if err := timedOut.EndTransaction(ctx, kgo.TryCommit); err == nil {
		t.Fatal("the producer whose transaction timed out committed it")
	}
	waitStable(ctx, t, adm, topic)
	l.check(ctx, t, c, topic, 4, true)
}
