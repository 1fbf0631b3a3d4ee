package kafka_test

import (
	"context"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// writeMarkerV2 sends one WriteTxnMarkers v2 marker for partition 0 of
// topic straight to the broker and returns the partition's error code.
func writeMarkerV2(t *testing.T, cl *kgo.Client, topic string, pid int64, epoch int16, coordinatorEpoch int32, tv int8) int16 {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	req := kmsg.NewPtrWriteTxnMarkersRequest()
	req.SetVersion(2)
	m := kmsg.NewWriteTxnMarkersRequestMarker()
	m.ProducerID, m.ProducerEpoch, m.Committed, m.CoordinatorEpoch, m.TransactionVersion = pid, epoch, true, coordinatorEpoch, tv
	m.Topics = []kmsg.WriteTxnMarkersRequestMarkerTopic{{Topic: topic, Partitions: []int32{0}}}
	req.Markers = append(req.Markers, m)
	resp, err := req.RequestWith(ctx, cl.DiscoveredBrokers()[0])
	if err != nil {
		t.Fatal(err)
	}
	if len(resp.Markers) != 1 || len(resp.Markers[0].Topics) != 1 || len(resp.Markers[0].Topics[0].Partitions) != 1 {
		t.Fatalf("answer: %+v", resp)
	}
	return resp.Markers[0].Topics[0].Partitions[0].ErrorCode
}

// TestWriteTxnMarkersV2StaleMarker: a transactions v2 marker (KIP-1228's
// transaction version 2) at the epoch of the producer's open transaction
// is a stale one (v2 markers come at the epoch EndTxn bumped to) and is
// refused with INVALID_PRODUCER_EPOCH, leaving the transaction open; the
// coordinator's own marker, at the bumped epoch, commits it; the same
// marker sent again once nothing is open is taken, as Kafka takes a
// coordinator's retry.
func TestWriteTxnMarkersV2StaleMarker(t *testing.T) {
	b := startBroker(t, brokerOpts{})
	createTopic(t, b, "wm2", 1, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	tx := b.client(kgo.TransactionalID("wm2-id"), kgo.DefaultProduceTopic("wm2"))
	if err := tx.BeginTransaction(); err != nil {
		t.Fatal(err)
	}
	if err := tx.ProduceSync(ctx, &kgo.Record{Value: []byte("open")}).FirstErr(); err != nil {
		t.Fatal(err)
	}
	pid, epoch, err := tx.ProducerID(ctx)
	if err != nil {
		t.Fatal(err)
	}
	raw := b.client()
	if err := raw.Ping(ctx); err != nil {
		t.Fatal(err)
	}
	adm := b.admin()

	if code := writeMarkerV2(t, raw, "wm2", pid, epoch, 0, 2); code != kerr.InvalidProducerEpoch.Code {
		t.Fatalf("v2 marker at the open transaction's epoch %d: code %d, want INVALID_PRODUCER_EPOCH", epoch, code)
	}
	if d := describeProducer(t, adm, "wm2", pid); d.CurrentTxnStartOffset != 0 {
		t.Fatalf("the refused marker ended the transaction: %+v", d)
	}

	if err := tx.EndTransaction(ctx, kgo.TryCommit); err != nil {
		t.Fatal(err)
	}
	var d = describeProducer(t, adm, "wm2", pid)
	for deadline := time.Now().Add(10 * time.Second); d.CurrentTxnStartOffset != -1; d = describeProducer(t, adm, "wm2", pid) {
		if time.Now().After(deadline) {
			t.Fatalf("transaction still open after its commit: %+v", d)
		}
		time.Sleep(20 * time.Millisecond)
	}
	if got := consumeIso(t, b, "wm2", kgo.ReadCommitted(), 1); len(got) != 1 || got[0] != "open" {
		t.Fatalf("read_committed: %v", got)
	}
	if d.ProducerEpoch != epoch+1 {
		t.Fatalf("the coordinator's marker came at epoch %d, want %d", d.ProducerEpoch, epoch+1)
	}
	if code := writeMarkerV2(t, raw, "wm2", pid, d.ProducerEpoch, d.CoordinatorEpoch, 2); code != 0 {
		t.Fatalf("the marker sent again with nothing open: code %d", code)
	}
}
