package mirror

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"ringlog/internal/testkit"
)

// TestMirrorTransactionSpansPolls: a backlog larger than one poll
// (pollRecordsMax) is committed in one transaction while it stays below
// the transaction's bounds, not in one transaction per poll: each
// transaction costs the target round trips and a marker per partition, and
// committing every poll held the mirror to a third of a plain producer's
// rate. Counted by the remote partition's end offset: the records plus one
// marker per transaction.
func TestMirrorTransactionSpansPolls(t *testing.T) {
	t.Parallel()
	a, b := startBroker(t), startBroker(t)
	admA, admB := kadm.NewClient(client(t, a)), kadm.NewClient(client(t, b))
	createTopic(t, admA, "t", 1, nil)
	ctx := context.Background()
	const n = 4 * pollRecordsMax
	// One codec for every batch: kgo compresses with snappy by default
	// and sends a batch that does not shrink uncompressed, and a codec
	// switch commits the earlier codec's transaction (seen under -race:
	// four transactions).
	prod := client(t, a, kgo.ProducerLinger(5*time.Millisecond), kgo.ProducerBatchCompression(kgo.NoCompression()))
	for i := range n {
		prod.Produce(ctx, &kgo.Record{Topic: "t", Value: fmt.Appendf(nil, "%d", i)}, nil)
	}
	if err := prod.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	reg := prometheus.NewRegistry()
	start := time.Now()
	runMirrorOpt(t, map[string]string{
		"clusters": "A, B", "A.bootstrap.servers": a, "B.bootstrap.servers": b,
		"A->B.enabled": "true", "A->B.topics": "t", "emit.checkpoints.enabled": "false",
	}, Options{TxnInterval: 10 * time.Second, Metrics: NewMetrics(reg)})
	got := readAll(t, b, "A.t", n, 15*time.Second)
	for i, r := range got[0] {
		if string(r.Value) != fmt.Sprint(i) {
			t.Fatalf("A.t at %d: %q, want %d", i, r.Value, i)
		}
	}
	ends, err := admB.ListEndOffsets(ctx, "A.t")
	if err != nil {
		t.Fatal(err)
	}
	end, _ := ends.Lookup("A.t", 0)
	// The first fetch may hold part of the backlog only, and the
	// source be caught up with for a moment: two transactions at most.
	if txns := end.Offset - n; txns < 1 || txns > 2 {
		t.Fatalf("%d records of %d polls' worth mirrored in %d transactions (A.t/0 ends at %d), want 1 or 2", n, n/pollRecordsMax, txns, end.Offset)
	}
	// The records are counted once committed, and the commit's time set
	// just after: read_committed consumers may see them a moment before.
	var records, last float64
	testkit.WaitFor(t, 5*time.Second, "the flow's metrics to count every record", func() bool {
		mfs, err := reg.Gather()
		if err != nil {
			t.Fatal(err)
		}
		for _, mf := range mfs {
			for _, m := range mf.GetMetric() {
				switch mf.GetName() {
				case "ringlog_mirror_records_total":
					records = m.GetCounter().GetValue()
				case "ringlog_mirror_last_commit_timestamp_seconds":
					last = m.GetGauge().GetValue()
				}
			}
		}
		return records == n && last > 0
	})
	if at := time.Unix(0, int64(last*1e9)); at.Before(start) || at.After(time.Now()) {
		t.Fatalf("ringlog_mirror_last_commit_timestamp_seconds is %v, outside the run (%v to now)", at, start)
	}
}
