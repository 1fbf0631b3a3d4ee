package controller

import (
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"
)

// TestMaxTotalPartitions: a creation that would make the cluster hold more
// partitions than the asking broker's cap (ringlog.max.partitions) is
// POLICY_VIOLATION, topics and partitions alike, validate-only too; the
// check runs in the state machine at the command's place in the log, so
// concurrent creations cannot pass the cap together. A command without a
// cap (entries written before it existed, the group coordinator's topic)
// is not bounded.
func TestMaxTotalPartitions(t *testing.T) {
	nd := &testNode{cfg: Config{
		NodeID: 1, Voters: LocalQuorum(1), Dir: t.TempDir(),
		BrokerSessionTimeout: time.Minute, BrokerHeartbeatInterval: 100 * time.Millisecond, LeaderRebalanceInterval: -1,
		Logger: testLogger(),
	}}
	nd.open(t)
	defer nd.close(t)
	ctx := ctxTimeout(t, 30*time.Second)
	if err := nd.c.Sync(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := nd.c.RegisterBroker(ctx, BrokerInfo{ID: 1, Addr: "127.0.0.1:9092"}); err != nil {
		t.Fatal(err)
	}
	create := func(name string, parts int32, validate bool, maxTotal int32) error {
		_, err := nd.c.CreateTopic(ctx, CreateTopicRequest{Name: name, Partitions: parts, ReplicationFactor: -1, ValidateOnly: validate, MaxTotal: maxTotal})
		return err
	}
	if err := create("a", 6, false, 10); err != nil {
		t.Fatal(err)
	}
	for _, validate := range []bool{true, false} {
		if err := create("b", 5, validate, 10); !errors.Is(err, ErrPolicyViolation) || ErrorCode(err) != 44 {
			t.Fatalf("5 more of 10 (validate only %v): %v, want POLICY_VIOLATION", validate, err)
		}
	}
	if err := create("b", 4, false, 10); err != nil {
		t.Fatalf("up to the cap: %v", err)
	}
	if err := nd.c.CreatePartitions(ctx, "b", 5, nil, 10); !errors.Is(err, ErrPolicyViolation) {
		t.Fatalf("a partition past the cap: %v, want POLICY_VIOLATION", err)
	}
	if err := nd.c.CreatePartitions(ctx, "b", 6, nil, 0); err != nil {
		t.Fatalf("no cap: %v", err)
	}

	// Ten creations of 3 partitions at once against a cap of 12 more than
	// the 12 there are: exactly 4 pass.
	var wg sync.WaitGroup
	var mu sync.Mutex
	passed := 0
	for i := range 10 {
		wg.Go(func() {
			err := create(fmt.Sprintf("c%d", i), 3, false, 24)
			mu.Lock()
			defer mu.Unlock()
			switch {
			case err == nil:
				passed++
			case !errors.Is(err, ErrPolicyViolation):
				t.Errorf("c%d: %v", i, err)
			}
		})
	}
	wg.Wait()
	if passed != 4 {
		t.Fatalf("%d of the concurrent creations passed, want 4", passed)
	}
	if n := totalOf(nd.c.Image()); n != 24 {
		t.Fatalf("%d partitions, want 24", n)
	}
}

func totalOf(img *Image) int {
	n := 0
	for _, name := range img.TopicNames() {
		n += len(img.Topic(name).Partitions)
	}
	return n
}
