//go:build unix

package kafka_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// kcat (librdkafka) against a cluster of three brokers: its metadata view
// of a replicated topic, acks=all produce and consume through a broker
// kill. librdkafka follows leaders on its own (metadata refresh on
// NOT_LEADER, its own retry and backoff), independently of kgo.

// kcatCluster runs kcat with seeds as bootstrap servers and returns its
// standard output and error. A non-zero exit or a failed
// delivery fails the test; librdkafka's complaints about a broker that is
// down (still listed until the controller fences it) do not.
func kcatCluster(t *testing.T, bin string, seeds []string, stdin []byte, args ...string) (string, string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	args = append([]string{"-b", strings.Join(seeds, ","), "-q"}, args...)
	cmd := exec.CommandContext(ctx, bin, args...)
	cmd.Stdin = bytes.NewReader(stdin)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("kcat %s: %v\n%s", strings.Join(args, " "), err, stderr.String())
	}
	if s := stderr.String(); strings.Contains(s, "Delivery failed") {
		t.Fatalf("kcat %s:\n%s", strings.Join(args, " "), s)
	}
	return stdout.String(), stderr.String()
}

// kcatMetadata is the part of `kcat -L -J` the test reads.
type kcatMetadata struct {
	Brokers []struct {
		ID   int32  `json:"id"`
		Name string `json:"name"`
	} `json:"brokers"`
	Topics []struct {
		Topic      string `json:"topic"`
		Error      string `json:"error"`
		Partitions []struct {
			Partition int32 `json:"partition"`
			Leader    int32 `json:"leader"`
			Replicas  []struct {
				ID int32 `json:"id"`
			} `json:"replicas"`
			ISRs []struct {
				ID int32 `json:"id"`
			} `json:"isrs"`
		} `json:"partitions"`
	} `json:"topics"`
}

// TestClusterKcat: a topic with replication factor 3 (created with kadm:
// kcat cannot create topics) as kcat sees it, three replicas and three in
// the ISR per partition; kcat produces with acks=all, then the leader of
// partition 0 is killed and kcat produces again and consumes everything
// while it is down; after its restart kcat reads everything from it.
func TestClusterKcat(t *testing.T) {
	t.Parallel() // broker processes: the test waits on them far more than it computes
	if testing.Short() {
		t.Skip("starts three broker processes")
	}
	bin := kcatBin(t)
	c := startCluster(t, 3, clusterProps)
	const topic, parts = "kcat-replicated", 3
	adm := kadm.NewClient(c.client())
	c.createTopic(adm, topic, parts, 3, map[string]*string{"min.insync.replicas": kadm.StringPtr("2")})

	// kcat's view of the topic.
	out, _ := kcatCluster(t, bin, c.seeds(), nil, "-L", "-J", "-t", topic)
	var md kcatMetadata
	if err := json.Unmarshal([]byte(out), &md); err != nil {
		t.Fatalf("kcat -L -J: %v\n%s", err, out)
	}
	if len(md.Brokers) != 3 || len(md.Topics) != 1 || md.Topics[0].Error != "" || len(md.Topics[0].Partitions) != parts {
		t.Fatalf("kcat -L -J: %s", out)
	}
	for _, p := range md.Topics[0].Partitions {
		if len(p.Replicas) != 3 || len(p.ISRs) != 3 || p.Leader < 1 || p.Leader > 3 {
			t.Fatalf("kcat -L: partition %d: leader %d, %d replicas, %d in the ISR; want 3 and 3: %s", p.Partition, p.Leader, len(p.Replicas), len(p.ISRs), out)
		}
	}

	// want[p] is what partition p holds, in order.
	want := make([][]string, parts)
	produce := func(from, to int) {
		t.Helper()
		for p := range parts {
			var in []string
			for i := from; i < to; i++ {
				in = append(in, fmt.Sprintf("p%d-%05d", p, i))
			}
			start := time.Now()
			kcatCluster(t, bin, c.seeds(), []byte(strings.Join(in, "\n")+"\n"), "-P", "-t", topic, "-p", strconv.Itoa(p),
				"-X", "acks=all", "-X", "linger.ms=5")
			t.Logf("kcat produced %d records to partition %d with acks=all in %v", len(in), p, time.Since(start).Round(time.Millisecond))
			want[p] = append(want[p], in...)
		}
	}
	consume := func(what string, seeds []string) {
		t.Helper()
		for p := range parts {
			out, _ := kcatCluster(t, bin, seeds, nil, "-C", "-t", topic, "-p", strconv.Itoa(p), "-o", "beginning", "-e",
				"-f", "%o:%s\n", "-X", "fetch.wait.max.ms=100")
			got := strings.Split(strings.TrimSuffix(out, "\n"), "\n")
			if len(got) != len(want[p]) {
				t.Fatalf("%s: partition %d: kcat read %d records, %d were acknowledged", what, p, len(got), len(want[p]))
			}
			for i, w := range want[p] {
				if g := fmt.Sprintf("%d:%s", i, w); got[i] != g {
					t.Fatalf("%s: partition %d: record %d is %q, want %q", what, p, i, got[i], g)
				}
			}
		}
	}
	produce(0, 500)
	consume("all brokers up", c.seeds())

	// Kill the leader of partition 0 (it leads one partition in three or
	// more); kcat produces and consumes through the other two: the ISR of
	// two still meets min.insync.replicas.
	victim := int(c.leaderOf(topic, 0) - 1)
	t.Logf("killing broker %d, leader of partition 0", victim+1)
	c.procs[victim].signal(syscall.SIGKILL) // its exit status is "killed"
	produce(500, 1000)
	consume(fmt.Sprintf("broker %d down", victim+1), c.seeds())
	if l := c.leaderOf(topic, 0); int(l) == victim+1 {
		t.Fatalf("broker %d still leads partition 0 after its kill", l)
	}

	// Back it comes; once in the ISR again it serves all of it (kcat
	// bootstrapped from it alone: it answers the metadata).
	c.start(victim)
	if err := c.waitISR(adm, topic, 3, 30*time.Second); err != nil {
		t.Fatal(err)
	}
	consume(fmt.Sprintf("broker %d back", victim+1), []string{c.procs[victim].addr})
}

// TestClusterOneClusterID: every broker of a cluster reports the same
// cluster id (Metadata, DescribeCluster), as Kafka's brokers do (all are
// formatted with one cluster.id). librdkafka warns otherwise: "Broker ...
// reports different ClusterId ...: a client must not be simultaneously
// connected to multiple clusters". Each used to report the random id of
// its own meta.properties; the id is cluster.id now, or without one the id
// derived from -controller-voters, recorded in the data directory.
func TestClusterOneClusterID(t *testing.T) {
	t.Parallel() // broker processes: the test waits on them far more than it computes
	if testing.Short() {
		t.Skip("starts three broker processes")
	}
	c := startCluster(t, 3, clusterProps)
	ids := map[string][]int{}
	for i, p := range c.procs {
		cl, err := kgo.NewClient(kgo.SeedBrokers(p.addr))
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		m, err := kadm.NewClient(cl).BrokerMetadata(ctx)
		cancel()
		cl.Close()
		if err != nil {
			t.Fatal(err)
		}
		ids[m.Cluster] = append(ids[m.Cluster], i+1)
	}
	if len(ids) != 1 {
		t.Fatalf("brokers report %d cluster ids: %v", len(ids), ids)
	}
	// DescribeCluster says the same, before and after a restart.
	describe := func(what string) {
		t.Helper()
		for i, p := range c.procs {
			cl, err := kgo.NewClient(kgo.SeedBrokers(p.addr))
			if err != nil {
				t.Fatal(err)
			}
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			resp, err := cl.Broker(i+1).Request(ctx, kmsg.NewPtrDescribeClusterRequest())
			cancel()
			cl.Close()
			if err != nil {
				t.Fatal(err)
			}
			if got := resp.(*kmsg.DescribeClusterResponse).ClusterID; len(ids[got]) == 0 {
				t.Fatalf("%s: broker %d describes cluster %q, Metadata said %v", what, i+1, got, ids)
			}
		}
	}
	describe("started")
	c.procs[1].signal(syscall.SIGTERM)
	c.start(1)
	describe("broker 2 restarted")
}
