package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"ringlog/broker"
	"ringlog/engine"
	"ringlog/internal/testkit"
	"ringlog/segment/batch"
)

// A data directory written by a broker without a quorum (the engine on its
// own, as ringlog ran before a single broker was a one-voter quorum) is
// adopted by the local quorum at the broker's first start: the topics
// keep their ids, partition counts, configs and records, and producer ids
// handed out before are not handed out again.
func TestLocalQuorumAdoptsTopicsWrittenWithoutIt(t *testing.T) {
	dir := t.TempDir()
	eng, err := engine.OpenCore(engine.Config{Dir: dir, Shards: 1, NodeID: 0})
	if err != nil {
		t.Fatal(err)
	}
	info, err := eng.CreateTopic("before", 3, 1, map[string]string{"retention.ms": "86400000"}, false)
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now().UnixMilli()
	for p := range int32(3) {
		recs := []batch.Record{{Value: fmt.Appendf(nil, "p%d-0", p)}, {OffsetDelta: 1, Value: fmt.Appendf(nil, "p%d-1", p)}}
		b, err := batch.Build(nil, batch.Header{LastOffsetDelta: 1, BaseTimestamp: now, MaxTimestamp: now,
			ProducerID: -1, ProducerEpoch: -1, BaseSequence: -1, PartitionLeaderEpoch: -1}, batch.None, recs)
		if err != nil {
			t.Fatal(err)
		}
		done := make(chan error, 1)
		eng.Append(engine.TP{Topic: "before", Partition: p}, b, engine.AppendOptions{}, func(_ engine.AppendResult, err error) { done <- err })
		if err := <-done; err != nil {
			t.Fatal(err)
		}
	}
	usedPID, err := eng.AllocateProducerID()
	if err != nil {
		t.Fatal(err)
	}
	if err := eng.Close(); err != nil {
		t.Fatal(err)
	}

	addr := testkit.FreeAddr(t)
	p := start(t, "-listen", addr, "-data-dir", dir)
	p.waitFor(t, "ringlog started")
	p.waitFor(t, "topics adopted by the new local metadata quorum")
	cl, err := kgo.NewClient(kgo.SeedBrokers(addr), kgo.ConsumeTopics("before"), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	td, err := kadm.NewClient(cl).ListTopics(ctx, "before")
	if err != nil {
		t.Fatal(err)
	}
	if d := td["before"]; d.Err != nil || [16]byte(d.ID) != info.ID || len(d.Partitions) != 3 {
		t.Fatalf("topic after adoption: %+v (id %x before)", d, info.ID)
	}
	rc, err := kadm.NewClient(cl).DescribeTopicConfigs(ctx, "before")
	if err != nil {
		t.Fatal(err)
	}
	if c, err := rc.On("before", nil); err != nil || !hasConfig(c, "retention.ms", "86400000") {
		t.Fatalf("configs after adoption: %+v %v", c, err)
	}
	got := map[string]bool{}
	for len(got) < 6 {
		fs := cl.PollFetches(ctx)
		if err := fs.Err(); err != nil {
			t.Fatalf("consume: %v (read %v)", err, got)
		}
		fs.EachRecord(func(r *kgo.Record) { got[string(r.Value)] = true })
	}
	if len(got) != 6 {
		t.Fatalf("read %v, want the 6 records written before", got)
	}
	// An idempotent producer gets an id above the ones used before.
	pid, _, err := initProducerID(ctx, cl)
	if err != nil {
		t.Fatal(err)
	}
	if pid <= usedPID {
		t.Fatalf("producer id %d after id %d was handed out without the quorum", pid, usedPID)
	}
	if err := p.stop(t); err != nil {
		t.Fatalf("exit after SIGTERM: %v\n%s", err, p.out.String())
	}
	// A restart does not adopt again: the quorum exists now.
	p = start(t, "-listen", addr, "-data-dir", dir)
	p.waitFor(t, "ringlog started")
	if n := countLines(p.out.String(), "topics adopted"); n != 0 {
		t.Fatalf("adopted again at the second start:\n%s", p.out.String())
	}
	if err := p.stop(t); err != nil {
		t.Fatalf("exit after SIGTERM: %v\n%s", err, p.out.String())
	}
	// A start that died between adopting and clearing its mark: the next
	// one finds every topic adopted already, and starts.
	if err := os.WriteFile(filepath.Join(dir, broker.AdoptPendingFile), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	p = start(t, "-listen", addr, "-data-dir", dir)
	p.waitFor(t, "ringlog started")
	if _, err := os.Stat(filepath.Join(dir, broker.AdoptPendingFile)); !os.IsNotExist(err) {
		t.Fatalf("adoption mark still there: %v", err)
	}
}

func hasConfig(rc kadm.ResourceConfig, key, value string) bool {
	for _, c := range rc.Configs {
		if c.Key == key && c.Value != nil && *c.Value == value {
			return true
		}
	}
	return false
}

func countLines(out, substr string) int {
	n := 0
	for _, l := range strings.Split(out, "\n") {
		if strings.Contains(l, substr) {
			n++
		}
	}
	return n
}

// initProducerID asks the broker for an idempotent producer id.
func initProducerID(ctx context.Context, cl *kgo.Client) (int64, int16, error) {
	req := kmsg.NewPtrInitProducerIDRequest()
	req.TransactionTimeoutMillis = -1
	resp, err := req.RequestWith(ctx, cl)
	if err != nil {
		return 0, 0, err
	}
	if err := kerr.ErrorForCode(resp.ErrorCode); err != nil {
		return 0, 0, err
	}
	return resp.ProducerID, resp.ProducerEpoch, nil
}

// TestLostQuorumStoreKeepsTopics: a broker whose local quorum store is
// gone while its directory (controller/) and its logs are still there (what
// a power loss did before issue 20's fix: raft.db was never named durably)
// adopts the engine's topics again instead of deleting them as unknown to
// a fresh quorum.
func TestLostQuorumStoreKeepsTopics(t *testing.T) {
	dir := t.TempDir()
	addr := testkit.FreeAddr(t)
	p := start(t, "-listen", addr, "-data-dir", dir)
	p.waitFor(t, "ringlog started")
	cl, err := kgo.NewClient(kgo.SeedBrokers(addr), kgo.DefaultProduceTopic("kept"), kgo.AllowAutoTopicCreation())
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	for i := range 10 {
		if err := cl.ProduceSync(ctx, kgo.StringRecord(fmt.Sprint(i))).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	cl.Close()
	if err := p.stop(t); err != nil {
		t.Fatalf("exit after SIGTERM: %v\n%s", err, p.out.String())
	}
	if err := os.Remove(filepath.Join(dir, "controller", "raft.db")); err != nil {
		t.Fatal(err)
	}
	p = start(t, "-listen", addr, "-data-dir", dir)
	p.waitFor(t, "ringlog started")
	p.waitFor(t, "topics adopted by the new local metadata quorum")
	cl, err = kgo.NewClient(kgo.SeedBrokers(addr), kgo.ConsumeTopics("kept"), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	read := 0
	for read < 10 {
		fs := cl.PollFetches(ctx)
		if err := fs.Err(); err != nil {
			t.Fatalf("consume after the store was lost: %v (read %d of 10)\n%s", err, read, p.out.String())
		}
		read += fs.NumRecords()
	}
}
