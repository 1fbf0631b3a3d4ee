package kafka_test

import (
	"context"
	"fmt"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

// TestTxnPipelinedProducesStayInOrder: a transactional producer pipelines
// its produce requests (several in flight on one connection); each is
// verified with the coordinator (KIP-890 part 1) before it is appended,
// and the verifications may finish in any order. The appends must still
// happen in the requests' order: they failed with OUT_OF_ORDER_SEQUENCE
// when a later request's verification finished first (found by franz-go's
// TestTxnEtl).
func TestTxnPipelinedProducesStayInOrder(t *testing.T) {
	b := startBroker(t, brokerOpts{})
	createTopic(t, b, "pipe", 2, nil)
	cl := b.client(kgo.TransactionalID("pipe"), kgo.DefaultProduceTopic("pipe"), kgo.ProducerLinger(0),
		kgo.ProducerBatchMaxBytes(4<<10), kgo.MaxBufferedRecords(100_000))
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	const rounds, perRound = 4, 5000
	var failed atomic.Value
	for r := range rounds {
		if err := cl.BeginTransaction(); err != nil {
			t.Fatal(err)
		}
		for i := range perRound {
			cl.Produce(ctx, &kgo.Record{Key: []byte(strconv.Itoa(r*perRound + i)), Value: make([]byte, 100)}, func(_ *kgo.Record, err error) {
				if err != nil {
					failed.CompareAndSwap(nil, err)
				}
			})
		}
		if err := cl.Flush(ctx); err != nil {
			t.Fatal(err)
		}
		if err, _ := failed.Load().(error); err != nil {
			t.Fatalf("round %d: %v", r, err)
		}
		if err := cl.EndTransaction(ctx, kgo.TryCommit); err != nil {
			t.Fatalf("round %d: commit: %v", r, err)
		}
	}
	if got := consumeIso(t, b, "pipe", kgo.ReadCommitted(), rounds*perRound); len(got) != rounds*perRound {
		t.Fatalf("read_committed read %d records, want %d", len(got), rounds*perRound)
	}
}

// etl runs franz-go's consume-transform-produce pattern (its TestTxnEtl):
// records are produced to in; members of a group read them with
// GroupTransactSession, read_committed, and in one transaction per poll
// produce each to out and commit the offsets they read (TxnOffsetCommit);
// members come and go meanwhile (rebalances abort transactions). Every
// record must reach out exactly once as read_committed sees it. newClient
// makes a client with the given options (one broker, or a cluster).
func etl(t *testing.T, newClient func(...kgo.Opt) *kgo.Client, in, out string, records int) {
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	prod := newClient(kgo.DefaultProduceTopic(in), kgo.RecordPartitioner(kgo.RoundRobinPartitioner()))
	var rs []*kgo.Record
	for i := range records {
		rs = append(rs, &kgo.Record{Key: []byte(strconv.Itoa(i)), Value: []byte("v")})
	}
	if err := prod.ProduceSync(ctx, rs...).FirstErr(); err != nil {
		t.Fatal(err)
	}

	var committed atomic.Int64 // records whose transaction committed
	var errMu sync.Mutex
	var errs []error
	fail := func(err error) {
		errMu.Lock()
		errs = append(errs, err)
		errMu.Unlock()
	}
	member := func(id int, quitAfter int, wg *sync.WaitGroup) {
		defer wg.Done()
		sess, err := kgo.NewGroupTransactSession(
			append(clientOptsFor(newClient),
				kgo.TransactionalID(fmt.Sprintf("etl-%s-%d", out, id)), kgo.TransactionTimeout(30*time.Second),
				kgo.ConsumerGroup("etl-"+out), kgo.ConsumeTopics(in), kgo.FetchIsolationLevel(kgo.ReadCommitted()),
				kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.DefaultProduceTopic(out),
				kgo.SessionTimeout(10*time.Second), kgo.HeartbeatInterval(300*time.Millisecond))...)
		if err != nil {
			fail(err)
			return
		}
		defer sess.Close()
		for txns := 0; quitAfter < 0 || txns < quitAfter; {
			if ctx.Err() != nil || committed.Load() >= int64(records) {
				return
			}
			pctx, pcancel := context.WithTimeout(ctx, 200*time.Millisecond)
			fs := sess.PollFetches(pctx)
			pcancel()
			if fs.NumRecords() == 0 {
				continue
			}
			if err := sess.Begin(); err != nil {
				fail(fmt.Errorf("member %d: begin: %w", id, err))
				return
			}
			n := 0
			fs.EachRecord(func(r *kgo.Record) {
				n++
				sess.Produce(ctx, &kgo.Record{Key: r.Key, Value: r.Value}, func(_ *kgo.Record, err error) {
					if err != nil && ctx.Err() == nil {
						fail(fmt.Errorf("member %d: produce: %w", id, err))
					}
				})
			})
			ok, err := sess.End(ctx, kgo.TryCommit)
			if err != nil {
				fail(fmt.Errorf("member %d: end: %w", id, err))
				return
			}
			if ok {
				committed.Add(int64(n))
				txns++
			}
		}
	}
	var wg sync.WaitGroup
	for i := range 2 {
		wg.Add(1)
		go member(i, -1, &wg)
	}
	// A member that leaves after two transactions, and one that joins
	// later: two rebalances while transactions run.
	wg.Add(1)
	go member(2, 2, &wg)
	time.Sleep(300 * time.Millisecond)
	wg.Add(1)
	go member(3, -1, &wg)
	wg.Wait()
	if len(errs) > 0 {
		t.Fatalf("%d errors, the first: %v", len(errs), errs[0])
	}
	if c := committed.Load(); c != int64(records) {
		t.Fatalf("%d records committed through the transactions, want %d", c, records)
	}

	// Exactly once: every key once in out, as read_committed sees it.
	cons := newClient(kgo.ConsumeTopics(out), kgo.FetchIsolationLevel(kgo.ReadCommitted()),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.FetchMaxWait(100*time.Millisecond))
	seen := map[string]int{}
	total := 0
	for total < records && ctx.Err() == nil {
		pctx, pcancel := context.WithTimeout(ctx, time.Second)
		cons.PollFetches(pctx).EachRecord(func(r *kgo.Record) { seen[string(r.Key)]++; total++ })
		pcancel()
	}
	pctx, pcancel := context.WithTimeout(ctx, 500*time.Millisecond)
	cons.PollFetches(pctx).EachRecord(func(r *kgo.Record) { seen[string(r.Key)]++; total++ })
	pcancel()
	if total != records || len(seen) != records {
		t.Fatalf("out holds %d committed records of %d keys, want %d once each", total, len(seen), records)
	}
}

// clientOptsFor recovers the seed options of newClient's clients for a
// GroupTransactSession, which makes its own client.
func clientOptsFor(newClient func(...kgo.Opt) *kgo.Client) []kgo.Opt {
	cl := newClient()
	defer cl.Close()
	return []kgo.Opt{kgo.SeedBrokers(cl.OptValue(kgo.SeedBrokers).([]string)...)}
}

func TestTxnGroupTransactSessionETL(t *testing.T) {
	b := startBroker(t, brokerOpts{})
	createTopic(t, b, "etl-in", 4, nil)
	createTopic(t, b, "etl-out", 4, nil)
	etl(t, b.client, "etl-in", "etl-out", 3000)
}
