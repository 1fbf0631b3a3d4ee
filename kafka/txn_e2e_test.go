package kafka_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"

	"ringlog/broker"
)

// Transactions end to end with franz-go's transactional producer and a
// read_committed consumer, on one broker started as the binary starts it.

func produceTxn(t *testing.T, cl *kgo.Client, commit bool, values ...string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := cl.BeginTransaction(); err != nil {
		t.Fatal(err)
	}
	for _, v := range values {
		if err := cl.ProduceSync(ctx, &kgo.Record{Value: []byte(v)}).FirstErr(); err != nil {
			t.Fatalf("produce %s: %v", v, err)
		}
	}
	if err := cl.EndTransaction(ctx, kgo.TransactionEndTry(commit)); err != nil {
		t.Fatalf("end transaction (commit %v): %v", commit, err)
	}
}

func TestTxnCommitAbortReadCommitted(t *testing.T) {
	b := startBroker(t, brokerOpts{})
	createTopic(t, b, "txn", 3, nil)
	cl := b.client(kgo.TransactionalID("txn-commit-abort"), kgo.DefaultProduceTopic("txn"), kgo.RecordPartitioner(kgo.RoundRobinPartitioner()))
	produceTxn(t, cl, true, "c1", "c2", "c3")
	produceTxn(t, cl, false, "a1", "a2", "a3")
	produceTxn(t, cl, true, "c4", "c5", "c6")

	committed := consumeIso(t, b, "txn", kgo.ReadCommitted(), 6)
	for _, v := range committed {
		if strings.HasPrefix(v, "a") {
			t.Fatalf("read_committed read an aborted record: %v", committed)
		}
	}
	if len(committed) != 6 {
		t.Fatalf("read_committed read %d records, want the 6 committed: %v", len(committed), committed)
	}
	// The aborted records are in the log: read_uncommitted sees them.
	if all := consumeIso(t, b, "txn", kgo.ReadUncommitted(), 9); len(all) != 9 {
		t.Fatalf("read_uncommitted read %d records, want 9: %v", len(all), all)
	}
}

func TestTxnZombieFenced(t *testing.T) {
	b := startBroker(t, brokerOpts{})
	createTopic(t, b, "zombie", 1, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	old := b.client(kgo.TransactionalID("zombie-id"), kgo.DefaultProduceTopic("zombie"))
	if err := old.BeginTransaction(); err != nil {
		t.Fatal(err)
	}
	if err := old.ProduceSync(ctx, &kgo.Record{Value: []byte("zombie")}).FirstErr(); err != nil {
		t.Fatal(err)
	}
	// A new instance with the same transactional id fences the old one
	// and aborts its transaction.
	fresh := b.client(kgo.TransactionalID("zombie-id"), kgo.DefaultProduceTopic("zombie"))
	produceTxn(t, fresh, true, "fresh")
	err := old.ProduceSync(ctx, &kgo.Record{Value: []byte("zombie-2")}).FirstErr()
	if err == nil {
		err = old.EndTransaction(ctx, kgo.TryCommit)
	}
	if !errors.Is(err, kerr.ProducerFenced) && !errors.Is(err, kerr.InvalidProducerEpoch) {
		t.Fatalf("the zombie producer: %v, want PRODUCER_FENCED or INVALID_PRODUCER_EPOCH", err)
	}
	got := consumeIso(t, b, "zombie", kgo.ReadCommitted(), 1)
	if len(got) != 1 || got[0] != "fresh" {
		t.Fatalf("read_committed: %v, want only the new instance's record", got)
	}
}

func TestTxnTimeoutAborts(t *testing.T) {
	b := startBroker(t, brokerOpts{Config: func(c *broker.Config) { c.Txns.AbortTimedOutInterval = 50 * time.Millisecond }})
	createTopic(t, b, "slow", 1, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cl := b.client(kgo.TransactionalID("slow-id"), kgo.DefaultProduceTopic("slow"), kgo.TransactionTimeout(500*time.Millisecond))
	if err := cl.BeginTransaction(); err != nil {
		t.Fatal(err)
	}
	if err := cl.ProduceSync(ctx, &kgo.Record{Value: []byte("late")}).FirstErr(); err != nil {
		t.Fatal(err)
	}
	time.Sleep(1500 * time.Millisecond)
	// The coordinator aborted the transaction and bumped the epoch: the
	// commit is refused, and read_committed never shows the record.
	if err := cl.EndTransaction(ctx, kgo.TryCommit); err == nil {
		t.Fatal("a transaction past its timeout committed")
	}
	st := txnState(t, b, "slow-id")
	if st != "CompleteAbort" {
		t.Fatalf("state %s after the timeout, want CompleteAbort", st)
	}
	if got := consumeIso(t, b, "slow", kgo.ReadCommitted(), 0); len(got) != 0 {
		t.Fatalf("read_committed: %v", got)
	}
	// The LSO moved past the aborted transaction: a later one commits and
	// is read.
	cl2 := b.client(kgo.TransactionalID("slow-id"), kgo.DefaultProduceTopic("slow"))
	produceTxn(t, cl2, true, "next")
	if got := consumeIso(t, b, "slow", kgo.ReadCommitted(), 1); len(got) != 1 || got[0] != "next" {
		t.Fatalf("read_committed after the timeout: %v", got)
	}
}

// txnState describes a transactional id through the admin client.
func txnState(t *testing.T, b *testBroker, id string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	ds, err := b.admin().DescribeTransactions(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	d, ok := ds[id]
	if !ok || d.Err != nil {
		t.Fatalf("describe %s: %+v", id, d)
	}
	return d.State
}

// TestTxnStateSurvivesRestart: the coordinator's state comes back from
// __transaction_state after a restart. A transaction left open across
// the restart is still Ongoing with its partition (the replay); a new
// instance of the producer then fences the old one, whose transaction is
// aborted, and commits its own; read_committed shows the committed
// records only.
func TestTxnStateSurvivesRestart(t *testing.T) {
	b := startBroker(t, brokerOpts{})
	createTopic(t, b, "restart", 1, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	old := b.client(kgo.TransactionalID("restart-txn"), kgo.DefaultProduceTopic("restart"))
	produceTxn(t, old, true, "c1")
	if err := old.BeginTransaction(); err != nil {
		t.Fatal(err)
	}
	if err := old.ProduceSync(ctx, &kgo.Record{Value: []byte("open")}).FirstErr(); err != nil {
		t.Fatal(err)
	}

	b.Restart()
	if st := txnState(t, b, "restart-txn"); st != "Ongoing" {
		t.Fatalf("state %s after the restart, want the open transaction Ongoing", st)
	}
	fresh := b.client(kgo.TransactionalID("restart-txn"), kgo.DefaultProduceTopic("restart"))
	produceTxn(t, fresh, true, "c3")
	if err := old.EndTransaction(ctx, kgo.TryCommit); !errors.Is(err, kerr.ProducerFenced) && !errors.Is(err, kerr.InvalidProducerEpoch) {
		t.Fatalf("the fenced producer's commit: %v", err)
	}
	if got := consumeIso(t, b, "restart", kgo.ReadCommitted(), 2); strings.Join(got, " ") != "c1 c3" {
		t.Fatalf("read_committed: %v, want c1 c3", got)
	}
}
