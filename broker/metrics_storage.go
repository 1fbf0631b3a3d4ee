package broker

import (
	"context"
	"strconv"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"ringlog/engine"
	"ringlog/internal/fsutil"
	"ringlog/ioring"
)

// Storage metrics, counted at scrape time like the others: each log's size
// (Kafka's kafka.log:type=Log,name=Size) and the bytes appended to it
// since it opened (the log's own counter), the log directories offline
// (kafka.log:type=LogManager,name=OfflineLogDirectoryCount), each log
// directory's volume (statfs, what DescribeLogDirs reports since KIP-827;
// Kafka has no metric for it), each shard's io_uring depth and the
// process's direct writes by their buffer.

// ringDepthWait bounds a scrape's wait for the shards' ring samples; a
// shard busy for longer is left out of that scrape.
const ringDepthWait = time.Second

type storageCollector struct {
	eng *engine.Core

	size, appended, offlineDirs, dirTotal, dirUsable, sqesInFlight, sqesMax, directWrites *prometheus.Desc
}

func newStorageCollector(eng *engine.Core) *storageCollector {
	return &storageCollector{eng: eng,
		size: prometheus.NewDesc("kafka_log_log_size",
			"Kafka's kafka.log:type=Log,name=Size: bytes of each partition's log on this broker, its segments' committed record bytes (the .log files; indexes not counted), as DescribeLogDirs reports it. A replica being moved between log directories is counted once, its current log.",
			[]string{"topic", "partition"}, nil),
		appended: prometheus.NewDesc("ringlog_log_appended_bytes_total",
			"Bytes of record batches appended to each partition's log on this broker since the log was opened (a leader's appends and a follower's copies alike): "+
				"its rate is the partition's write throughput, which the log's size does not give once retention deletes. Starts again from 0 at a restart, "+
				"or when a move between log directories installs the copy.",
			[]string{"topic", "partition"}, nil),
		offlineDirs: prometheus.NewDesc("kafka_log_logmanager_offlinelogdirectorycount",
			"Kafka's OfflineLogDirectoryCount: log directories (log.dirs) this broker could not open or lost to a disk failure; their partitions are offline here.", nil, nil),
		dirTotal: prometheus.NewDesc("ringlog_log_dir_total_bytes",
			"Size of the volume holding each online log directory (statfs; DescribeLogDirs' TotalBytes, KIP-827).", []string{"dir"}, nil),
		dirUsable: prometheus.NewDesc("ringlog_log_dir_usable_bytes",
			"Bytes an unprivileged writer may still use on the volume holding each online log directory (statfs f_bavail; DescribeLogDirs' UsableBytes, KIP-827).", []string{"dir"}, nil),
		sqesInFlight: prometheus.NewDesc("ringlog_ioring_sqes_in_flight",
			"Submission-queue entries of each shard's io_uring ring in the kernel (submitted, completion not reaped), sampled on the shard with its appends settled: "+
				"the background syncs of rolled segments and of the flush policy. No series on the portable I/O path.",
			[]string{"shard"}, nil),
		sqesMax: prometheus.NewDesc("ringlog_ioring_sqes_max",
			"The most submission-queue entries each shard's io_uring ring holds in flight (its completion queue's size); a shard at it waits for completions before submitting more.",
			[]string{"shard"}, nil),
		directWrites: prometheus.NewDesc("ringlog_ioring_direct_writes_total",
			"Direct (O_DIRECT) writes this process's io_uring rings submitted, by their buffer: fixed, from the staging arena the ring registered (WRITE_FIXED, its pages pinned once), "+
				"or plain, from other memory, whose pages the kernel pins at each write: stages beyond the arena (128 MiB), or arena chunks a ring could not register because RLIMIT_MEMLOCK "+
				"has no room for them (a process without CAP_IPC_LOCK; ringlog tune). 0 on the portable I/O path and with buffered writes.",
			[]string{"buffer"}, nil),
	}
}

func (c *storageCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{c.size, c.appended, c.offlineDirs, c.dirTotal, c.dirUsable, c.sqesInFlight, c.sqesMax, c.directWrites} {
		ch <- d
	}
}

func (c *storageCollector) Collect(ch chan<- prometheus.Metric) {
	for _, ps := range c.eng.Sizes() {
		if ps.Future {
			continue
		}
		ch <- prometheus.MustNewConstMetric(c.size, prometheus.GaugeValue, float64(ps.Size), ps.TP.Topic, strconv.Itoa(int(ps.TP.Partition)))
	}
	for _, pa := range c.eng.AppendedBytes() {
		ch <- prometheus.MustNewConstMetric(c.appended, prometheus.CounterValue, float64(pa.Bytes), pa.TP.Topic, strconv.Itoa(int(pa.TP.Partition)))
	}
	offline := 0
	for _, d := range c.eng.LogDirs() {
		if d.Err != nil {
			offline++
			continue
		}
		// Where the system cannot say, the directory has no series.
		if total, usable, err := fsutil.DiskSpace(d.Path); err == nil {
			ch <- prometheus.MustNewConstMetric(c.dirTotal, prometheus.GaugeValue, float64(total), d.Path)
			ch <- prometheus.MustNewConstMetric(c.dirUsable, prometheus.GaugeValue, float64(usable), d.Path)
		}
	}
	ch <- prometheus.MustNewConstMetric(c.offlineDirs, prometheus.GaugeValue, float64(offline))
	fixed, plain := ioring.DirectWrites()
	ch <- prometheus.MustNewConstMetric(c.directWrites, prometheus.CounterValue, float64(fixed), "fixed")
	ch <- prometheus.MustNewConstMetric(c.directWrites, prometheus.CounterValue, float64(plain), "plain")
	ctx, cancel := context.WithTimeout(context.Background(), ringDepthWait)
	defer cancel()
	for _, rd := range c.eng.RingDepths(ctx) {
		shard := strconv.Itoa(rd.Shard)
		ch <- prometheus.MustNewConstMetric(c.sqesInFlight, prometheus.GaugeValue, float64(rd.SQEsInFlight), shard)
		ch <- prometheus.MustNewConstMetric(c.sqesMax, prometheus.GaugeValue, float64(rd.SQEsMax), shard)
	}
}
