package engine

import (
	"errors"
	"slices"
	"testing"
)

// TestThrottledReplicasConfig holds the throttled-replicas topic configs
// to Kafka's ThrottledReplicaListValidator, message included, and reads
// them as Kafka's TopicConfigHandler does for one broker.
func TestThrottledReplicasConfig(t *testing.T) {
	for _, v := range []string{"", "*", " * ", "0:1", "0:1,1:2", "0:1, 1:2", "0:1,", "0:1,,2:3", ", *"} {
		c, err := ParseTopicConfig(DefaultTopicConfig(), map[string]string{LeaderThrottledReplicasConfig: v, FollowerThrottledReplicasConfig: v})
		if err != nil {
			t.Errorf("%q refused: %v", v, err)
			continue
		}
		if c.LeaderThrottledReplicas != v || c.FollowerThrottledReplicas != v {
			t.Errorf("%q stored as %q, %q", v, c.LeaderThrottledReplicas, c.FollowerThrottledReplicas)
		}
	}
	for _, c := range []struct{ v, msg string }{
		{"foo", "Invalid value [foo] for configuration leader.replication.throttled.replicas: leader.replication.throttled.replicas must be the literal '*' or a list of replicas in the following format: [partitionId]:[brokerId],[partitionId]:[brokerId],..."},
		{"0:1, x:2", "Invalid value [0:1, x:2] for configuration leader.replication.throttled.replicas: leader.replication.throttled.replicas must be the literal '*' or a list of replicas in the following format: [partitionId]:[brokerId],[partitionId]:[brokerId],..."},
		{"*,0:1", ""}, {"0:-1", ""}, {"0:", ""}, {":1", ""}, {"0:1:2", ""}, {"**", ""},
	} {
		_, err := ParseTopicConfig(DefaultTopicConfig(), map[string]string{LeaderThrottledReplicasConfig: c.v})
		if !errors.Is(err, ErrInvalidConfig) {
			t.Errorf("%q: %v, want an invalid config", c.v, err)
			continue
		}
		if c.msg != "" && err.Error() != c.msg {
			t.Errorf("%q:\n got %s\nwant %s", c.v, err, c.msg)
		}
	}
	for _, c := range []struct {
		v     string
		all   bool
		parts []int32
	}{
		{"", false, nil},
		{"*", true, nil},
		{"0:1,1:2,2:1, 3:1", false, []int32{0, 2, 3}},
		{"0:2", false, nil},
	} {
		all, parts := ThrottledReplicas(c.v, 1)
		if all != c.all || !slices.Equal(parts, c.parts) {
			t.Errorf("ThrottledReplicas(%q, 1) = %v %v, want %v %v", c.v, all, parts, c.all, c.parts)
		}
	}
	// APPEND and SUBTRACT work on them as on any LIST config.
	out, err := ApplyConfigOps(map[string]string{LeaderThrottledReplicasConfig: "0:1"}, DefaultTopicConfig(),
		[]ConfigOp{{Name: LeaderThrottledReplicasConfig, Op: 2, Value: "1:2"}})
	if err != nil || out[LeaderThrottledReplicasConfig] != "0:1,1:2" {
		t.Fatalf("APPEND: %v %v", out, err)
	}
}
