package main

import (
	"bufio"
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"ringlog/internal/testkit"
)

// envETL makes the test binary the consume-transform-produce process of
// TestTxnETLKilled: the broker address, in its value.
const envETL = "RINGLOG_TEST_TXN_ETL"

func init() {
	if addr := os.Getenv(envETL); addr != "" {
		os.Exit(etlMain(addr))
	}
}

// etlMain copies etl-in to etl-out with franz-go's GroupTransactSession,
// one transaction per poll (the records produced and the group's offsets
// committed together), until it is killed or has found nothing new for 5 s.
func etlMain(addr string) int {
	sess, err := kgo.NewGroupTransactSession(kgo.SeedBrokers(addr),
		kgo.TransactionalID("etl-killed"), kgo.TransactionTimeout(20*time.Second),
		kgo.ConsumerGroup("etl-killed"), kgo.ConsumeTopics("etl-in"), kgo.FetchIsolationLevel(kgo.ReadCommitted()),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.DefaultProduceTopic("etl-out"),
		// A static member: the next instance takes the killed one's place
		// at once instead of after its session timeout.
		kgo.InstanceID("etl-0"), kgo.SessionTimeout(6*time.Second), kgo.HeartbeatInterval(200*time.Millisecond),
		// Small fetches of small batches: a transaction per few hundred
		// records, so that kills land in the middle of transactions.
		kgo.FetchMaxBytes(8<<10), kgo.FetchMaxPartitionBytes(4<<10))
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer sess.Close()
	ctx := context.Background()
	// Fence the killed instance first, as Java's initTransactions does:
	// its transaction is aborted now rather than at its timeout. Killed
	// after its TxnOffsetCommit and before its EndTxn (v2 clients send
	// the offsets and the add of their partition in one request, which
	// the coordinator finishes after a kill), it left offsets pending,
	// and the group's offsets are UNSTABLE_OFFSET_COMMIT to this
	// instance's require_stable fetch until its transaction ends:
	// franz-go loads its producer id lazily, at the first transaction,
	// which needs those offsets.
	if _, _, err := sess.Client().ProducerID(ctx); err != nil {
		fmt.Fprintln(os.Stderr, "producer id:", err)
		return 1
	}
	// 5 s without a record end it (the test then checks what is left).
	last := time.Now()
	for {
		if time.Since(last) > 5*time.Second {
			return 0
		}
		pctx, cancel := context.WithTimeout(ctx, 250*time.Millisecond)
		fs := sess.PollRecords(pctx, 200)
		cancel()
		if fs.NumRecords() == 0 {
			continue
		}
		last = time.Now()
		if err := sess.Begin(); err != nil {
			fmt.Fprintln(os.Stderr, "begin:", err)
			return 1
		}
		fs.EachRecord(func(r *kgo.Record) {
			sess.Produce(ctx, &kgo.Record{Key: r.Key, Value: r.Value}, nil)
		})
		// The work of a transform: a window in which a kill finds the
		// transaction open.
		time.Sleep(5 * time.Millisecond)
		committed, err := sess.End(ctx, kgo.TryCommit)
		if err != nil {
			fmt.Fprintln(os.Stderr, "end:", err)
			return 1
		}
		if committed {
			fmt.Println("committed")
		}
	}
}

// TestTxnETLKilled: a consume-transform-produce process (the test binary
// run again, franz-go's GroupTransactSession) copies 20,000 records from
// one topic to another through transactions and is SIGKILLed 10 times at
// random moments, each time started again with the same transactional id
// and group. The output, read read_committed, holds every input record
// exactly once: a killed instance's open transaction is aborted when the
// next one fences it, and its offsets were committed only with what it
// produced.
func TestTxnETLKilled(t *testing.T) {
	t.Parallel() // broker processes: the test waits on them far more than it computes
	const records, kills = 40000, 10
	addr := testkit.FreeAddr(t)
	b := start(t, "-listen", addr, "-data-dir", t.TempDir())
	b.waitFor(t, "ringlog started")
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	cl, err := kgo.NewClient(kgo.SeedBrokers(addr), kgo.DefaultProduceTopic("etl-in"),
		kgo.RecordPartitioner(kgo.RoundRobinPartitioner()), kgo.ProducerBatchMaxBytes(4<<10))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	adm := kadm.NewClient(cl)
	for _, topic := range []string{"etl-in", "etl-out"} {
		if res, err := adm.CreateTopic(ctx, 4, 1, nil, topic); err != nil || res.Err != nil {
			t.Fatalf("creating %s: %v %v", topic, err, res.Err)
		}
	}
	var rs []*kgo.Record
	for i := range records {
		rs = append(rs, &kgo.Record{Key: []byte(strconv.Itoa(i)), Value: []byte("v")})
	}
	if err := cl.ProduceSync(ctx, rs...).FirstErr(); err != nil {
		t.Fatal(err)
	}

	rng := rand.New(rand.NewPCG(uint64(time.Now().UnixNano()), 7))
	// run starts an ETL process; commits receives a value per
	// transaction it committed.
	run := func() (*exec.Cmd, chan struct{}) {
		cmd := exec.Command(os.Args[0], "-test.run", "^$")
		cmd.Env = append(os.Environ(), envETL+"="+addr)
		cmd.Stderr = os.Stderr
		out, err := cmd.StdoutPipe()
		if err != nil {
			t.Fatal(err)
		}
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		commits := make(chan struct{}, 1<<16)
		go func() {
			sc := bufio.NewScanner(out)
			for sc.Scan() {
				commits <- struct{}{}
			}
			close(commits)
		}()
		return cmd, commits
	}
	// left is the input the group has not committed yet (no transaction
	// is open when it is asked: no ETL process runs).
	left := func() int64 {
		committed, err := adm.FetchOffsets(ctx, "etl-killed")
		if err != nil {
			t.Fatal(err)
		}
		ends, err := adm.ListEndOffsets(ctx, "etl-in")
		if err != nil {
			t.Fatal(err)
		}
		var n int64
		ends.Each(func(o kadm.ListedOffset) {
			c, _ := committed.Lookup("etl-in", o.Partition)
			n += o.Offset - max(c.At, 0)
		})
		return n
	}
	txns, killed := 0, 0
	for k := 0; k < kills && left() > 0; k++ {
		cmd, commits := run()
		// Killed a random moment after its first commit: in the middle of
		// a transaction, most of the time.
		select {
		case _, ok := <-commits:
			if !ok {
				cmd.Wait() // ended by itself: asked again above
				continue
			}
		case <-time.After(time.Minute):
			out := b.out.String()
			t.Fatalf("ETL process %d committed nothing in a minute; the broker's last lines:\n%s", k, out[max(0, len(out)-5000):])
		}
		time.Sleep(time.Duration(rng.IntN(400)) * time.Millisecond)
		cmd.Process.Signal(syscall.SIGKILL)
		cmd.Wait()
		killed++
		for range commits {
			txns++
		}
		txns++
	}
	// Processes that run to the end, until nothing is left (one that
	// found nothing for 5 s on a loaded machine is started again).
	for tries := 0; left() > 0; tries++ {
		if tries == 10 {
			t.Fatalf("%d input records still not committed after 10 more ETL processes", left())
		}
		last, commits := run()
		if err := last.Wait(); err != nil {
			t.Fatalf("an ETL process: %v", err)
		}
		for range commits {
			txns++
		}
	}

	cons, err := kgo.NewClient(kgo.SeedBrokers(addr), kgo.ConsumeTopics("etl-out"), kgo.FetchIsolationLevel(kgo.ReadCommitted()),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.FetchMaxWait(100*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	defer cons.Close()
	seen := map[string]int{}
	total := 0
	for idle := 0; idle < 3 && ctx.Err() == nil; {
		pctx, pcancel := context.WithTimeout(ctx, time.Second)
		fs := cons.PollFetches(pctx)
		pcancel()
		if fs.NumRecords() == 0 {
			idle++
		}
		fs.EachRecord(func(r *kgo.Record) { seen[string(r.Key)]++; total++ })
	}
	for i := range records {
		if n := seen[strconv.Itoa(i)]; n != 1 {
			t.Fatalf("input record %d is in the output %d times (read_committed read %d records)", i, n, total)
		}
	}
	if total != records {
		t.Fatalf("read_committed read %d records of the output, want %d", total, records)
	}
	// And read_uncommitted shows what the killed instances left behind.
	ends, err := adm.ListEndOffsets(ctx, "etl-out")
	if err != nil {
		t.Fatal(err)
	}
	var end int64
	ends.Each(func(o kadm.ListedOffset) { end += o.Offset })
	t.Logf("%d kills, %d transactions committed: %d records exactly once; the output's logs end at %d (aborted records and markers included)",
		killed, txns, total, end)
	if killed < kills/2 {
		t.Fatalf("only %d kills landed before the input was done", killed)
	}
	b.stop(t)
}
