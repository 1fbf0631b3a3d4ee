package kafka_test

import (
	"context"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"ringlog/broker"
	"ringlog/engine"
)

// requestParts are Kafka's RequestMetrics, as the broker names them.
var requestParts = []string{
	"kafka_network_requestmetrics_totaltimems",
	"kafka_network_requestmetrics_requestqueuetimems",
	"kafka_network_requestmetrics_localtimems",
	"kafka_network_requestmetrics_remotetimems",
	"kafka_network_requestmetrics_responsequeuetimems",
	"kafka_network_requestmetrics_responsesendtimems",
}

// histo is one histogram's count and sum.
type histo struct {
	count uint64
	sum   float64
}

// requestHistos reads each part's histogram for request from reg.
func requestHistos(t *testing.T, reg *prometheus.Registry, request string) map[string]histo {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]histo{}
	for _, mf := range mfs {
		for _, m := range mf.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == "request" && l.GetValue() == request {
					h := m.GetHistogram()
					out[mf.GetName()] = histo{h.GetSampleCount(), h.GetSampleSum()}
				}
			}
		}
	}
	return out
}

// oneMore waits until every part of request has exactly one observation
// more than before (the times are observed once the response is written,
// which may be just after the client read it) and returns that request's
// times, in milliseconds.
func oneMore(t *testing.T, reg *prometheus.Registry, request string, before map[string]histo) map[string]float64 {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for {
		after := requestHistos(t, reg, request)
		done := true
		for _, p := range requestParts {
			if after[p].count != before[p].count+1 {
				done = false
			}
		}
		if done {
			ms := map[string]float64{}
			for _, p := range requestParts {
				ms[p] = after[p].sum - before[p].sum
			}
			return ms
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: want one observation more in every part; before %v, after %v", request, before, after)
		}
		time.Sleep(2 * time.Millisecond)
	}
}

// checkParts checks that a single request's total holds each part, and
// that the parts add up to it.
func checkParts(t *testing.T, what string, ms map[string]float64) {
	t.Helper()
	total, sum := ms[requestParts[0]], 0.0
	for _, p := range requestParts[1:] {
		if ms[p] < 0 || ms[p] > total+1e-9 {
			t.Errorf("%s: %s %.4f ms, total %.4f ms", what, p, ms[p], total)
		}
		sum += ms[p]
	}
	if d := total - sum; d > 1e-6 || d < -1e-6 {
		t.Errorf("%s: the parts add up to %.4f ms, total %.4f ms", what, sum, total)
	}
	t.Logf("%s: %v", what, ms)
}

// TestRequestMetrics: Kafka's RequestMetrics histograms count produces
// (acks=1 and acks=all) and fetches of a real client; a single request's
// total holds each part; a fetch's long poll (max.wait) is RemoteTime, not
// LocalTime.
func TestRequestMetrics(t *testing.T) {
	reg := prometheus.NewRegistry()
	b := startBroker(t, brokerOpts{Config: func(cfg *broker.Config) { cfg.Metrics = reg }})
	const topic = "reqmetrics"
	createTopic(t, b, topic, 1, nil)

	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	for _, acks := range []kgo.Acks{kgo.LeaderAck(), kgo.AllISRAcks()} {
		cl := b.client(kgo.RequiredAcks(acks), kgo.DisableIdempotentWrite(), kgo.DefaultProduceTopic(topic))
		for i := range 5 {
			if err := cl.ProduceSync(ctx, &kgo.Record{Value: []byte{byte(i)}}).FirstErr(); err != nil {
				t.Fatal(err)
			}
		}
		cl.Close()
	}
	if got := consumeAll(t, []string{b.Addr}, topic, []int32{0}, 10); len(got) != 10 {
		t.Fatalf("consumed %d records", len(got))
	}
	for _, request := range []string{"Produce", "Fetch", "FetchConsumer"} {
		hs := requestHistos(t, reg, request)
		for _, p := range requestParts {
			if hs[p].count == 0 {
				t.Errorf("%s{request=%q}: no observation", p, request)
			}
		}
	}

	// A single produce, acks=1 then acks=all: an acks=1 produce never
	// waits on others.
	for _, acks := range []struct {
		name string
		kgo.Acks
	}{{"1", kgo.LeaderAck()}, {"all", kgo.AllISRAcks()}} {
		before := requestHistos(t, reg, "Produce")
		cl := b.client(kgo.RequiredAcks(acks.Acks), kgo.DisableIdempotentWrite(), kgo.DefaultProduceTopic(topic))
		if err := cl.ProduceSync(ctx, &kgo.Record{Value: []byte("one")}).FirstErr(); err != nil {
			t.Fatal(err)
		}
		ms := oneMore(t, reg, "Produce", before)
		checkParts(t, "produce acks="+acks.name, ms)
		if remote := ms["kafka_network_requestmetrics_remotetimems"]; acks.name == "1" && remote != 0 {
			t.Errorf("acks=1 produce: RemoteTime %.4f ms, want 0", remote)
		}
		cl.Close()
	}

	// A single fetch that finds nothing and waits max.wait for it.
	const maxWait = 300 * time.Millisecond
	w := dialWire(t, b.Addr)
	req := kmsg.NewPtrFetchRequest()
	req.Version = 12
	req.ReplicaID = -1
	req.MaxWaitMillis = int32(maxWait / time.Millisecond)
	req.MinBytes = 1
	req.MaxBytes = 1 << 20
	rt := kmsg.NewFetchRequestTopic()
	rt.Topic = topic
	rp := kmsg.NewFetchRequestTopicPartition()
	st, err := b.Engine.State(engine.TP{Topic: topic, Partition: 0})
	if err != nil {
		t.Fatal(err)
	}
	rp.Partition, rp.FetchOffset, rp.PartitionMaxBytes = 0, st.HW, 1<<20 // the end: nothing to read
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	before := requestHistos(t, reg, "Fetch")
	beforeConsumer := requestHistos(t, reg, "FetchConsumer")
	start := time.Now()
	resp := w.roundTrip(req).(*kmsg.FetchResponse)
	if took := time.Since(start); took < maxWait*9/10 {
		t.Fatalf("the fetch was answered after %v, before its max.wait %v", took, maxWait)
	}
	if len(resp.Topics) != 1 || resp.Topics[0].Partitions[0].ErrorCode != 0 || len(resp.Topics[0].Partitions[0].RecordBatches) != 0 {
		t.Fatalf("long poll's answer: %+v", resp)
	}
	ms := oneMore(t, reg, "Fetch", before)
	checkParts(t, "long-polling fetch", ms)
	if msAs := oneMore(t, reg, "FetchConsumer", beforeConsumer); msAs[requestParts[0]] != ms[requestParts[0]] {
		t.Errorf("the fetch as FetchConsumer: %v, as Fetch %v", msAs, ms)
	}
	wantMs := float64(maxWait/time.Millisecond) * 9 / 10
	if remote := ms["kafka_network_requestmetrics_remotetimems"]; remote < wantMs {
		t.Errorf("long poll's RemoteTime %.3f ms, want at least %.0f", remote, wantMs)
	}
	if local := ms["kafka_network_requestmetrics_localtimems"]; local > wantMs/3 {
		t.Errorf("long poll's LocalTime %.3f ms: the wait is counted there", local)
	}
}
