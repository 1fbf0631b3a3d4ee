//go:build unix

package kafka_test

import (
	"context"
	"fmt"
	"syscall"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// clusterInitProducerID asks broker i of c (index into procs) itself for a
// producer id, over a client bootstrapped against that broker alone.
// COORDINATOR_LOAD_IN_PROGRESS (no block from the quorum yet) is retried,
// as clients do.
func clusterInitProducerID(t *testing.T, c *testCluster, i int) int64 {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(c.procs[i].addr))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	deadline := time.Now().Add(30 * time.Second)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		req := kmsg.NewPtrInitProducerIDRequest()
		req.TransactionTimeoutMillis = -1
		resp, err := cl.Broker(i+1).Request(ctx, req)
		cancel()
		if err == nil {
			r := resp.(*kmsg.InitProducerIDResponse)
			err = kerr.ErrorForCode(r.ErrorCode)
			if err == nil {
				if r.ProducerID < 0 || r.ProducerEpoch != 0 {
					t.Fatalf("broker %d: producer id %d epoch %d", i+1, r.ProducerID, r.ProducerEpoch)
				}
				return r.ProducerID
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("broker %d: InitProducerId: %v", i+1, err)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// controllerOf returns the index in procs of the broker whose controller
// leads the metadata quorum.
func controllerOf(t *testing.T, c *testCluster) int {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	m, err := kadm.NewClient(c.client()).BrokerMetadata(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if m.Controller < 1 || int(m.Controller) > len(c.procs) {
		t.Fatalf("controller id %d", m.Controller)
	}
	return int(m.Controller) - 1
}

// TestClusterProducerIDsDistinct: producer ids are the cluster's, not a
// broker's. Each broker used to hand out ids from 0 out of its own
// producer-ids file, so producers bootstrapped against different brokers
// got the same id, and after a failover the new leader mixed their
// sequence numbers (OUT_OF_ORDER_SEQUENCE, or a record dropped as a
// duplicate). Ids come in blocks from the metadata quorum now
// (AllocateProducerIDs, KIP-730): distinct across brokers, across broker
// restarts, the controller leader's included, and for kgo's own
// idempotent producers.
func TestClusterProducerIDsDistinct(t *testing.T) {
	t.Parallel() // broker processes: the test waits on them far more than it computes
	if testing.Short() {
		t.Skip("starts three broker processes")
	}
	c := startCluster(t, 3, clusterProps)
	owner := map[int64]string{}
	blockOf := map[int64]int{} // block (id / 1000) -> broker index
	take := func(i int, what string) {
		t.Helper()
		id := clusterInitProducerID(t, c, i)
		who := fmt.Sprintf("broker %d (%s)", i+1, what)
		if prev, dup := owner[id]; dup {
			t.Fatalf("producer id %d from %s was already handed out by %s", id, who, prev)
		}
		owner[id] = who
		if b, ok := blockOf[id/1000]; ok && b != i {
			t.Fatalf("brokers %d and %d hand out ids of one block (%d)", b+1, i+1, id/1000*1000)
		}
		blockOf[id/1000] = i
	}
	for round := range 3 {
		for i := range c.procs {
			take(i, fmt.Sprintf("round %d", round))
		}
	}

	// A broker restarted cleanly, then the one leading the quorum, then
	// one killed: each takes a new block, never the one it had.
	c.procs[0].signal(syscall.SIGTERM)
	c.start(0)
	take(0, "after a clean restart")
	ctl := controllerOf(t, c)
	c.procs[ctl].signal(syscall.SIGTERM)
	c.start(ctl)
	for i := range c.procs {
		take(i, fmt.Sprintf("after broker %d, the quorum's leader, restarted", ctl+1))
	}
	victim := (ctl + 1) % len(c.procs)
	c.procs[victim].signal(syscall.SIGKILL)
	c.start(victim)
	c.waitBrokers(len(c.procs))
	for i := range c.procs {
		take(i, fmt.Sprintf("after broker %d was killed and restarted", victim+1))
	}

	// kgo's idempotent producers, each bootstrapped against one broker,
	// get ids nobody else has.
	for i, p := range c.procs {
		cl, err := kgo.NewClient(kgo.SeedBrokers(p.addr), kgo.DefaultProduceTopic("pids"), kgo.AllowAutoTopicCreation())
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		err = cl.ProduceSync(ctx, &kgo.Record{Value: []byte("v")}).FirstErr()
		var id int64
		if err == nil {
			id, _, err = cl.ProducerID(ctx)
		}
		cancel()
		cl.Close()
		if err != nil {
			t.Fatalf("kgo producer seeded with broker %d: %v", i+1, err)
		}
		if prev, dup := owner[id]; dup {
			t.Fatalf("kgo producer seeded with broker %d got producer id %d, already handed out by %s", i+1, id, prev)
		}
		owner[id] = fmt.Sprintf("kgo producer seeded with broker %d", i+1)
	}
	t.Logf("%d producer ids, all distinct, from %d blocks", len(owner), len(blockOf))
}
