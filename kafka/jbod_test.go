package kafka_test

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"ringlog/broker"
	"ringlog/engine"
	"ringlog/internal/testkit/testbroker"
)

// jbodDirs is a broker configuration with three log directories (the
// first, the broker's own, and two more).
func jbodDirs(t testing.TB, root string) (dirs []string, opts brokerOpts) {
	for _, n := range []string{"d0", "d1", "d2"} {
		dirs = append(dirs, filepath.Join(root, n))
	}
	return dirs, brokerOpts{Dir: dirs[0], Config: func(c *broker.Config) { c.LogDirs = dirs[1:] }}
}

// TestJBODDescribeLogDirs: a broker with three log.dirs places the nine
// partitions of a new topic three in each (fewest partitions first, every
// directory holding the same count of __consumer_offsets' before), and
// DescribeLogDirs lists every directory with its own partitions and its
// volume's space; DescribeConfigs reports all three in log.dirs.
func TestJBODDescribeLogDirs(t *testing.T) {
	dirs, opts := jbodDirs(t, t.TempDir())
	b := startBroker(t, opts)
	createTopic(t, b, "spread", 9, nil)
	adm, ctx := b.admin(), adminCtx(t)
	all, err := adm.DescribeAllLogDirs(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	described := all[b.nodeID]
	if len(all) != 1 || len(described) != 3 {
		t.Fatalf("log dirs: %+v", all)
	}
	totals := map[string]int{}
	for _, dir := range dirs {
		abs, _ := filepath.Abs(dir)
		d, ok := described[abs]
		if !ok || d.Err != nil || d.TotalBytes <= 0 || d.UsableBytes <= 0 {
			t.Fatalf("dir %s: %+v (ok %v)", abs, d, ok)
		}
		if n := len(d.Topics["spread"]); n != 3 {
			t.Errorf("%s holds %d partitions of spread, want 3: %v", abs, n, d.Topics["spread"])
		}
		for topic, ps := range d.Topics {
			totals[abs] += len(ps)
			for p := range ps {
				if _, err := filepathStat(filepath.Join(abs, topic+"-"+itoa32(p))); err != nil {
					t.Errorf("DescribeLogDirs says %s-%d is in %s: %v", topic, p, abs, err)
				}
			}
		}
	}
	lo, hi := 1<<30, 0
	for _, n := range totals {
		lo, hi = min(lo, n), max(hi, n)
	}
	if hi-lo > 1 {
		t.Errorf("partitions per directory %v: not even", totals)
	}

	rc, err := adm.DescribeBrokerConfigs(ctx, b.nodeID)
	if err != nil {
		t.Fatal(err)
	}
	var got string
	for _, r := range rc {
		for _, c := range r.Configs {
			if c.Key == "log.dirs" && c.Value != nil {
				got = *c.Value
			}
		}
	}
	if n := len(strings.Split(got, ",")); n != 3 {
		t.Errorf("log.dirs %q, want the three directories", got)
	}

	// The raw answer at v0 too: three directories.
	c := dialAdmin(t, b.Addr)
	resp := c.do(0, kmsg.NewPtrDescribeLogDirsRequest()).(*kmsg.DescribeLogDirsResponse)
	if len(resp.Dirs) != 3 {
		t.Fatalf("v0: %+v", resp)
	}
}

func filepathStat(path string) (os.FileInfo, error) { return os.Stat(path) }

func itoa32(n int32) string { return strconv.Itoa(int(n)) }

// TestJBODAlterReplicaLogDirs: AlterReplicaLogDirs moves a replica to
// another log directory while an idempotent kgo producer writes at
// acks=all; DescribeLogDirs shows the future log in the destination while
// the move runs; every acknowledged record is read back once, in order,
// after the move and after a restart; the codes for an unknown or relative
// directory and an unknown partition are Kafka's.
func TestJBODAlterReplicaLogDirs(t *testing.T) {
	dirs, opts := jbodDirs(t, t.TempDir())
	var pause atomic.Bool
	paused, resume, done := make(chan struct{}), make(chan struct{}), make(chan struct{}, 1)
	opts.Config = func(c *broker.Config) {
		c.LogDirs = dirs[1:]
		c.MoveHook = func(_ engine.TP, step engine.MoveStep) {
			switch {
			case step == engine.MoveCopiedClosed && pause.Load():
				close(paused)
				<-resume
			case step == engine.MoveDone:
				done <- struct{}{}
			}
		}
	}
	b := startBroker(t, opts)
	createTopic(t, b, "moving", 1, map[string]string{"segment.bytes": "1048576"})
	tp := engine.TP{Topic: "moving", Partition: 0}

	// A producer that runs through the move, keeping what was acknowledged.
	cl := b.client(kgo.RequiredAcks(kgo.AllISRAcks()), kgo.DefaultProduceTopic("moving"), kgo.ProducerLinger(0))
	var mu sync.Mutex
	var acked []string
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		value := strings.Repeat("x", 1000)
		for i := 0; ; i++ {
			select {
			case <-stop:
				return
			default:
			}
			v := strconv.Itoa(i) + value
			cl.Produce(context.Background(), &kgo.Record{Value: []byte(v)}, func(r *kgo.Record, err error) {
				if err == nil {
					mu.Lock()
					acked = append(acked, string(r.Value))
					mu.Unlock()
				}
			})
			if i%200 == 199 {
				cl.Flush(context.Background())
			}
		}
	}()
	waitAcked := func(n int) {
		t.Helper()
		deadline := time.Now().Add(10 * time.Second)
		for {
			mu.Lock()
			got := len(acked)
			mu.Unlock()
			if got >= n {
				return
			}
			if time.Now().After(deadline) {
				t.Fatalf("%d records acknowledged, want %d", got, n)
			}
			time.Sleep(10 * time.Millisecond)
		}
	}
	waitAcked(2500) // 2.5 MB: two closed segments and an active one

	c := dialAdmin(t, b.Addr)
	alter := func(v int16, dir string, topic string) int16 {
		t.Helper()
		req := kmsg.NewPtrAlterReplicaLogDirsRequest()
		d := kmsg.NewAlterReplicaLogDirsRequestDir()
		d.Dir = dir
		d.Topics = []kmsg.AlterReplicaLogDirsRequestDirTopic{{Topic: topic, Partitions: []int32{0}}}
		req.Dirs = append(req.Dirs, d)
		resp := c.do(v, req).(*kmsg.AlterReplicaLogDirsResponse)
		if len(resp.Topics) != 1 || len(resp.Topics[0].Partitions) != 1 {
			t.Fatalf("v%d: %+v", v, resp)
		}
		return resp.Topics[0].Partitions[0].ErrorCode
	}
	var from string
	for _, ps := range b.Engine.Sizes() {
		if ps.TP == tp {
			from = ps.Dir
		}
	}
	var to string
	for _, d := range dirs {
		if abs, _ := filepath.Abs(d); abs != from {
			to = abs
			break
		}
	}
	wantCode(t, "unknown dir", alter(0, filepath.Join(filepath.Dir(to), "nosuch"), "moving"), kerr.LogDirNotFound)
	wantCode(t, "relative dir", alter(1, "d1", "moving"), kerr.LogDirNotFound)
	wantCode(t, "unknown topic", alter(2, to, "nosuch"), kerr.UnknownTopicOrPartition)

	pause.Store(true)
	wantCode(t, "the move", alter(2, to, "moving"), nil)
	<-paused
	resp := c.do(4, kmsg.NewPtrDescribeLogDirsRequest()).(*kmsg.DescribeLogDirsResponse)
	var current, future bool
	for _, d := range resp.Dirs {
		for _, rt := range d.Topics {
			for _, rp := range rt.Partitions {
				if rt.Topic != "moving" {
					continue
				}
				switch {
				case rp.IsFuture && d.Dir == to && rp.Size > 0 && rp.OffsetLag > 0:
					future = true
				case !rp.IsFuture && d.Dir == from:
					current = true
				default:
					t.Errorf("moving-%d in %s: %+v", rp.Partition, d.Dir, rp)
				}
			}
		}
	}
	if !current || !future {
		t.Fatalf("during the move: current log listed %v, future log %v: %+v", current, future, resp.Dirs)
	}
	close(resume)
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("the move did not finish")
	}
	mu.Lock()
	atMove := len(acked)
	mu.Unlock()
	waitAcked(atMove + 500) // it takes appends in its new place
	close(stop)
	wg.Wait()
	cl.Flush(context.Background())

	for _, ps := range b.Engine.Sizes() {
		if ps.TP == tp && (ps.Dir != to || ps.Future) {
			t.Fatalf("after the move: %+v", ps)
		}
	}
	mu.Lock()
	want := slices.Clone(acked)
	mu.Unlock()
	readBack := func(b *testBroker) {
		t.Helper()
		cons := b.client(kgo.ConsumeTopics("moving"), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
		ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
		defer cancel()
		var got []string
		for len(got) < len(want) {
			fs := cons.PollFetches(ctx)
			if ctx.Err() != nil {
				t.Fatalf("read %d of %d records", len(got), len(want))
			}
			fs.EachRecord(func(r *kgo.Record) { got = append(got, string(r.Value)) })
		}
		// Acknowledged ones, once each, in the order they were
		// acknowledged (one producer, one partition).
		seen := map[string]bool{}
		i := 0
		for _, v := range got {
			if seen[v] {
				t.Fatalf("record %.8s read twice", v)
			}
			seen[v] = true
			if i < len(want) && v == want[i] {
				i++
			}
		}
		if i != len(want) {
			t.Fatalf("acknowledged record %d (%.8s) missing or out of order", i, want[i])
		}
	}
	readBack(b)
	b.Stop()
	b = startBroker(t, opts)
	readBack(b)
	if where := partitionDirsOf(t, dirs, "moving-0"); where != to {
		t.Fatalf("after the restart moving-0 is in %s, want %s", where, to)
	}
}

// partitionDirsOf finds the directory of dirs holding the folder name.
func partitionDirsOf(t testing.TB, dirs []string, name string) string {
	t.Helper()
	where := ""
	for _, d := range dirs {
		if _, err := os.Stat(filepath.Join(d, name)); err == nil {
			if where != "" {
				t.Fatalf("%s in %s and %s", name, where, d)
			}
			where, _ = filepath.Abs(d)
		}
	}
	return where
}

// TestJBODMissingDirOffline: a log directory missing at a start (a disk
// that did not mount) takes only its partitions offline, as Kafka's JBOD
// does: DescribeLogDirs lists it with KAFKA_STORAGE_ERROR, Metadata shows
// its partitions leaderless with the broker in offline_replicas and
// AlterReplicaLogDirs answers KAFKA_STORAGE_ERROR; the partitions of the
// other directories serve.
func TestJBODMissingDirOffline(t *testing.T) {
	dirs, opts := jbodDirs(t, t.TempDir())
	b := startBroker(t, opts)
	const topic = "jbod"
	createTopic(t, b, topic, 6, nil)
	cl := b.client(kgo.RecordPartitioner(kgo.ManualPartitioner()))
	produceEach(t, cl, topic, []int32{0, 1, 2, 3, 4, 5}, 3, "before")
	cl.Close()
	b.Stop()
	var lost, kept []int32
	for p := range int32(6) {
		if partitionDirsOf(t, dirs, topic+"-"+itoa32(p)) == absOf(dirs[2]) {
			lost = append(lost, p)
		} else {
			kept = append(kept, p)
		}
	}
	if len(lost) != 2 {
		t.Fatalf("partitions in %s: %v", dirs[2], lost)
	}
	if err := os.Rename(dirs[2], dirs[2]+".unmounted"); err != nil {
		t.Fatal(err)
	}
	// Not startBroker: some of __consumer_offsets' partitions are in the
	// missing directory, so the broker never coordinates every group.
	cfg := testbroker.Config(dirs[0])
	opts.Config(&cfg)
	tb := testbroker.StartBroker(t, cfg)
	b = &testBroker{Broker: tb, t: t, dir: dirs[0], nodeID: cfg.NodeID}
	b.Engine = tb.Engine()
	w := dialWire(t, b.Addr)
	for _, p := range lost {
		deadline := time.Now().Add(10 * time.Second)
		for {
			mp := metadataPartition(t, w, topic, p)
			if mp.Leader == -1 && slices.Equal(mp.OfflineReplicas, []int32{b.nodeID}) && mp.ErrorCode == kerr.LeaderNotAvailable.Code {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("metadata of %s-%d: %+v", topic, p, mp)
			}
			time.Sleep(10 * time.Millisecond)
		}
	}
	for _, p := range kept {
		if mp := metadataPartition(t, w, topic, p); mp.Leader != b.nodeID || len(mp.OfflineReplicas) != 0 {
			t.Fatalf("metadata of %s-%d: %+v", topic, p, mp)
		}
	}
	cl = b.client(kgo.RecordPartitioner(kgo.ManualPartitioner()))
	produceEach(t, cl, topic, kept, 2, "after")

	c := dialAdmin(t, b.Addr)
	resp := c.do(4, kmsg.NewPtrDescribeLogDirsRequest()).(*kmsg.DescribeLogDirsResponse)
	if len(resp.Dirs) != 3 {
		t.Fatalf("DescribeLogDirs: %+v", resp)
	}
	for _, d := range resp.Dirs {
		if d.Dir == absOf(dirs[2]) {
			wantCode(t, "the missing directory", d.ErrorCode, kerr.KafkaStorageError)
		} else {
			wantCode(t, d.Dir, d.ErrorCode, nil)
		}
	}
	req := kmsg.NewPtrAlterReplicaLogDirsRequest()
	rd := kmsg.NewAlterReplicaLogDirsRequestDir()
	rd.Dir = absOf(dirs[2])
	rd.Topics = []kmsg.AlterReplicaLogDirsRequestDirTopic{{Topic: topic, Partitions: []int32{kept[0]}}}
	req.Dirs = append(req.Dirs, rd)
	ar := c.do(2, req).(*kmsg.AlterReplicaLogDirsResponse)
	wantCode(t, "a move to the missing directory", ar.Topics[0].Partitions[0].ErrorCode, kerr.KafkaStorageError)
}

func absOf(p string) string {
	a, _ := filepath.Abs(p)
	return a
}

// TestJBODAuthorization: with an authorizer and no ACL, a principal that
// is not a super user gets CLUSTER_AUTHORIZATION_FAILED from
// AlterReplicaLogDirs (for every partition; Kafka checks ALTER on the
// cluster) and from DescribeLogDirs (no directory listed; DESCRIBE), and
// nothing moves.
func TestJBODAuthorization(t *testing.T) {
	dirs, opts := jbodDirs(t, t.TempDir())
	cfg := testbroker.Config(dirs[0])
	opts.Config(&cfg)
	cfg.Authorizer = true
	tb := testbroker.StartBroker(t, cfg)
	eng := tb.Engine()
	if _, err := eng.CreateTopic("guarded", 1, -1, nil, false); err != nil {
		t.Fatal(err)
	}
	var from string
	for _, ps := range eng.Sizes() {
		if ps.TP.Topic == "guarded" {
			from = ps.Dir
		}
	}
	to := absOf(dirs[0])
	if to == from {
		to = absOf(dirs[1])
	}
	c := dialAdmin(t, tb.Addr)
	req := kmsg.NewPtrAlterReplicaLogDirsRequest()
	rd := kmsg.NewAlterReplicaLogDirsRequestDir()
	rd.Dir = to
	rd.Topics = []kmsg.AlterReplicaLogDirsRequestDirTopic{{Topic: "guarded", Partitions: []int32{0}}, {Topic: "nosuch", Partitions: []int32{0}}}
	req.Dirs = append(req.Dirs, rd)
	ar := c.do(2, req).(*kmsg.AlterReplicaLogDirsResponse)
	n := 0
	for _, rt := range ar.Topics {
		for _, rp := range rt.Partitions {
			wantCode(t, rt.Topic, rp.ErrorCode, kerr.ClusterAuthorizationFailed)
			n++
		}
	}
	if n != 2 {
		t.Fatalf("%d partitions answered: %+v", n, ar)
	}
	dr := c.do(4, kmsg.NewPtrDescribeLogDirsRequest()).(*kmsg.DescribeLogDirsResponse)
	wantCode(t, "DescribeLogDirs", dr.ErrorCode, kerr.ClusterAuthorizationFailed)
	if len(dr.Dirs) != 0 {
		t.Fatalf("directories described to a principal without DESCRIBE: %+v", dr.Dirs)
	}
	for _, ps := range eng.Sizes() {
		if ps.TP.Topic == "guarded" && (ps.Future || ps.Dir != from) {
			t.Fatalf("a refused move moved: %+v", ps)
		}
	}
}
