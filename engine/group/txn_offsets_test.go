package group

import (
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"ringlog/engine"
)

func txnCommitRequest(groupID string, pid int64, offset int64) *kmsg.TxnOffsetCommitRequest {
	req := kmsg.NewPtrTxnOffsetCommitRequest()
	req.Version = 3
	req.TransactionalID, req.Group, req.ProducerID, req.ProducerEpoch, req.Generation = "tx", groupID, pid, 0, -1
	rt := kmsg.NewTxnOffsetCommitRequestTopic()
	rt.Topic = "t"
	rp := kmsg.NewTxnOffsetCommitRequestTopicPartition()
	rp.Offset = offset
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	return req
}

// writeMarker writes a transaction marker of pid to the group's partition
// of __consumer_offsets and tells the coordinator from the append's done
// callback, as the partition's leader does (kafka's writeMarker).
func writeMarker(t *testing.T, e *engine.Core, c *Coordinator, part int32, pid int64, commit bool) {
	t.Helper()
	done := make(chan error, 1)
	e.AppendMarker(engine.TP{Topic: OffsetsTopic, Partition: part}, engine.Marker{ProducerID: pid, Commit: commit},
		engine.AppendOptions{RequireISR: true}, func(_ engine.AppendResult, err error) {
			if err == nil {
				c.TxnCompleted(part, pid, commit)
			}
			done <- err
		})
	if err := <-done; err != nil {
		t.Fatal(err)
	}
}

func fetched(t *testing.T, c *Coordinator, requireStable bool) kmsg.OffsetFetchResponseTopicPartition {
	t.Helper()
	r := call(t, func(reply func(*kmsg.OffsetFetchResponse)) { c.OffsetFetch(fetchRequest("g", requireStable), reply) })
	return r.Topics[0].Partitions[0]
}

// TestTxnOffsetsPendingUntilMarker: a transactional commit is invisible
// (UNSTABLE_OFFSET_COMMIT to require_stable) until its producer's COMMIT
// marker is written on the partition; an ABORT drops it; a restart's
// replay applies the markers in the log the same way; and a marker
// written while the partition is being replayed (after the replay read
// the log) is applied at the install, not lost.
func TestTxnOffsetsPendingUntilMarker(t *testing.T) {
	dir := t.TempDir()
	e, c := openCoordinator(t, dir, Config{OffsetsTopicPartitions: 1})
	waitLoaded(t, c)
	if _, err := e.CreateTopic("t", 1, -1, nil, false); err != nil {
		t.Fatal(err)
	}
	commit := func(pid, offset int64) {
		t.Helper()
		r := call(t, func(reply func(*kmsg.TxnOffsetCommitResponse)) {
			c.TxnOffsetCommit(txnCommitRequest("g", pid, offset), reply)
		})
		if code := r.Topics[0].Partitions[0].ErrorCode; code != 0 {
			t.Fatal(kerr.ErrorForCode(code))
		}
	}
	commit(7, 10)
	if p := fetched(t, c, false); p.Offset != -1 {
		t.Fatalf("pending offset visible: %+v", p)
	}
	if p := fetched(t, c, true); p.ErrorCode != kerr.UnstableOffsetCommit.Code {
		t.Fatalf("require_stable on a pending offset: %v", kerr.ErrorForCode(p.ErrorCode))
	}
	writeMarker(t, e, c, 0, 7, true)
	if p := fetched(t, c, true); p.ErrorCode != 0 || p.Offset != 10 {
		t.Fatalf("after the commit marker: %+v", p)
	}
	commit(8, 20)
	writeMarker(t, e, c, 0, 8, false)
	if p := fetched(t, c, true); p.ErrorCode != 0 || p.Offset != 10 {
		t.Fatalf("after the abort marker: %+v", p)
	}
	commit(9, 30) // left pending across the restart

	c.Close()
	e.Close()
	release := make(chan struct{})
	held := make(chan struct{}, 1)
	beforeInstall = func(int32) { held <- struct{}{}; <-release }
	defer func() { beforeInstall = nil }()
	e, c = openCoordinator(t, dir, Config{OffsetsTopicPartitions: 1})
	<-held
	// The replay has read the log: producer 9's commit is pending there.
	writeMarker(t, e, c, 0, 9, true)
	close(release)
	waitLoaded(t, c)
	if p := fetched(t, c, true); p.ErrorCode != 0 || p.Offset != 30 {
		t.Fatalf("a commit marker written during the replay: %+v", p)
	}

	// And from the log alone.
	c.Close()
	e.Close()
	_, c = openCoordinator(t, dir, Config{OffsetsTopicPartitions: 1})
	waitLoaded(t, c)
	if p := fetched(t, c, true); p.ErrorCode != 0 || p.Offset != 30 {
		t.Fatalf("after a second restart: %+v", p)
	}
}

// TestTxnOffsetsOlderThanCommit: a transaction's offsets, when it
// commits, replace only offsets written before them, as Kafka compares the
// records' log offsets (olderThan): an OffsetCommit written after the
// TxnOffsetCommit keeps its offset across the marker, and one written
// before is replaced; the replay after a restart agrees.
func TestTxnOffsetsOlderThanCommit(t *testing.T) {
	dir := t.TempDir()
	e, c := openCoordinator(t, dir, Config{OffsetsTopicPartitions: 1})
	waitLoaded(t, c)
	if _, err := e.CreateTopic("t", 1, -1, nil, false); err != nil {
		t.Fatal(err)
	}
	txnCommit := func(pid, offset int64) {
		t.Helper()
		r := call(t, func(reply func(*kmsg.TxnOffsetCommitResponse)) {
			c.TxnOffsetCommit(txnCommitRequest("g", pid, offset), reply)
		})
		if code := r.Topics[0].Partitions[0].ErrorCode; code != 0 {
			t.Fatal(kerr.ErrorForCode(code))
		}
	}
	commit := func(offset int64) {
		t.Helper()
		r := call(t, func(reply func(*kmsg.OffsetCommitResponse)) { c.OffsetCommit(commitRequest("g", offset), reply) })
		if code := r.Topics[0].Partitions[0].ErrorCode; code != 0 {
			t.Fatal(kerr.ErrorForCode(code))
		}
	}
	txnCommit(7, 10)
	commit(50)
	writeMarker(t, e, c, 0, 7, true)
	if p := fetched(t, c, true); p.ErrorCode != 0 || p.Offset != 50 {
		t.Fatalf("a transaction's offset written before an OffsetCommit replaced it at the marker: %+v", p)
	}
	commit(60)
	txnCommit(8, 70)
	writeMarker(t, e, c, 0, 8, true)
	if p := fetched(t, c, true); p.ErrorCode != 0 || p.Offset != 70 {
		t.Fatalf("a transaction's offset written after an OffsetCommit: %+v", p)
	}
	txnCommit(9, 80)
	commit(90)
	writeMarker(t, e, c, 0, 9, true)
	if p := fetched(t, c, true); p.ErrorCode != 0 || p.Offset != 90 {
		t.Fatalf("second transaction written before an OffsetCommit: %+v", p)
	}

	c.Close()
	e.Close()
	_, c = openCoordinator(t, dir, Config{OffsetsTopicPartitions: 1})
	waitLoaded(t, c)
	if p := fetched(t, c, true); p.ErrorCode != 0 || p.Offset != 90 {
		t.Fatalf("after a restart: %+v", p)
	}
}
