//go:build unix

package kafka_test

import (
	"context"
	"math"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"ringlog/kafka"
)

// TestClusterForgedReplicaFetch: a Fetch that names the real follower's
// broker id with a broker epoch above the one the quorum registered (the
// reviewers' forgery: epoch MaxInt64 fenced the real follower's fetches as
// stale) is STALE_BROKER_EPOCH and changes nothing: the real follower
// keeps replicating and acks=all produces go on being acknowledged.
func TestClusterForgedReplicaFetch(t *testing.T) {
	t.Parallel() // broker processes: the test waits on them far more than it computes
	if testing.Short() {
		t.Skip("starts two broker processes")
	}
	c := startCluster(t, 2, clusterProps)
	const topic = "forged"
	c.createTopic(kadm.NewClient(c.client()), topic, 1, 2, nil)
	leader := c.leaderIndex(topic, 0)
	follower := int32(2 - leader) // ids are 1..n, indexes 0..n-1
	w := dialWire(t, c.procs[leader].addr)
	produce := func(value string) int16 {
		t.Helper()
		req := kafka.ProduceReq(9, -1, topic, 0, kafka.MakeBatch(t, value, 1, -1, 0))
		req.TimeoutMillis = 10000
		return w.roundTrip(req).(*kmsg.ProduceResponse).Topics[0].Partitions[0].ErrorCode
	}
	if code := produce("before"); code != 0 {
		t.Fatalf("acks=all before: %v", kerr.ErrorForCode(code))
	}
	mreq := kmsg.NewPtrMetadataRequest()
	mreq.Version = 12
	md := w.roundTrip(mreq).(*kmsg.MetadataResponse)
	var id [16]byte
	for _, mt := range md.Topics {
		if mt.Topic != nil && *mt.Topic == topic {
			id = mt.TopicID
		}
	}
	req := kmsg.NewPtrFetchRequest()
	req.Version, req.ReplicaID, req.MaxWaitMillis = 15, -1, 0
	req.ReplicaState.ID, req.ReplicaState.Epoch = follower, math.MaxInt64
	ft := kmsg.NewFetchRequestTopic()
	ft.TopicID = id
	fp := kmsg.NewFetchRequestTopicPartition()
	fp.FetchOffset, fp.PartitionMaxBytes = 1, 1<<20
	ft.Partitions = append(ft.Partitions, fp)
	req.Topics = append(req.Topics, ft)
	resp := w.roundTrip(req).(*kmsg.FetchResponse)
	if code := resp.Topics[0].Partitions[0].ErrorCode; code != kerr.StaleBrokerEpoch.Code {
		t.Fatalf("forged fetch: %v, want STALE_BROKER_EPOCH", kerr.ErrorForCode(code))
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	for i := range 5 {
		if code := produce("after"); code != 0 {
			t.Fatalf("acks=all %d after the forged fetch: %v", i, kerr.ErrorForCode(code))
		}
	}
	if err := c.waitISR(kadm.NewClient(c.client()), topic, 2, time.Until(deadline(ctx))); err != nil {
		t.Fatal(err)
	}
}

func deadline(ctx context.Context) time.Time {
	d, _ := ctx.Deadline()
	return d
}
