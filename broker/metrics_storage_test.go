package broker

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"ringlog/ioring"
)

// TestMetricsStorage: on io_uring with two log directories, each log's
// size on /metrics is the size DescribeLogDirs reports for it, and so are
// the bytes appended to it (nothing was deleted yet), each
// directory has its volume's total and usable bytes, every shard its
// ring's depth; after a restart with the second directory gone, the
// directory is counted offline and has no volume series.
func TestMetricsStorage(t *testing.T) {
	root := t.TempDir()
	d0, d1 := filepath.Join(root, "d0"), filepath.Join(root, "d1")
	cfg := testConfig(t, d0)
	cfg.LogDirs = []string{d1}
	cfg.IO = ioring.ModeUring
	tb := &testBroker{cfg: cfg}
	if err := tb.start(); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	page := serveMetrics(t, tb.reg)

	const topic = "sized"
	cl := newClient(t, tb.b.Addr(), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	adm := kadm.NewClient(cl)
	if _, err := adm.CreateTopic(ctx, 2, 1, nil, topic); err != nil {
		t.Fatal(err)
	}
	for p, n := range []int{40, 7} {
		var rs []*kgo.Record
		for i := range n {
			rs = append(rs, &kgo.Record{Topic: topic, Partition: int32(p), Value: fmt.Appendf(nil, "record %d of %d", i, p)})
		}
		if err := cl.ProduceSync(ctx, rs...).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	dirs, err := adm.DescribeAllLogDirs(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	m := page.scrape()
	sized := 0
	dirs.Each(func(d kadm.DescribedLogDir) {
		if d.Err != nil {
			t.Fatalf("log dir %s: %v", d.Dir, d.Err)
		}
		for _, series := range []string{"ringlog_log_dir_total_bytes", "ringlog_log_dir_usable_bytes"} {
			if v := m[fmt.Sprintf(`%s{dir="%s"}`, series, d.Dir)]; v <= 0 {
				t.Errorf("%s of %s: %v", series, d.Dir, v)
			}
		}
		d.Topics.Each(func(p kadm.DescribedLogDirPartition) {
			if p.Topic != topic {
				return
			}
			series := fmt.Sprintf(`kafka_log_log_size{partition="%d",topic="%s"}`, p.Partition, p.Topic)
			if got, ok := m[series]; !ok || got != float64(p.Size) || got == 0 {
				t.Errorf("%s = %v (present %v), DescribeLogDirs says %d", series, got, ok, p.Size)
			}
			// Nothing was deleted: every byte of the log was appended
			// since it opened.
			series = fmt.Sprintf(`ringlog_log_appended_bytes_total{partition="%d",topic="%s"}`, p.Partition, p.Topic)
			if got := m[series]; got != float64(p.Size) {
				t.Errorf("%s = %v, the log holds %d bytes", series, got, p.Size)
			}
			sized++
		})
	})
	if sized != 2 {
		t.Errorf("%d partitions of %s sized, want 2", sized, topic)
	}
	for shard := range cfg.Shards {
		if v := m[fmt.Sprintf(`ringlog_ioring_sqes_max{shard="%d"}`, shard)]; v <= 0 {
			t.Errorf("shard %d: ring size %v", shard, v)
		}
		if v, ok := m[fmt.Sprintf(`ringlog_ioring_sqes_in_flight{shard="%d"}`, shard)]; !ok || v < 0 {
			t.Errorf("shard %d: in flight %v (present %v)", shard, v, ok)
		}
	}
	if v := m["kafka_log_logmanager_offlinelogdirectorycount"]; v != 0 {
		t.Errorf("offline log directories: %v", v)
	}

	// The second directory's disk is gone at the next start.
	if err := tb.b.Close(ctx); err != nil {
		t.Fatal(err)
	}
	if err := os.RemoveAll(d1); err != nil {
		t.Fatal(err)
	}
	tb.reg = prometheus.NewRegistry()
	if err := tb.start(); err != nil {
		t.Fatal(err)
	}
	defer tb.b.Close(ctx)
	m = serveMetrics(t, tb.reg).scrape()
	if v := m["kafka_log_logmanager_offlinelogdirectorycount"]; v != 1 {
		t.Errorf("offline log directories after %s went: %v, want 1", d1, v)
	}
	abs, _ := filepath.Abs(d1)
	if _, ok := m[fmt.Sprintf(`ringlog_log_dir_usable_bytes{dir="%s"}`, abs)]; ok {
		t.Errorf("an offline directory reports its volume")
	}
}
