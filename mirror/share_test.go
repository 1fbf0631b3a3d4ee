//go:build unix

package mirror

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"ringlog/internal/testkit"
	"ringlog/internal/testkit/testbroker"
)

// seqProducer writes "pP-N" to every partition of topic in turn until
// stopped, keeping what the source acknowledged, in offset order per
// partition.
type seqProducer struct {
	mu    sync.Mutex
	acked map[int32][]string
	err   error
	stop  chan struct{}
	done  chan struct{}
}

func produceSeq(t *testing.T, addr, topic string, partitions int32) *seqProducer {
	t.Helper()
	prod := client(t, addr, kgo.RecordPartitioner(kgo.ManualPartitioner()), kgo.ProducerLinger(time.Millisecond))
	s := &seqProducer{acked: map[int32][]string{}, stop: make(chan struct{}), done: make(chan struct{})}
	go func() {
		defer close(s.done)
		ctx := context.Background()
		for i := 0; ; i++ {
			select {
			case <-s.stop:
				if err := prod.Flush(ctx); err != nil {
					s.mu.Lock()
					s.err = err
					s.mu.Unlock()
				}
				return
			default:
			}
			p := int32(i) % partitions
			v := fmt.Sprintf("p%d-%d", p, int32(i)/partitions)
			prod.Produce(ctx, &kgo.Record{Topic: topic, Partition: p, Value: []byte(v)}, func(_ *kgo.Record, err error) {
				s.mu.Lock()
				defer s.mu.Unlock()
				if err != nil {
					s.err = err
					return
				}
				s.acked[p] = append(s.acked[p], v)
			})
			if i%8 == 7 {
				time.Sleep(2 * time.Millisecond) // a few thousand records a second
			}
		}
	}()
	return s
}

// finish stops the producer and returns what the source acknowledged.
func (s *seqProducer) finish(t *testing.T) (map[int32][]string, int) {
	t.Helper()
	close(s.stop)
	<-s.done
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.err != nil {
		t.Fatalf("produce to the source: %v", s.err)
	}
	total := 0
	for _, vs := range s.acked {
		total += len(vs)
	}
	return s.acked, total
}

// checkExactlyOnce fails t unless the remote topic on addr holds, read
// committed, exactly the acknowledged records, in order per partition.
func checkExactlyOnce(t *testing.T, addr, remote string, acked map[int32][]string, total int) {
	t.Helper()
	got := readAll(t, addr, remote, total, 30*time.Second)
	for p, want := range acked {
		var have []string
		for _, r := range got[p] {
			have = append(have, string(r.Value))
		}
		if len(have) != len(want) {
			t.Errorf("%s/%d holds %d records, the source acknowledged %d", remote, p, len(have), len(want))
		}
		for i := range min(len(have), len(want)) {
			if have[i] != want[i] {
				t.Errorf("%s/%d at %d: %s, want %s (a duplicate or a gap)", remote, p, i, have[i], want[i])
				break
			}
		}
	}
}

// flowProc is one `ringlog mirror` process started with flags, and its log.
type flowProc struct {
	name string
	cmd  *exec.Cmd
	out  testkit.Buffer
}

func startFlowProc(t *testing.T, name string, args ...string) *flowProc {
	t.Helper()
	m := &flowProc{name: name}
	m.cmd = exec.Command(testkit.Binary(t), append([]string{"mirror"}, args...)...)
	m.cmd.Stdout, m.cmd.Stderr = &m.out, &m.out
	if err := m.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		m.cmd.Process.Signal(syscall.SIGCONT)
		m.cmd.Process.Signal(syscall.SIGTERM)
		m.cmd.Wait()
	})
	return m
}

// waitFor is testkit.WaitFor that shows the processes' logs on failure.
// procWait bounds the waits on mirror processes: a suite run at load 10
// to 20 stalled one for 12 s (its 100 ms progress ticker silent). The
// failures of TestMirrorTasksMaxChangeFencesZombie first put on load
// were a bug: the new process waited for the zombie's open transaction
// to time out (fencePreviousCount).
const procWait = 60 * time.Second

func waitFor(t *testing.T, d time.Duration, what string, dump func(), cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(d)
	for !cond() {
		if time.Now().After(deadline) {
			dump()
			t.Fatalf("timed out after %v waiting for %s", d, what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

var progressRecords = regexp.MustCompile(`mirror: progress" .*?records=(\d+)`)

// records is what the process's last progress line says it mirrored.
func (m *flowProc) records() int {
	all := progressRecords.FindAllStringSubmatch(m.out.String(), -1)
	if len(all) == 0 {
		return 0
	}
	n, _ := strconv.Atoi(all[len(all)-1][1])
	return n
}

// TestMirrorSharedFlow: two `ringlog mirror` processes run one flow with
// tasks.max = 4 and share its partitions through the flow's group on the
// source, each mirroring some of them, neither failing. Then one is
// paused past its session (a zombie: the other takes its tasks and fences
// them) and resumed, the other is SIGKILLed mid-run, and a third process
// joins and takes work. A producer writes to the source all along: the
// target holds, read committed, every acknowledged record exactly once and
// in order per partition.
func TestMirrorSharedFlow(t *testing.T) {
	t.Parallel()
	cfg := testbroker.Config(t.TempDir())
	// A session short enough for the test to see a member expire.
	cfg.Groups.MinSessionTimeout = 200 * time.Millisecond
	a := testbroker.StartBroker(t, cfg).Addr
	b := startBroker(t)
	const partitions = 8
	createTopic(t, kadm.NewClient(client(t, a)), "s", partitions, nil)
	prod := produceSeq(t, a, "s", partitions)

	conf := filepath.Join(t.TempDir(), "mm2.properties")
	if err := os.WriteFile(conf, []byte(strings.Join([]string{
		"clusters = A, B", "A.bootstrap.servers = " + a, "B.bootstrap.servers = " + b,
		"A->B.enabled = true", "A->B.topics = s", "A->B.tasks.max = 4",
		"A->B.consumer.session.timeout.ms = 1000", "emit.checkpoints.enabled = false",
	}, "\n")), 0o644); err != nil {
		t.Fatal(err)
	}
	args := []string{"-config", conf, "-progress", "100ms"}
	p1, p2 := startFlowProc(t, "p1", args...), startFlowProc(t, "p2", args...)
	dump := func() {
		for _, p := range []*flowProc{p1, p2} {
			t.Logf("%s:\n%s", p.name, p.out.String())
		}
	}
	waitFor(t, procWait, "both processes mirroring", dump, func() bool { return p1.records() > 0 && p2.records() > 0 })
	// A second of steady sharing: a process that fenced the other would
	// fail and start over.
	time.Sleep(time.Second)
	for _, p := range []*flowProc{p1, p2} {
		if strings.Contains(p.out.String(), "flow failed") {
			dump()
			t.Fatalf("%s failed while sharing the flow", p.name)
		}
		if !strings.Contains(p.out.String(), "mirror: tasks assigned") {
			dump()
			t.Fatalf("%s was assigned no task", p.name)
		}
	}
	t.Logf("shared: p1 mirrored %d records, p2 %d", p1.records(), p2.records())

	// p1 is paused past its session: p2 takes every task, fencing p1's
	// transactional ids. Resumed, p1 is a zombie until it rejoins. (Not
	// with -short, for time: the suite's go test step runs it in full.)
	if !testing.Short() {
		if err := p1.cmd.Process.Signal(syscall.SIGSTOP); err != nil {
			t.Fatal(err)
		}
		time.Sleep(2500 * time.Millisecond)
		if err := p1.cmd.Process.Signal(syscall.SIGCONT); err != nil {
			t.Fatal(err)
		}
		time.Sleep(1500 * time.Millisecond)
	}

	// p2 is killed mid-run; p3 joins (with -short, p1 takes all).
	if err := p2.cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	p2.cmd.Wait()
	last := p1
	if !testing.Short() {
		last = startFlowProc(t, "p3", args...)
	}
	before := last.records()
	waitFor(t, procWait, "a process mirroring after the kill", func() { dump(); t.Logf("p3:\n%s", last.out.String()) },
		func() bool { return last.records() > before })
	acked, total := prod.finish(t)
	checkExactlyOnce(t, b, "A.s", acked, total)
	if t.Failed() || testing.Verbose() {
		dump()
		if last != p1 {
			t.Logf("p3:\n%s", last.out.String())
		}
	}
	if t.Failed() {
		dumpTopic(t, b, "mm2-offsets.A.internal")
		dumpRuns(t, b, "A.s")
	}
	t.Logf("%d records mirrored by three processes sharing one flow", total)
}

// writeMirrorConfig writes an MM2 properties file of the flow A->B with
// the given tasks.max and returns the binary's arguments for it.
func writeMirrorConfig(t *testing.T, a, b string, tasks int) []string {
	t.Helper()
	conf := filepath.Join(t.TempDir(), "mm2.properties")
	if err := os.WriteFile(conf, []byte(strings.Join([]string{
		"clusters = A, B", "A.bootstrap.servers = " + a, "B.bootstrap.servers = " + b,
		"A->B.enabled = true", "A->B.topics = s", fmt.Sprintf("A->B.tasks.max = %d", tasks),
		"A->B.consumer.session.timeout.ms = 1000", "emit.checkpoints.enabled = false",
	}, "\n")), 0o644); err != nil {
		t.Fatal(err)
	}
	return []string{"-config", conf, "-progress", "100ms"}
}

// TestMirrorTasksMaxChangeFencesZombie: a process running the flow with
// tasks.max = 4 is paused (a zombie holding tasks 2 and 3, likely in the
// middle of a transaction); a process with tasks.max = 2 takes the flow
// over. Its own tasks' ids fence only tasks 0 and 1 of the old count: it
// must fence every id of the recorded previous count too, or the zombie,
// resumed, commits records the new owner mirrors again.
func TestMirrorTasksMaxChangeFencesZombie(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: processes paused and resumed for seconds (the go test step runs it)")
	}
	t.Parallel()
	cfg := testbroker.Config(t.TempDir())
	cfg.Groups.MinSessionTimeout = 200 * time.Millisecond
	a := testbroker.StartBroker(t, cfg).Addr
	b := startBroker(t)
	const partitions = 8
	createTopic(t, kadm.NewClient(client(t, a)), "s", partitions, nil)
	prod := produceSeq(t, a, "s", partitions)

	old := startFlowProc(t, "old", writeMirrorConfig(t, a, b, 4)...)
	var neu *flowProc
	dump := func() {
		t.Logf("old:\n%s", old.out.String())
		if neu != nil {
			t.Logf("new:\n%s", neu.out.String())
		}
	}
	waitFor(t, procWait, "the old process mirroring", dump, func() bool { return old.records() > 0 })
	time.Sleep(500 * time.Millisecond)
	// Paused with a transaction of task 2 or 3 open on the offsets topic:
	// ids the new count's tasks (0 and 1) do not fence themselves.
	pauseInTransaction(t, old, b, "mm2-offsets.A.internal", 2)
	neu = startFlowProc(t, "new", writeMirrorConfig(t, a, b, 2)...)
	// Well within the zombie's transaction timeout (a minute): the new
	// process must fence the previous count's ids before it reads the
	// committed offsets, which waits for that transaction.
	waitFor(t, 20*time.Second, "the new process mirroring", dump, func() bool { return neu.records() > 0 })
	time.Sleep(500 * time.Millisecond)
	if err := old.cmd.Process.Signal(syscall.SIGCONT); err != nil {
		t.Fatal(err)
	}
	time.Sleep(1500 * time.Millisecond)
	acked, total := prod.finish(t)
	checkExactlyOnce(t, b, "A.s", acked, total)
	if !strings.Contains(neu.out.String(), "tasks.max changed: fencing") {
		t.Errorf("the new process did not fence the previous count's tasks")
	}
	if t.Failed() || testing.Verbose() {
		dump()
	}
}

// dumpTopic logs every record of topic at addr, read uncommitted with
// the control records: what a failed exactly-once check needs to tell a
// stale resume from a lost commit.
func dumpTopic(t *testing.T, addr, topic string) {
	t.Helper()
	cl := client(t, addr, kgo.ConsumeTopics(topic), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		kgo.KeepControlRecords(), kgo.FetchMaxWait(200*time.Millisecond))
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
	defer cancel()
	var b strings.Builder
	for ctx.Err() == nil {
		cl.PollFetches(ctx).EachRecord(func(r *kgo.Record) {
			fmt.Fprintf(&b, "%d@%d pid %d/%d txn %v control %v %s = %s\n", r.Partition, r.Offset, r.ProducerID, r.ProducerEpoch,
				r.Attrs.IsTransactional(), r.Attrs.IsControl(), r.Key, r.Value)
		})
	}
	t.Logf("%s:\n%s", topic, b.String())
}

// dumpRuns logs a topic's records read_uncommitted (aborted ones
// included) as runs: consecutive records of one partition with the same
// producer id, epoch and kind (data or control, and a control record's
// value), one line each. It shows which transaction wrote which offsets
// and which marker ended it: where a duplicate read_committed came from.
func dumpRuns(t *testing.T, addr, topic string) {
	t.Helper()
	cl := client(t, addr, kgo.ConsumeTopics(topic), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		kgo.KeepControlRecords(), kgo.FetchMaxWait(200*time.Millisecond))
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
	defer cancel()
	type run struct {
		from, to   int64
		pid        int64
		epoch      int16
		txn, ctl   bool
		first, val string
	}
	runs := map[int32][]run{}
	for ctx.Err() == nil {
		cl.PollFetches(ctx).EachRecord(func(r *kgo.Record) {
			rs := runs[r.Partition]
			val := ""
			if r.Attrs.IsControl() {
				val = fmt.Sprintf("%x", r.Key) // version and type: 0000 0000 abort, 0000 0001 commit
			}
			if n := len(rs); n > 0 {
				l := &rs[n-1]
				if l.pid == r.ProducerID && l.epoch == r.ProducerEpoch && l.ctl == r.Attrs.IsControl() && l.val == val && l.to+1 == r.Offset {
					l.to = r.Offset
					return
				}
			}
			runs[r.Partition] = append(rs, run{r.Offset, r.Offset, r.ProducerID, r.ProducerEpoch, r.Attrs.IsTransactional(), r.Attrs.IsControl(), string(r.Value), val})
		})
	}
	var b strings.Builder
	for p := int32(0); p < 64; p++ {
		for _, r := range runs[p] {
			fmt.Fprintf(&b, "%d@%d-%d pid %d/%d txn %v control %v %s first %.16q\n", p, r.from, r.to, r.pid, r.epoch, r.txn, r.ctl, r.val, r.first)
		}
	}
	t.Logf("%s, runs:\n%s", topic, b.String())
}

// pauseInTransaction stops p (SIGSTOP) at a moment when a transaction of
// one of its tasks numbered from minTask on is open with records on
// topic at addr (the source offsets are written, the commit is not),
// trying again until it is, and returns the number of attempts.
func pauseInTransaction(t *testing.T, p *flowProc, addr, topic string, minTask int) int {
	t.Helper()
	adm := kadm.NewClient(client(t, addr))
	taskOf := regexp.MustCompile(`-([0-9]+)(\.[a-z0-9]+)?$`)
	deadline := time.Now().Add(60 * time.Second)
	for attempt := 1; ; attempt++ {
		if err := p.cmd.Process.Signal(syscall.SIGSTOP); err != nil {
			t.Fatal(err)
		}
		// What the process sent before it stopped lands.
		time.Sleep(20 * time.Millisecond)
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		txns, err := adm.ListTransactions(ctx, nil, []string{"Ongoing"})
		pids := map[int64]string{}
		txns.Each(func(x kadm.ListedTransaction) {
			if m := taskOf.FindStringSubmatch(x.TxnID); m != nil {
				if k, _ := strconv.Atoi(m[1]); k >= minTask {
					pids[x.ProducerID] = x.TxnID
				}
			}
		})
		var holder string
		if err == nil && len(pids) > 0 {
			var producers kadm.DescribedProducersTopics
			producers, err = adm.DescribeProducers(ctx, kadm.TopicsSet{topic: nil})
			producers.EachProducer(func(d kadm.DescribedProducer) {
				if id, ok := pids[d.ProducerID]; ok && d.CurrentTxnStartOffset >= 0 {
					holder = id
				}
			})
		}
		cancel()
		if holder != "" {
			t.Logf("%s paused with %s's transaction open on %s (attempt %d)", p.name, holder, topic, attempt)
			return attempt
		}
		if err := p.cmd.Process.Signal(syscall.SIGCONT); err != nil {
			t.Fatal(err)
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: no transaction of task %d or later open on %s in %d pauses (last error: %v)\n%s", p.name, minTask, topic, attempt, err, p.out.String())
		}
		time.Sleep(time.Duration(attempt%7) * time.Millisecond)
	}
}

// TestMirrorSharedFlowFollowsNewPartitions: two workers share a flow
// (tasks.max = 3); the source topic grows from 2 to 5 partitions. The
// group hands out the new partitions, whichever of the worker's refresh
// and the group's leader sees them first, and the remote topic, grown
// first, gets each record once.
func TestMirrorSharedFlowFollowsNewPartitions(t *testing.T) {
	t.Parallel()
	cfg := testbroker.Config(t.TempDir())
	cfg.Groups.MinSessionTimeout = 200 * time.Millisecond // quick rebalances
	a := testbroker.StartBroker(t, cfg).Addr
	b := startBroker(t)
	admA := kadm.NewClient(client(t, a))
	createTopic(t, admA, "g", 2, nil)
	ctx := context.Background()
	produce := func(partitions int32, from, to int) {
		// A new client: one that knew the topic with fewer partitions
		// would fail the records of the new ones.
		prod := client(t, a, kgo.RecordPartitioner(kgo.ManualPartitioner()))
		var rs []*kgo.Record
		for i := from; i < to; i++ {
			rs = append(rs, &kgo.Record{Topic: "g", Partition: int32(i) % partitions, Value: fmt.Appendf(nil, "%d", i)})
		}
		if err := prod.ProduceSync(ctx, rs...).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	produce(2, 0, 100)
	p := map[string]string{
		"clusters": "A, B", "A.bootstrap.servers": a, "B.bootstrap.servers": b,
		"A->B.enabled": "true", "A->B.topics": "g", "A->B.tasks.max": "3", "emit.checkpoints.enabled": "false",
		"A->B.consumer.session.timeout.ms": "1000",
		"refresh.topics.interval.seconds":  "0.3", "emit.heartbeats.interval.seconds": "0.2",
	}
	var logs [2]testkit.Buffer
	for i := range logs {
		flows, err := LoadProperties(p)
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan struct{})
		go func() {
			defer close(done)
			Run(ctx, flows, Options{Logger: slog.New(slog.NewTextHandler(&logs[i], nil))})
		}()
		t.Cleanup(func() { cancel(); <-done })
	}
	defer func() {
		for i := range logs {
			if t.Failed() {
				t.Logf("worker %d:\n%s", i, logs[i].String())
			}
		}
	}()
	readAll(t, b, "A.g", 100, 15*time.Second)
	if _, err := admA.UpdatePartitions(ctx, 5, "g"); err != nil {
		t.Fatal(err)
	}
	produce(5, 100, 200)
	got := readAll(t, b, "A.g", 200, 20*time.Second)
	seen := map[string]bool{}
	total := 0
	for part, rs := range got {
		for _, r := range rs {
			if seen[string(r.Value)] {
				t.Fatalf("A.g/%d: %s twice", part, r.Value)
			}
			seen[string(r.Value)] = true
			total++
		}
	}
	if len(got[4]) == 0 || total != 200 {
		t.Fatalf("A.g: %d records, %d in partition 4: want 200, some in the new partitions", total, len(got[4]))
	}
	// Both share the grown topic once the group has settled (a worker
	// that rejoined after its replan waits for the other's next
	// heartbeat), and neither failed on the way.
	testkit.WaitFor(t, 10*time.Second, "both workers assigned tasks", func() bool {
		return strings.Contains(logs[0].String(), "tasks assigned") && strings.Contains(logs[1].String(), "tasks assigned")
	})
	for i := range logs {
		if strings.Contains(logs[i].String(), "flow failed") {
			t.Fatalf("worker %d failed", i)
		}
	}
}
