//go:build unix

package kafka_test

import (
	"bytes"
	"context"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"ringlog/internal/testkit"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// A cluster of ringlog broker processes on loopback: each runs the
// metadata quorum's voter on a fixed port and its Kafka listener on a new
// port at every start (see ringlogProc.start).
type testCluster struct {
	t      *testing.T
	procs  []*ringlogProc
	voters string
	conf   string // server.properties shared by the brokers
	// racks, when set, are the brokers' broker.rack, by index.
	racks []string

	mu sync.Mutex
	// Every Kafka address a broker listened on (index into procs) and
	// its current one, for dial.
	addrIdx map[string]int
	addrNow map[int]string
	// earlier holds each broker's logs of its runs before the current one
	// (a restart starts a new log), for keep.
	earlier map[int][]string
}

// startCluster starts n brokers (ids 1..n) with the settings in props,
// and racks[i] as broker i+1's rack when given.
func startCluster(t *testing.T, n int, props string, racks ...string) *testCluster {
	t.Helper()
	if testing.Short() {
		// The race step (-short): the brokers are processes of their own,
		// not built with -race, so it would check only the test's client;
		// the whole suite's go test step runs every cluster test in full.
		t.Skip("starts broker processes")
	}
	bin := testkit.Binary(t)
	c := &testCluster{t: t, racks: racks}
	var vs []string
	for i := range n {
		vs = append(vs, fmt.Sprintf("%d@%s", i+1, testkit.FreeAddr(t)))
	}
	c.voters = strings.Join(vs, ",")
	c.conf = filepath.Join(t.TempDir(), "server.properties")
	if err := os.WriteFile(c.conf, []byte(props), 0o644); err != nil {
		t.Fatal(err)
	}
	for range n {
		c.procs = append(c.procs, &ringlogProc{t: t, bin: bin, dir: t.TempDir()})
	}
	var wg sync.WaitGroup
	for i := range c.procs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			c.start(i)
		}()
	}
	wg.Wait()
	t.Cleanup(func() {
		if t.Failed() {
			c.dumpLogs()
		}
	})
	c.waitBrokers(n)
	return c
}

// dumpLogs prints the end of every broker's log (without the start-up
// recovery lines, one per partition), and keeps them whole with the data
// when RINGLOG_TEST_KEEP names a directory.
func (c *testCluster) dumpLogs() {
	if os.Getenv("RINGLOG_TEST_SIGQUIT") != "" {
		// Goroutine dumps of the running brokers, for debugging a hang.
		for _, p := range c.procs {
			if p.cmd != nil && p.cmd.ProcessState == nil {
				p.cmd.Process.Signal(syscall.SIGQUIT)
				select {
				case err := <-p.done:
					p.done <- err
				case <-time.After(10 * time.Second):
				}
				os.WriteFile(filepath.Join(os.TempDir(), fmt.Sprintf("ringlog-broker-%s.log", filepath.Base(p.dir))), []byte(p.out.String()), 0o644)
			}
		}
	}
	c.keep()
	for i, p := range c.procs {
		if p.out == nil {
			continue
		}
		var lines []string
		for _, l := range strings.Split(p.out.String(), "\n") {
			if !strings.Contains(l, "recovered partition") {
				lines = append(lines, l)
			}
		}
		c.t.Logf("broker %d, last lines of its log:\n%s", i+1, strings.Join(lines[max(0, len(lines)-80):], "\n"))
	}
}

// start (re)starts broker i (index into procs; its node id is i+1).
func (c *testCluster) start(i int) {
	args := []string{"-node-id", fmt.Sprint(i + 1), "-controller-voters", c.voters, "-config", c.conf}
	if i < len(c.racks) {
		args = append(args, "-rack", c.racks[i])
	}
	c.mu.Lock()
	if c.addrIdx == nil {
		c.addrIdx, c.addrNow, c.earlier = map[string]int{}, map[int]string{}, map[int][]string{}
	}
	if out := c.procs[i].out; out != nil {
		c.earlier[i] = append(c.earlier[i], out.String())
	}
	c.mu.Unlock()
	c.procs[i].start(args...)
	c.mu.Lock()
	defer c.mu.Unlock()
	c.addrIdx[c.procs[i].addr], c.addrNow[i] = i, c.procs[i].addr
}

// keep writes every broker's whole log (all its runs) and a copy of its
// data directory under $RINGLOG_TEST_KEEP when that is set, so that a
// failure can be studied after the test removed its directories.
func (c *testCluster) keep() {
	root := os.Getenv("RINGLOG_TEST_KEEP")
	if root == "" {
		return
	}
	dir := filepath.Join(root, c.t.Name())
	if err := os.MkdirAll(dir, 0o755); err != nil {
		c.t.Logf("RINGLOG_TEST_KEEP: %v", err)
		return
	}
	for i, p := range c.procs {
		c.mu.Lock()
		runs := slices.Clone(c.earlier[i])
		c.mu.Unlock()
		if p.out != nil {
			runs = append(runs, p.out.String())
		}
		if err := os.WriteFile(filepath.Join(dir, fmt.Sprintf("broker-%d.log", i+1)), []byte(strings.Join(runs, "===== restart\n")), 0o644); err != nil {
			c.t.Logf("RINGLOG_TEST_KEEP: %v", err)
		}
		if err := os.CopyFS(filepath.Join(dir, fmt.Sprintf("data-%d", i+1)), os.DirFS(p.dir)); err != nil {
			c.t.Logf("RINGLOG_TEST_KEEP: copy of broker %d's data: %v", i+1, err)
		}
	}
	c.t.Logf("broker logs (every run) and data directories kept in %s", dir)
}

// dial is a kgo.Dialer that takes a client to a broker's current address
// when it dials one the broker listened on before a restart. A restarted
// broker listens on a new port here (see ringlogProc.start), where a real
// one keeps its own; without this, a client whose known addresses all went
// stale between two metadata refreshes (two brokers restarted) could not
// find the cluster again.
func (c *testCluster) dial(ctx context.Context, network, host string) (net.Conn, error) {
	c.mu.Lock()
	if i, ok := c.addrIdx[host]; ok {
		host = c.addrNow[i]
	}
	c.mu.Unlock()
	var d net.Dialer
	return d.DialContext(ctx, network, host)
}

// seeds lists the Kafka addresses of the running brokers.
func (c *testCluster) seeds() []string {
	var s []string
	for _, p := range c.procs {
		if p.cmd != nil && p.cmd.ProcessState == nil {
			s = append(s, p.addr)
		}
	}
	return s
}

func (c *testCluster) client(opts ...kgo.Opt) *kgo.Client {
	c.t.Helper()
	cl, err := kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(c.seeds()...), kgo.MetadataMinAge(100 * time.Millisecond)}, opts...)...)
	if err != nil {
		c.t.Fatal(err)
	}
	c.t.Cleanup(cl.Close)
	return cl
}

// waitBrokers waits until Metadata lists n live brokers. It asks a broker
// every time: kadm's BrokerMetadata answers from the client's cached
// broker list, which only the client's own metadata refresh (minutes
// apart) renews, so a first answer given before the last broker's
// registration reached that broker would stand. On failure it says which
// address gave each of the last answers, and what each running broker
// answers then.
func (c *testCluster) waitBrokers(n int) {
	c.t.Helper()
	cl := c.client()
	deadline := time.Now().Add(30 * time.Second)
	var answers []string
	for {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		shards := cl.RequestSharded(ctx, kmsg.NewPtrMetadataRequest())
		cancel()
		for _, sh := range shards {
			if sh.Err != nil {
				answers = append(answers, fmt.Sprintf("%s:%d: %v", sh.Meta.Host, sh.Meta.Port, sh.Err))
				continue
			}
			var ids []int32
			for _, b := range sh.Resp.(*kmsg.MetadataResponse).Brokers {
				ids = append(ids, b.NodeID)
			}
			if len(ids) == n {
				return
			}
			answers = append(answers, fmt.Sprintf("%s:%d (node %d) listed %v", sh.Meta.Host, sh.Meta.Port, sh.Meta.NodeID, ids))
		}
		if time.Now().After(deadline) {
			for i, p := range c.procs {
				if p.cmd == nil || p.cmd.ProcessState != nil {
					continue
				}
				pc, err := kgo.NewClient(kgo.SeedBrokers(p.addr))
				if err != nil {
					continue
				}
				ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
				bm, err := kadm.NewClient(pc).BrokerMetadata(ctx)
				cancel()
				pc.Close()
				c.t.Logf("broker %d (%s) lists %v (err %v)", i+1, p.addr, bm.Brokers, err)
			}
			c.t.Fatalf("Metadata did not list %d brokers in 30 s; the last answers:\n%s", n, strings.Join(answers[max(0, len(answers)-10):], "\n"))
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// createTopic creates topic with parts partitions of rf replicas and
// configs, and waits until every partition has a leader and rf in-sync
// replicas.
func (c *testCluster) createTopic(adm *kadm.Client, topic string, parts int32, rf int16, configs map[string]*string) kadm.CreateTopicResponse {
	c.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	resp, err := adm.CreateTopic(ctx, parts, rf, configs, topic)
	if err == nil {
		err = resp.Err
	}
	if err != nil {
		c.t.Fatal(err)
	}
	if err := c.waitISR(adm, topic, int(rf), 30*time.Second); err != nil {
		c.t.Fatal(err)
	}
	c.waitTopicEverywhere(topic)
	return resp
}

// waitTopicEverywhere waits until every running broker's own Metadata
// lists topic with a leader for each partition: the ISR is full from the
// creation on, so one broker's answer says nothing of whether another
// (the leader, say) has applied the topic yet.
func (c *testCluster) waitTopicEverywhere(topic string) {
	c.t.Helper()
	cl := c.client()
	deadline := time.Now().Add(30 * time.Second)
	for i, p := range c.procs {
		if p.cmd == nil || p.cmd.ProcessState != nil {
			continue
		}
		for {
			req := kmsg.NewPtrMetadataRequest()
			rt := kmsg.NewMetadataRequestTopic()
			rt.Topic = kmsg.StringPtr(topic)
			req.Topics = append(req.Topics, rt)
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
			resp, err := req.RequestWith(ctx, cl.Broker(i+1))
			cancel()
			ok := err == nil && len(resp.Topics) == 1 && resp.Topics[0].ErrorCode == 0 && len(resp.Topics[0].Partitions) > 0
			for _, pt := range resp.Topics {
				for _, pp := range pt.Partitions {
					ok = ok && pp.Leader >= 0
				}
			}
			if ok {
				break
			}
			if time.Now().After(deadline) {
				c.t.Fatalf("broker %d does not list %s with leaders after 30 s (err %v)", i+1, topic, err)
			}
			time.Sleep(50 * time.Millisecond)
		}
	}
}

// leaderIndex waits until Metadata names a leader of topic's partition
// (any broker answers, one that has not applied the topic yet too) and
// returns its index into procs.
func (c *testCluster) leaderIndex(topic string, partition int32) int {
	c.t.Helper()
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(100 * time.Millisecond) {
		if l := c.leaderOf(topic, partition); l >= 1 {
			return int(l - 1)
		}
		if time.Now().After(deadline) {
			c.t.Fatalf("no leader for %s-%d after 30 s", topic, partition)
		}
	}
}

// leaderOf returns the node id leading topic's partition.
func (c *testCluster) leaderOf(topic string, partition int32) int32 {
	c.t.Helper()
	adm := kadm.NewClient(c.client())
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	td, err := adm.ListTopics(ctx, topic)
	if err != nil {
		c.t.Fatal(err)
	}
	return td[topic].Partitions[partition].Leader
}

// clusterProps are settings that make failures show within seconds.
const clusterProps = `replica.lag.time.max.ms=2000
broker.session.timeout.ms=2000
broker.heartbeat.interval.ms=300
`

// TestClusterReplication: three broker processes, a topic with
// replication factor 3 and min.insync.replicas 2; an idempotent acks=all
// producer writes while the leader of partition 0 is killed and later
// restarted. Every acknowledged record is read back once, in order, and
// after a clean stop the three replicas' logs are byte for byte the same.
func TestClusterReplication(t *testing.T) {
	t.Parallel() // broker processes: the test waits on them far more than it computes
	if testing.Short() {
		t.Skip("starts three broker processes")
	}
	c := startCluster(t, 3, clusterProps)
	const topic, parts = "replicated", 3
	adm := kadm.NewClient(c.client())
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	resp, err := adm.CreateTopic(ctx, parts, 3, map[string]*string{"min.insync.replicas": kadm.StringPtr("2")}, topic)
	if err == nil {
		err = resp.Err
	}
	if err != nil {
		t.Fatal(err)
	}
	td, err := adm.ListTopics(ctx, topic)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range td[topic].Partitions {
		if len(p.Replicas) != 3 || len(p.ISR) != 3 || p.Leader < 1 {
			t.Fatalf("partition %d: replicas %v, ISR %v, leader %d", p.Partition, p.Replicas, p.ISR, p.Leader)
		}
	}

	prod := c.client(kgo.RecordPartitioner(kgo.ManualPartitioner()), kgo.RequiredAcks(kgo.AllISRAcks()),
		kgo.ProducerLinger(time.Millisecond), kgo.RetryBackoffFn(func(int) time.Duration { return 100 * time.Millisecond }))
	var mu sync.Mutex
	acked := map[int32]map[int64]string{}
	produce := func(from, to int) {
		t.Helper()
		var rs []*kgo.Record
		for i := from; i < to; i++ {
			rs = append(rs, &kgo.Record{Topic: topic, Partition: int32(i % parts), Value: fmt.Appendf(nil, "v-%d", i)})
		}
		res := prod.ProduceSync(ctx, rs...)
		if err := res.FirstErr(); err != nil {
			t.Fatalf("produce %d-%d: %v", from, to, err)
		}
		mu.Lock()
		for _, r := range res {
			if acked[r.Record.Partition] == nil {
				acked[r.Record.Partition] = map[int64]string{}
			}
			acked[r.Record.Partition][r.Record.Offset] = string(r.Record.Value)
		}
		mu.Unlock()
	}
	start := time.Now()
	produce(0, 3000)
	t.Logf("3000 records acknowledged by 3 replicas (acks=all) in %v", time.Since(start).Round(time.Millisecond))

	// Kill the leader of partition 0; the others take over and the
	// producer carries on.
	victim := int(c.leaderOf(topic, 0) - 1)
	t.Logf("killing broker %d, leader of partition 0", victim+1)
	c.procs[victim].signal(syscall.SIGKILL)
	killed := time.Now()
	produce(3000, 3001)
	t.Logf("first produce acknowledged %v after the kill", time.Since(killed).Round(time.Millisecond))
	produce(3001, 6000)
	if l := c.leaderOf(topic, 0); int(l) == victim+1 {
		t.Fatalf("broker %d still leads partition 0 after its kill", l)
	}
	// Back it comes, catches up and rejoins the ISR.
	c.start(victim)
	c.waitBrokers(3)
	produce(6000, 9000)
	deadline := time.Now().Add(30 * time.Second)
	for {
		td, err := adm.ListTopics(ctx, topic)
		full := err == nil
		for _, p := range td[topic].Partitions {
			full = full && len(p.ISR) == 3
		}
		if full {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("ISR not back to 3 replicas 30 s after the restart: %+v", td[topic].Partitions)
		}
		time.Sleep(100 * time.Millisecond)
	}

	// Everything acknowledged is there once, at its offset.
	cons := c.client(kgo.ConsumeTopics(topic), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	got := map[int32]map[int64]string{}
	n := 0
	for n < 9000 {
		fs := cons.PollFetches(ctx)
		if ctx.Err() != nil {
			t.Fatalf("consumed %d of 9000 acknowledged records", n)
		}
		fs.EachRecord(func(r *kgo.Record) {
			if got[r.Partition] == nil {
				got[r.Partition] = map[int64]string{}
			}
			if _, dup := got[r.Partition][r.Offset]; !dup {
				n++
			}
			got[r.Partition][r.Offset] = string(r.Value)
		})
	}
	for p, offs := range acked {
		for off, v := range offs {
			if got[p][off] != v {
				t.Fatalf("partition %d offset %d: acknowledged %q, read %q", p, off, v, got[p][off])
			}
		}
		if len(got[p]) != len(offs) {
			t.Fatalf("partition %d: %d records read, %d acknowledged (duplicates or losses)", p, len(got[p]), len(offs))
		}
	}

	// Stop cleanly; the replicas' logs are the same bytes.
	for _, p := range c.procs {
		if err := p.signal(syscall.SIGTERM); err != nil {
			t.Fatalf("SIGTERM: %v\n%s", err, p.out)
		}
	}
	for part := range parts {
		var first []byte
		for i, p := range c.procs {
			b := readPartitionLog(t, p.dir, fmt.Sprintf("%s-%d", topic, part))
			if i == 0 {
				first = b
				continue
			}
			if !bytes.Equal(b, first) {
				for j, q := range c.procs {
					ents, _ := filepath.Glob(filepath.Join(q.dir, fmt.Sprintf("%s-%d", topic, part), "*"))
					var files []string
					for _, e := range ents {
						if st, err := os.Stat(e); err == nil {
							files = append(files, fmt.Sprintf("%s:%d", filepath.Base(e), st.Size()))
						}
					}
					t.Logf("broker %d: %v", j+1, files)
				}
				t.Fatalf("partition %d: broker %d's log (%d bytes) differs from broker 1's (%d bytes)", part, i+1, len(b), len(first))
			}
		}
		if len(first) == 0 {
			t.Fatalf("partition %d: empty logs", part)
		}
	}
}

// readPartitionLog concatenates a partition's segment files in order.
func readPartitionLog(t *testing.T, dataDir, part string) []byte {
	t.Helper()
	segs, err := filepath.Glob(filepath.Join(dataDir, part, "*.log"))
	if err != nil {
		t.Fatal(err)
	}
	slices.Sort(segs)
	var all []byte
	for _, s := range segs {
		b, err := os.ReadFile(s)
		if err != nil {
			t.Fatal(err)
		}
		all = append(all, b...)
	}
	return all
}

// waitISR waits until every partition of topic has a leader and n replicas
// in its ISR, as the metadata reports it (adm is reused: a client per call
// would keep its connections until the test ends).
func (c *testCluster) waitISR(adm *kadm.Client, topic string, n int, timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		td, err := adm.ListTopics(ctx, topic)
		cancel()
		full := err == nil && td[topic].Err == nil && len(td[topic].Partitions) > 0
		if full {
			for _, p := range td[topic].Partitions {
				full = full && p.Leader >= 1 && len(p.ISR) == n
			}
		}
		if full {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%s: ISR not at %d replicas after %v (err %v): %+v\n%s", topic, n, timeout, err, td[topic].Partitions, c.views(topic))
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// views asks each running broker, and only it, for topic's metadata, and
// returns one line per broker: the live brokers and the controller it
// knows, and each partition as leader/epoch, ISR and offline replicas.
// The brokers' images may differ (a stale one, a fenced broker): which
// one holds what is where a liveness failure begins to be explained.
func (c *testCluster) views(topic string) string {
	var out []string
	for i, p := range c.procs {
		if p.cmd == nil || p.cmd.ProcessState != nil {
			continue
		}
		line := fmt.Sprintf("broker %d's view: ", i+1)
		pc, err := kgo.NewClient(kgo.SeedBrokers(p.addr), kgo.Dialer(c.dial))
		if err != nil {
			out = append(out, line+err.Error())
			continue
		}
		req := kmsg.NewPtrMetadataRequest()
		rt := kmsg.NewMetadataRequestTopic()
		rt.Topic = kmsg.StringPtr(topic)
		req.Topics = append(req.Topics, rt)
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		resp, err := req.RequestWith(ctx, pc.SeedBrokers()[0])
		cancel()
		pc.Close()
		if err != nil {
			out = append(out, line+err.Error())
			continue
		}
		var live []int32
		for _, b := range resp.Brokers {
			live = append(live, b.NodeID)
		}
		slices.Sort(live)
		line += fmt.Sprintf("live %v controller %d;", live, resp.ControllerID)
		for _, t := range resp.Topics {
			parts := slices.Clone(t.Partitions)
			slices.SortFunc(parts, func(a, b kmsg.MetadataResponseTopicPartition) int { return int(a.Partition - b.Partition) })
			for _, pp := range parts {
				line += fmt.Sprintf(" p%d %d/%d isr%v off%v", pp.Partition, pp.Leader, pp.LeaderEpoch, pp.ISR, pp.OfflineReplicas)
				if pp.ErrorCode != 0 {
					line += fmt.Sprintf(" err%d", pp.ErrorCode)
				}
			}
		}
		out = append(out, line)
	}
	// The quorum as its leader sees it: a broker whose image stopped
	// (its raft log no longer growing) shows a log end behind the rest.
	cl, err := kgo.NewClient(kgo.SeedBrokers(c.seeds()...), kgo.Dialer(c.dial))
	if err == nil {
		req := testkit.DescribeQuorumRequest()
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		resp, err := req.RequestWith(ctx, cl)
		cancel()
		cl.Close()
		line := "quorum: "
		switch {
		case err != nil:
			line += err.Error()
		case len(resp.Topics) != 1 || len(resp.Topics[0].Partitions) != 1:
			line += fmt.Sprintf("error %d, %d topics", resp.ErrorCode, len(resp.Topics))
		default:
			qp := resp.Topics[0].Partitions[0]
			line += fmt.Sprintf("leader %d term %d high watermark %d error %d; log ends:", qp.LeaderID, qp.LeaderEpoch, qp.HighWatermark, qp.ErrorCode)
			for _, v := range qp.CurrentVoters {
				line += fmt.Sprintf(" %d@%d", v.ReplicaID, v.LogEndOffset)
			}
		}
		out = append(out, line)
	}
	return strings.Join(out, "\n")
}

// stopProcess sends SIGSTOP to p and waits until the kernel shows every
// one of its threads stopped. kill(2) returns before they are: the kernel
// wakes one thread to begin the group stop, and until it gets a CPU the
// others run on; under load that let a follower fetch a record produced
// after the signal. Where there is no /proc it only signals.
func stopProcess(t *testing.T, p *os.Process) {
	t.Helper()
	if err := p.Signal(syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	dir := fmt.Sprintf("/proc/%d/task", p.Pid)
	deadline := time.Now().Add(10 * time.Second)
	for {
		tasks, err := os.ReadDir(dir)
		if err != nil {
			return
		}
		running := ""
		for _, task := range tasks {
			stat, err := os.ReadFile(filepath.Join(dir, task.Name(), "stat"))
			if err != nil {
				continue // the thread exited
			}
			// pid (comm) state ...: comm may hold spaces and parentheses.
			if i := bytes.LastIndexByte(stat, ')'); i >= 0 && i+2 < len(stat) && stat[i+2] != 'T' && stat[i+2] != 't' {
				running = fmt.Sprintf("thread %s in state %c", task.Name(), stat[i+2])
				break
			}
		}
		if running == "" {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("process %d not stopped 10 s after SIGSTOP: %s", p.Pid, running)
		}
		time.Sleep(time.Millisecond)
	}
}
