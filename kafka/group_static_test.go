package kafka_test

import (
	"context"
	"maps"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"ringlog/engine/group"
)

// staticMember is a kgo member with a group.instance.id (KIP-345) whose
// assignments and revocations are recorded.
type staticMember struct {
	cl *kgo.Client

	mu       sync.Mutex
	assigned []int32
	gen      int32
	revokes  int
	changed  chan struct{}
}

func startStatic(t *testing.T, b *testBroker, instance, topic string) *staticMember {
	t.Helper()
	m := &staticMember{changed: make(chan struct{}, 16)}
	cl, err := kgo.NewClient(kgo.SeedBrokers(b.Addr), kgo.ConsumerGroup("static-g"), kgo.ConsumeTopics(topic),
		kgo.InstanceID(instance), kgo.SessionTimeout(10*time.Second), kgo.HeartbeatInterval(200*time.Millisecond),
		kgo.Balancers(kgo.RangeBalancer()),
		kgo.OnPartitionsAssigned(func(_ context.Context, cl *kgo.Client, a map[string][]int32) {
			_, gen := cl.GroupMetadata()
			m.mu.Lock()
			m.assigned = append(m.assigned, a[topic]...)
			slices.Sort(m.assigned)
			m.gen = gen
			m.mu.Unlock()
			m.changed <- struct{}{}
		}),
		kgo.OnPartitionsRevoked(func(_ context.Context, _ *kgo.Client, a map[string][]int32) {
			m.mu.Lock()
			if len(a[topic]) > 0 {
				m.revokes++
			}
			m.assigned = slices.DeleteFunc(m.assigned, func(p int32) bool { return slices.Contains(a[topic], p) })
			m.mu.Unlock()
		}))
	if err != nil {
		t.Fatal(err)
	}
	m.cl = cl
	// Polling drives the group: kgo joins once the client is used.
	go func() {
		for {
			fs := cl.PollFetches(context.Background())
			if fs.IsClientClosed() {
				return
			}
		}
	}()
	return m
}

func (m *staticMember) state() ([]int32, int32, int) {
	m.mu.Lock()
	defer m.mu.Unlock()
	return slices.Clone(m.assigned), m.gen, m.revokes
}

// TestStaticMemberRestart: a static member restarted within its session
// timeout gets its assignment back in the same generation, and the other
// member never sees a rebalance. The restarted member was the leader,
// which JoinGroup v9 tells to skip the assignment (KIP-814).
func TestStaticMemberRestart(t *testing.T) {
	b := startBroker(t, brokerOpts{Groups: func(c *group.Config) { c.MinSessionTimeout = time.Second }})
	const topic = "static"
	e2eCreateTopic(t, b, topic, 4, nil)
	ctx := adminCtx(t)
	adm := b.admin()

	leader := startStatic(t, b, "inst-a", topic)
	waitAssigned(t, leader, 4)
	follower := startStatic(t, b, "inst-b", topic)
	waitAssigned(t, follower, 2)
	waitAssigned(t, leader, 2)
	before, gen, _ := leader.state()
	fBefore, fGen, fRevokes := follower.state()
	if gen != fGen {
		t.Fatalf("generations %d and %d", gen, fGen)
	}
	described, err := adm.DescribeGroups(ctx, "static-g")
	if err != nil {
		t.Fatal(err)
	}
	oldLeaderID, _ := leader.cl.GroupMetadata()
	if g := described["static-g"]; g.State != "Stable" || len(g.Members) != 2 {
		t.Fatalf("described %+v", g)
	}

	// Close without leaving (a static member does not send LeaveGroup),
	// and come back with the same instance id.
	leader.cl.Close()
	again := startStatic(t, b, "inst-a", topic)
	defer again.cl.Close()
	defer follower.cl.Close()
	waitAssigned(t, again, 2)
	after, newGen, _ := again.state()
	if newGen != gen || !slices.Equal(after, before) {
		t.Fatalf("restarted member: partitions %v in generation %d, had %v in generation %d", after, newGen, before, gen)
	}
	newID, _ := again.cl.GroupMetadata()
	if newID == oldLeaderID {
		t.Fatalf("restarted member kept member id %s", newID)
	}
	// Give a rebalance, if one were coming, the time to reach the
	// follower.
	time.Sleep(time.Second)
	fAfter, fGenAfter, fRevokesAfter := follower.state()
	if fGenAfter != fGen || fRevokesAfter != fRevokes || !slices.Equal(fAfter, fBefore) {
		t.Fatalf("follower saw a rebalance: generation %d -> %d, revocations %d -> %d, partitions %v -> %v",
			fGen, fGenAfter, fRevokes, fRevokesAfter, fBefore, fAfter)
	}
	described, err = adm.DescribeGroups(ctx, "static-g")
	if err != nil {
		t.Fatal(err)
	}
	g := described["static-g"]
	ids := map[string]bool{}
	for _, m := range g.Members {
		ids[m.MemberID] = true
	}
	if g.State != "Stable" || len(g.Members) != 2 || !ids[newID] || ids[oldLeaderID] {
		t.Fatalf("after the restart: state %s, members %v (new id %s, old %s)", g.State, slices.Collect(maps.Keys(ids)), newID, oldLeaderID)
	}
}

// waitAssigned waits until m owns n partitions.
func waitAssigned(t *testing.T, m *staticMember, n int) {
	t.Helper()
	deadline := time.After(15 * time.Second)
	for {
		if a, _, _ := m.state(); len(a) == n {
			return
		}
		select {
		case <-m.changed:
		case <-time.After(20 * time.Millisecond):
		case <-deadline:
			a, gen, _ := m.state()
			t.Fatalf("member owns %v in generation %d, want %d partitions", a, gen, n)
		}
	}
}
