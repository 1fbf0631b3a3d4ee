package main

import (
	"context"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"ringlog/internal/testkit"
)

// seedRecord is where an acknowledged record was written.
type seedRecord struct {
	partition int32
	offset    int64
}

// produceAcked produces n records "<prefix>-<i>" with acks=all (and
// idempotence, kgo's default) spread over the topic's partitions, and
// returns where each was acknowledged.
func produceAcked(t *testing.T, seeds []string, topic, prefix string, n int) map[string]seedRecord {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(seeds...), kgo.DefaultProduceTopic(topic), kgo.RequiredAcks(kgo.AllISRAcks()),
		kgo.RecordPartitioner(kgo.RoundRobinPartitioner()))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	var recs []*kgo.Record
	for i := range n {
		recs = append(recs, kgo.StringRecord(fmt.Sprintf("%s-%d", prefix, i)))
	}
	res := cl.ProduceSync(ctx, recs...)
	if err := res.FirstErr(); err != nil {
		t.Fatalf("produce %s: %v", prefix, err)
	}
	out := map[string]seedRecord{}
	for _, r := range res {
		out[string(r.Record.Value)] = seedRecord{r.Record.Partition, r.Record.Offset}
	}
	return out
}

// readBack reads topic from the start until every record of want was seen,
// and fails unless each sits where it was acknowledged.
func readBack(t *testing.T, seeds []string, topic string, want map[string]seedRecord) {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(seeds...), kgo.ConsumeTopics(topic), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	seen := map[string]bool{}
	for len(seen) < len(want) {
		fs := cl.PollFetches(ctx)
		if ctx.Err() != nil {
			t.Fatalf("read %d of %d acknowledged records of %s: %v", len(seen), len(want), topic, fs.Err())
		}
		fs.EachRecord(func(r *kgo.Record) {
			w, ok := want[string(r.Value)]
			if !ok {
				return
			}
			if w.partition != r.Partition || w.offset != r.Offset {
				t.Fatalf("%s at %d/%d, acknowledged at %d/%d", r.Value, r.Partition, r.Offset, w.partition, w.offset)
			}
			seen[string(r.Value)] = true
		})
	}
}

// readMeta reads a data directory's meta.properties.
func readMeta(t *testing.T, dir string) map[string]string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(dir, "meta.properties"))
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]string{}
	for l := range strings.SplitSeq(string(b), "\n") {
		if k, v, ok := strings.Cut(l, "="); ok {
			out[k] = v
		}
	}
	return out
}

// exitsWith starts the binary with args and waits until it exits,
// failing unless it failed saying want.
func exitsWith(t *testing.T, want string, args ...string) {
	t.Helper()
	p := start(t, args...)
	select {
	case err := <-p.done:
		p.done <- err
		if err == nil || !strings.Contains(p.out.String(), want) {
			t.Fatalf("%s: exit %v, want a failure saying %q:\n%s", strings.Join(args, " "), err, want, p.out.String())
		}
	case <-time.After(20 * time.Second):
		t.Fatalf("%s: still running, want a failure saying %q:\n%s", strings.Join(args, " "), want, p.out.String())
	}
}

// TestSingleNodeSeedsCluster: a broker that ran on its own (its one-voter
// local quorum) restarts as the first node of a cluster, its controller
// port named as the only voter and its recorded cluster id given; two
// broker-only nodes join it. Every record acknowledged before reads back
// at its offset, a partition moves to a new broker, and records produced
// after read back too. Then what must not start does not: a directory
// with its own quorum joining another cluster, a seed naming voters its
// quorum does not have, and a cluster member's directory started alone.
func TestSingleNodeSeedsCluster(t *testing.T) {
	t.Parallel() // broker processes: the test waits on them far more than it computes
	dir1 := t.TempDir()
	addr1 := testkit.FreeAddr(t)
	p := start(t, "-node-id", "1", "-listen", addr1, "-data-dir", dir1)
	p.waitFor(t, "ringlog started")
	cl, err := kgo.NewClient(kgo.SeedBrokers(addr1))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if _, err := kadm.NewClient(cl).CreateTopic(ctx, 3, 1, nil, "seeded"); err != nil {
		t.Fatal(err)
	}
	before := produceAcked(t, []string{addr1}, "seeded", "before", 300)
	// A group's committed offset, in __consumer_offsets.
	commit := kadm.Offsets{}
	commit.AddOffset("seeded", 1, 42, -1)
	r, err := kadm.NewClient(cl).CommitOffsets(ctx, "seed-group", commit)
	if err == nil {
		err = r.Error()
	}
	if err != nil {
		t.Fatalf("commit: %v", err)
	}
	cl.Close()
	if err := p.stop(t); err != nil {
		t.Fatalf("single node's exit: %v\n%s", err, p.out.String())
	}
	clusterID := readMeta(t, dir1)["cluster.id"]
	// A copy of the single node's directory, for the starts that must be
	// refused.
	copyDir := filepath.Join(t.TempDir(), "copy")
	if err := os.CopyFS(copyDir, os.DirFS(dir1)); err != nil {
		t.Fatal(err)
	}
	copyBytes := testkit.LogBytes(t, copyDir)

	// Node 1 seeds the cluster: its quorum is the cluster's.
	ctl1 := testkit.FreeAddr(t)
	voters := "1@" + ctl1
	props := filepath.Join(t.TempDir(), "server.properties")
	if err := os.WriteFile(props, []byte("broker.heartbeat.interval.ms=300\nbroker.session.timeout.ms=3000\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	c := &rolesCluster{t: t, conf: props, procs: map[int]*proc{}, ctlAddrs: map[int]string{1: ctl1}, addrs: map[int]string{1: addr1},
		dirs: map[int]string{1: dir1}, admins: map[int]string{}, voters: voters, clusterID: clusterID}
	t.Cleanup(func() {
		if t.Failed() {
			for id, p := range c.procs {
				out := p.out.String()
				t.Logf("node %d, last lines:\n%s", id, out[max(0, len(out)-4000):])
			}
		}
	})
	c.start(1, "-controller-voters", voters, "-cluster-id", clusterID)
	c.startBroker(2, "-controller-voters", voters, "-cluster-id", clusterID)
	c.startBroker(3, "-controller-bootstrap-servers", ctl1, "-cluster-id", clusterID)
	waitBrokerIDs(t, addr1, 1, 2, 3)
	readBack(t, c.seeds(), "seeded", before)
	// The seed's voter is known by its controller port, not by the local
	// quorum's in-memory address: a controller added later reaches it.
	waitVoterEndpoint(t, addr1, 1, ctl1)
	adm, err := kgo.NewClient(kgo.SeedBrokers(c.seeds()...))
	if err != nil {
		t.Fatal(err)
	}
	defer adm.Close()
	kad := kadm.NewClient(adm)
	if fo, err := kad.FetchOffsets(ctx, "seed-group"); err != nil || fo.Error() != nil {
		t.Fatalf("fetch offsets: %v %v", err, fo.Error())
	} else if o, ok := fo.Lookup("seeded", 1); !ok || o.At != 42 {
		t.Fatalf("seed-group's offset of seeded-1 after seeding: %+v, committed 42", o)
	}

	// Partition 0 moves to brokers 2 and 3, copied from node 1's log.
	req := kadm.AlterPartitionAssignmentsReq{}
	req.Assign("seeded", 0, []int32{2, 3})
	resps, err := kad.AlterPartitionAssignments(ctx, req)
	if err == nil {
		err = resps.Error()
	}
	if err != nil {
		t.Fatalf("reassign seeded-0 to [2 3]: %v", err)
	}
	waitAssignment(t, adm, "seeded", func(a map[int32][]int32) bool { return fmt.Sprint(a[0]) == "[2 3]" })
	after := produceAcked(t, c.seeds(), "seeded", "after", 300)
	// A topic created now spreads over the three brokers.
	if _, err := kad.CreateTopic(ctx, 3, 3, nil, "grown"); err != nil {
		t.Fatal(err)
	}
	grown := produceAcked(t, c.seeds(), "grown", "grown", 100)
	for k, v := range after {
		before[k] = v
	}
	readBack(t, c.seeds(), "seeded", before)
	readBack(t, c.seeds(), "grown", grown)

	// A single-node directory that would join a cluster with its own
	// quorum: refused when its cluster id is not the cluster's (Kafka's
	// meta.properties check), and when it is (a copied directory) because
	// the cluster's log would replace its quorum and the broker delete its
	// topics. Its logs are left as they were.
	other := testkit.FreeAddr(t)
	exitsWith(t, "inconsistent cluster id", "-node-id", "1", "-process-roles", "broker", "-listen", testkit.FreeAddr(t),
		"-data-dir", copyDir, "-controller-voters", "7@"+other)
	exitsWith(t, "a broker-only node cannot join another quorum", "-node-id", "1", "-process-roles", "broker",
		"-listen", testkit.FreeAddr(t), "-data-dir", copyDir, "-controller-voters", "7@"+other, "-cluster-id", clusterID)
	exitsWith(t, "cannot join the quorum at controller.quorum.bootstrap.servers", "-node-id", "1",
		"-listen", testkit.FreeAddr(t), "-data-dir", copyDir, "-controller-bootstrap-servers", ctl1, "-cluster-id", clusterID,
		"-controller-listen", testkit.FreeAddr(t))
	// A controller-only node would leave its partitions unserved.
	exitsWith(t, "process.roles=controller would leave its partitions unserved", "-node-id", "1", "-process-roles", "controller",
		"-data-dir", copyDir, "-controller-voters", "1@"+testkit.FreeAddr(t), "-cluster-id", clusterID)
	// A seed naming voters beside itself: they would form an empty quorum.
	exitsWith(t, "names voters 7 beside it", "-node-id", "1", "-listen", testkit.FreeAddr(t), "-data-dir", copyDir,
		"-controller-voters", "1@"+testkit.FreeAddr(t)+",7@"+other, "-cluster-id", clusterID)
	if n := testkit.LogBytes(t, copyDir); n != copyBytes {
		t.Fatalf("refused starts changed the copy's logs: %d bytes, %d before", n, copyBytes)
	}
	// A cluster member's directory started alone waits for no quorum.
	if err := c.procs[2].stop(t); err != nil {
		t.Fatalf("broker 2's exit: %v", err)
	}
	exitsWith(t, "holds the metadata quorum of a cluster", "-node-id", "2", "-listen", testkit.FreeAddr(t),
		"-data-dir", c.dirs[2], "-cluster-id", clusterID)
}

// waitVoterEndpoint waits until DescribeQuorum, asked of the broker at
// addr, names voter id's controller endpoint as want (KIP-853's nodes).
func waitVoterEndpoint(t *testing.T, addr string, id int32, want string) {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(addr))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	var last string
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(100 * time.Millisecond) {
		req := testkit.DescribeQuorumRequest()
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		resp, err := req.RequestWith(ctx, cl)
		cancel()
		if err != nil {
			last = err.Error()
			continue
		}
		last = fmt.Sprintf("%+v", resp.Nodes)
		for _, n := range resp.Nodes {
			for _, l := range n.Listeners {
				if n.NodeID == id && net.JoinHostPort(l.Host, strconv.Itoa(int(l.Port))) == want {
					return
				}
			}
		}
	}
	t.Fatalf("DescribeQuorum names no voter %d at %s: %s", id, want, last)
}
