package controller

import (
	"bytes"
	"errors"
	"math"
	"testing"
)

// TestBrokerConfigs sets, reads back and deletes dynamic broker configs
// through the state machine, and refuses what Kafka refuses.
func TestBrokerConfigs(t *testing.T) {
	s := &fsmState{t: t, img: seedImage(t)}
	s.index = s.img.Index
	s.ok(&command{typ: cmdAlterBrokerConfigs, topic: "", configs: map[string]string{LeaderReplicationThrottledRate: "1000", FollowerReplicationThrottledRate: "3000"}})
	s.ok(&command{typ: cmdAlterBrokerConfigs, topic: "2", configs: map[string]string{LeaderReplicationThrottledRate: "2000"}})
	for _, c := range []struct {
		id   int32
		name string
		want float64
	}{
		{2, LeaderReplicationThrottledRate, 2000},   // its own
		{1, LeaderReplicationThrottledRate, 1000},   // the default
		{2, FollowerReplicationThrottledRate, 3000}, // the default
	} {
		if got, ok := s.img.BrokerRate(c.id, c.name); !ok || got != c.want {
			t.Errorf("broker %d %s = %v %v, want %v", c.id, c.name, got, ok, c.want)
		}
	}
	for _, bad := range []*command{
		{typ: cmdAlterBrokerConfigs, topic: "x", configs: map[string]string{LeaderReplicationThrottledRate: "1"}},
		{typ: cmdAlterBrokerConfigs, topic: "-1", configs: map[string]string{LeaderReplicationThrottledRate: "1"}},
		{typ: cmdAlterBrokerConfigs, topic: "01", configs: map[string]string{LeaderReplicationThrottledRate: "1"}},
		{typ: cmdAlterBrokerConfigs, topic: "1", configs: map[string]string{LeaderReplicationThrottledRate: "-1"}},
		{typ: cmdAlterBrokerConfigs, topic: "1", configs: map[string]string{LeaderReplicationThrottledRate: "1.5"}},
		{typ: cmdAlterBrokerConfigs, topic: "1", configs: map[string]string{"log.retention.ms": "1"}},
	} {
		if res := s.apply(bad); !errors.Is(res.err, ErrInvalidRequest) {
			t.Errorf("%+v: %v, want INVALID_REQUEST", bad, res.err)
		}
	}
	// The image survives a snapshot, and a version 7 snapshot (before
	// broker configs) still reads, with none.
	enc := encodeImage(s.img)
	back, err := decodeImage(enc)
	if err != nil || !bytes.Equal(encodeImage(back), enc) {
		t.Fatalf("snapshot round trip: %v", err)
	}
	if got, _ := back.BrokerRate(2, LeaderReplicationThrottledRate); got != 2000 {
		t.Fatalf("after a snapshot: %v", got)
	}
	v7 := encodeImage(seedImageReassigning(t))
	v7 = v7[:len(v7)-1] // the broker config count (0)
	v7[len(snapshotMagic)] = 7
	if img, err := decodeImage(v7); err != nil || img.brokerConfigs != nil {
		t.Fatalf("a version 7 snapshot: %v", err)
	}
	// Deleting the last values leaves no map behind.
	s.ok(&command{typ: cmdAlterBrokerConfigs, topic: "2", deletes: []string{LeaderReplicationThrottledRate, FollowerReplicationThrottledRate}})
	s.ok(&command{typ: cmdAlterBrokerConfigs, topic: "", deletes: []string{LeaderReplicationThrottledRate, FollowerReplicationThrottledRate}})
	if s.img.brokerConfigs != nil {
		t.Fatalf("left behind: %v", s.img.brokerConfigs)
	}
	if got, ok := s.img.BrokerRate(2, LeaderReplicationThrottledRate); ok || !math.IsInf(got, 1) {
		t.Fatalf("no throttle: %v %v", got, ok)
	}
}
