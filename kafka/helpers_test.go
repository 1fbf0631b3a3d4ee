package kafka_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"ringlog/broker"
	"ringlog/engine"
	"ringlog/engine/group"
	"ringlog/internal/testkit/testbroker"
	"ringlog/ioring"
	"ringlog/kafka"
	"ringlog/netpoll"
)

// testBroker is a broker started in the test's process with broker.Start,
// the wiring the binary runs (testkit.Broker), and its parts.
type testBroker struct {
	*testbroker.Broker
	t testing.TB
	// Engine, Server, Net and Groups are the running broker's parts.
	Engine *engine.Core
	Server *kafka.Server
	Net    *netpoll.Server
	Groups *group.Coordinator
	dir    string
	nodeID int32
}

type brokerOpts struct {
	// Portable uses the portable I/O path and the standard net package,
	// whatever RINGLOG_TEST_NET says (testbroker.EnvNet).
	Portable bool
	// Dir reuses a data directory (restarts); empty means a new one.
	Dir string
	// Config adjusts the broker's configuration before start; Groups its
	// group coordinator's.
	Config func(*broker.Config)
	Groups func(*group.Config)
}

// startBroker starts a broker and stops it at the end of the test.
func startBroker(t testing.TB, opts brokerOpts) *testBroker {
	t.Helper()
	dir := opts.Dir
	if dir == "" {
		dir = t.TempDir()
	}
	cfg := testbroker.Config(dir)
	if opts.Portable {
		cfg.IO, cfg.Network = ioring.ModePortable, netpoll.IOPortable
	}
	if opts.Groups != nil {
		opts.Groups(&cfg.Groups)
	}
	if opts.Config != nil {
		opts.Config(&cfg)
	}
	b := &testBroker{Broker: testbroker.StartBroker(t, cfg), t: t, dir: dir, nodeID: cfg.NodeID}
	b.ready()
	return b
}

// ready takes the running broker's parts and waits until it coordinates
// groups.
func (b *testBroker) ready() {
	br := b.B
	b.Engine, b.Server, b.Net, b.Groups = br.Engine(), br.Server(), br.Network(), br.Groups()
	// Tests that send raw group requests want exact codes: have
	// __consumer_offsets created, as a client's first FindCoordinator
	// does, and every partition of it coordinated here before they start
	// (clients would retry COORDINATOR_LOAD_IN_PROGRESS and
	// NOT_COORDINATOR; engine/group tests those codes).
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	b.waitCoordinating(ctx)
}

// Restart stops and starts the broker on the same port and data; tweak,
// when given, changes its configuration from this start on.
func (b *testBroker) Restart(tweak ...func(*broker.Config)) {
	b.t.Helper()
	b.Broker.Restart(tweak...)
	b.ready()
}

// waitCoordinating waits until the broker coordinates the groups of every
// partition of __consumer_offsets.
func (b *testBroker) waitCoordinating(ctx context.Context) {
	t := b.t
	t.Helper()
	// One group id per partition of __consumer_offsets.
	ids := map[int32]string{}
	for i := 0; int32(len(ids)) < b.Groups.Partitions(); i++ {
		id := fmt.Sprintf("probe-%d", i)
		if _, ok := ids[b.Groups.PartitionOf(id)]; !ok {
			ids[b.Groups.PartitionOf(id)] = id
		}
	}
	// Straight to this broker, as the tests' requests go: a
	// FindCoordinator first creates __consumer_offsets, then each group
	// is described once its partition is loaded here.
	w := dialWire(t, b.Addr)
	for _, id := range ids {
		for {
			find := kmsg.NewPtrFindCoordinatorRequest()
			find.CoordinatorKey = id
			found := w.roundTrip(find).(*kmsg.FindCoordinatorResponse)
			req := kmsg.NewPtrDescribeGroupsRequest()
			req.Groups = []string{id}
			resp := w.roundTrip(req).(*kmsg.DescribeGroupsResponse)
			if found.ErrorCode == 0 && len(resp.Groups) == 1 && resp.Groups[0].ErrorCode == 0 {
				break
			}
			if ctx.Err() != nil {
				t.Fatalf("the broker does not coordinate group %s: %+v %+v", id, found, resp)
			}
			time.Sleep(5 * time.Millisecond)
		}
	}
}

// client returns a kgo client for the broker, closed at the end of the test.
func (b *testBroker) client(opts ...kgo.Opt) *kgo.Client {
	b.t.Helper()
	cl, err := kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(b.Addr)}, opts...)...)
	if err != nil {
		b.t.Fatal(err)
	}
	b.t.Cleanup(cl.Close)
	return cl
}

func (b *testBroker) admin() *kadm.Client {
	return kadm.NewClient(b.client())
}

// createTopic creates a topic through the broker's quorum (CreateTopics,
// as any client would) and waits until this broker leads every partition.
func createTopic(t testing.TB, b *testBroker, name string, partitions int32, configs map[string]string) engine.TopicInfo {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	cfgs := map[string]*string{}
	for k, v := range configs {
		cfgs[k] = &v
	}
	resp, err := b.admin().CreateTopic(ctx, partitions, -1, cfgs, name)
	if err == nil {
		err = resp.Err
	}
	if err != nil {
		t.Fatalf("create topic %s: %v", name, err)
	}
	return waitLeading(t, b, name)
}

// waitLeading waits until the broker's engine has topic name and leads
// every partition of it.
func waitLeading(t testing.TB, b *testBroker, name string) engine.TopicInfo {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for {
		info, ok := b.Engine.Topic(name)
		leading := ok
		for p := int32(0); ok && p < info.Partitions; p++ {
			st, err := b.Engine.State(engine.TP{Topic: name, Partition: p})
			leading = leading && err == nil && st.Role == engine.RoleLeader
		}
		if leading {
			return info
		}
		if time.Now().After(deadline) {
			t.Fatalf("topic %s: not led by the broker after 20 s (%+v, %v)", name, info, ok)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// userTopics leaves out the internal topics (__consumer_offsets, which the
// group coordinator creates on every broker).
func userTopics(ts []engine.TopicInfo) []engine.TopicInfo {
	var out []engine.TopicInfo
	for _, t := range ts {
		if t.Name != group.OffsetsTopic {
			out = append(out, t)
		}
	}
	return out
}
