package kafka_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"ringlog/broker"
	"ringlog/engine"
	"ringlog/internal/testkit"
	"ringlog/kafka"
)

// produceEach writes n single-record batches to each partition, one
// request each (so that a segment holds several batches).
func produceEach(t testing.TB, cl *kgo.Client, topic string, parts []int32, n int, prefix string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	for _, p := range parts {
		for i := range n {
			r := &kgo.Record{Topic: topic, Partition: p, Value: fmt.Appendf(nil, "%s-%d-%d", prefix, p, i)}
			if err := cl.ProduceSync(ctx, r).FirstErr(); err != nil {
				t.Fatalf("produce to %s-%d: %v", topic, p, err)
			}
		}
	}
}

// consumeAll reads every record of topic's partitions parts from the start.
func consumeAll(t testing.TB, seeds []string, topic string, parts []int32, want int) []string {
	t.Helper()
	offsets := map[int32]kgo.Offset{}
	for _, p := range parts {
		offsets[p] = kgo.NewOffset().AtStart()
	}
	cl, err := kgo.NewClient(kgo.SeedBrokers(seeds...), kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{topic: offsets}))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	var got []string
	for len(got) < want {
		fs := cl.PollFetches(ctx)
		if ctx.Err() != nil {
			t.Fatalf("consumed %d of %d records of %s %v: %v", len(got), want, topic, parts, got)
		}
		fs.EachRecord(func(r *kgo.Record) { got = append(got, string(r.Value)) })
	}
	return got
}

// metadataPartition asks w for topic's metadata and returns partition p.
func metadataPartition(t testing.TB, w *wireConn, topic string, p int32) kmsg.MetadataResponseTopicPartition {
	t.Helper()
	req := kmsg.NewPtrMetadataRequest()
	req.Version = 12
	rt := kmsg.NewMetadataRequestTopic()
	rt.Topic = &topic
	req.Topics = append(req.Topics, rt)
	resp := w.roundTrip(req).(*kmsg.MetadataResponse)
	if len(resp.Topics) != 1 || int(p) >= len(resp.Topics[0].Partitions) {
		t.Fatalf("metadata of %s: %+v", topic, resp.Topics)
	}
	return resp.Topics[0].Partitions[p]
}

// TestCorruptSegmentPartitionOffline: a broker whose partition's segment
// is corrupted between two starts starts anyway and serves the other
// partitions (produce and consume); the broken one is offline (Metadata:
// no leader, LEADER_NOT_AVAILABLE, the broker in offline_replicas;
// produce, fetch and list offsets on it KAFKA_STORAGE_ERROR, as Kafka
// answers for an offline replica); once its files are removed and the
// broker restarts, it is back.
func TestCorruptSegmentPartitionOffline(t *testing.T) {
	b := startBroker(t, brokerOpts{})
	const topic = "offline"
	createTopic(t, b, topic, 3, nil)
	cl := b.client(kgo.RecordPartitioner(kgo.ManualPartitioner()))
	produceEach(t, cl, topic, []int32{0, 1, 2}, 5, "before")
	cl.Close()

	dataDir := b.Engine.Dir()
	badDir := filepath.Join(dataDir, topic+"-1")
	reg := prometheus.NewRegistry()
	b.Restart(func(cfg *broker.Config) {
		testkit.CorruptSegment(t, badDir)
		cfg.Metrics = reg
	})
	if n := gauge(t, reg, "ringlog_offline_partitions"); n != 1 {
		t.Fatalf("ringlog_offline_partitions %v, want 1", n)
	}

	bad := engine.TP{Topic: topic, Partition: 1}
	if err := b.Engine.Offline(bad); err == nil {
		t.Fatal("the corrupted partition is not offline")
	}
	w := dialWire(t, b.Addr)
	var mp kmsg.MetadataResponseTopicPartition
	deadline := time.Now().Add(10 * time.Second)
	for {
		mp = metadataPartition(t, w, topic, 1)
		if mp.Leader == -1 && slices.Equal(mp.OfflineReplicas, []int32{b.nodeID}) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("metadata of the corrupted partition: leader %d, ISR %v, offline %v, error %d", mp.Leader, mp.ISR, mp.OfflineReplicas, mp.ErrorCode)
		}
		time.Sleep(10 * time.Millisecond)
	}
	if mp.ErrorCode != kerr.LeaderNotAvailable.Code {
		t.Fatalf("metadata error of the offline partition: %d, want LEADER_NOT_AVAILABLE", mp.ErrorCode)
	}
	// Under Kafka's names: the broker's offline replica, and the
	// controller's leaderless partition (the metadata above shows it).
	for name, want := range map[string]float64{
		"kafka_server_replicamanager_offlinereplicacount":         1,
		"kafka_controller_kafkacontroller_offlinepartitionscount": 1,
	} {
		if n := gauge(t, reg, name); n != want {
			t.Errorf("%s %v, want %v", name, n, want)
		}
	}
	for _, p := range []int32{0, 2} {
		if mp := metadataPartition(t, w, topic, p); mp.Leader != b.nodeID || len(mp.OfflineReplicas) != 0 || mp.ErrorCode != 0 {
			t.Fatalf("metadata of %s-%d: %+v", topic, p, mp)
		}
	}

	// Produce, fetch and list offsets on the offline partition.
	produce := w.roundTrip(kafka.ProduceReq(9, -1, topic, 1, kafka.MakeBatch(t, "x", 1, -1, 0))).(*kmsg.ProduceResponse)
	if code := produce.Topics[0].Partitions[0].ErrorCode; code != kerr.KafkaStorageError.Code {
		t.Fatalf("produce to the offline partition: %s, want KAFKA_STORAGE_ERROR", kerr.ErrorForCode(code))
	}
	fetch := kmsg.NewPtrFetchRequest()
	fetch.Version = 12
	fetch.MaxWaitMillis = 0
	fetch.MaxBytes = 1 << 20
	ft := kmsg.NewFetchRequestTopic()
	ft.Topic = topic
	fp := kmsg.NewFetchRequestTopicPartition()
	fp.Partition = 1
	fp.PartitionMaxBytes = 1 << 20
	ft.Partitions = append(ft.Partitions, fp)
	fetch.Topics = append(fetch.Topics, ft)
	fr := w.roundTrip(fetch).(*kmsg.FetchResponse)
	if code := fr.Topics[0].Partitions[0].ErrorCode; code != kerr.KafkaStorageError.Code {
		t.Fatalf("fetch from the offline partition: %s, want KAFKA_STORAGE_ERROR", kerr.ErrorForCode(code))
	}
	lo := kmsg.NewPtrListOffsetsRequest()
	lo.Version = 7
	lt := kmsg.NewListOffsetsRequestTopic()
	lt.Topic = topic
	lp := kmsg.NewListOffsetsRequestTopicPartition()
	lp.Partition, lp.Timestamp = 1, -1
	lt.Partitions = append(lt.Partitions, lp)
	lo.Topics = append(lo.Topics, lt)
	lr := w.roundTrip(lo).(*kmsg.ListOffsetsResponse)
	if code := lr.Topics[0].Partitions[0].ErrorCode; code != kerr.KafkaStorageError.Code {
		t.Fatalf("list offsets of the offline partition: %s, want KAFKA_STORAGE_ERROR", kerr.ErrorForCode(code))
	}

	// The others serve: what was there and what comes.
	cl = b.client(kgo.RecordPartitioner(kgo.ManualPartitioner()))
	produceEach(t, cl, topic, []int32{0, 2}, 2, "after")
	if got := consumeAll(t, []string{b.Addr}, topic, []int32{0, 2}, 14); len(got) != 14 {
		t.Fatalf("consumed %d records of the partitions online, want 14", len(got))
	}

	// Repaired by removing its files: back after a restart.
	b.Restart(func(cfg *broker.Config) {
		cfg.Metrics = nil // registered by the last start
		if err := os.RemoveAll(badDir); err != nil {
			t.Fatal(err)
		}
	})
	if err := b.Engine.Offline(bad); err != nil {
		t.Fatalf("after the repair: %v", err)
	}
	w = dialWire(t, b.Addr)
	deadline = time.Now().Add(10 * time.Second)
	for {
		mp = metadataPartition(t, w, topic, 1)
		if mp.Leader == b.nodeID && len(mp.OfflineReplicas) == 0 && mp.ErrorCode == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("metadata of the repaired partition: %+v", mp)
		}
		time.Sleep(10 * time.Millisecond)
	}
	cl = b.client(kgo.RecordPartitioner(kgo.ManualPartitioner()))
	produceEach(t, cl, topic, []int32{1}, 2, "repaired")
	if got := consumeAll(t, []string{b.Addr}, topic, []int32{1}, 2); len(got) != 2 {
		t.Fatalf("consumed %v from the repaired partition", got)
	}
}

// gauge reads an unlabelled gauge from reg.
func gauge(t *testing.T, reg *prometheus.Registry, name string) float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() == name && len(mf.GetMetric()) == 1 {
			return mf.GetMetric()[0].GetGauge().GetValue()
		}
	}
	t.Fatalf("no gauge %s", name)
	return 0
}
