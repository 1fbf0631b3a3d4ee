// Command ringlog will be the broker. Until the broker lands (issue 3) it
// runs a storage demo: it opens one partition log under the data directory
// through the I/O path the probe picks, appends record batches, reads them
// back, and reports what it did.
package main

import (
	"flag"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"time"

	"ringlog/ioring"
	"ringlog/segment"
	"ringlog/segment/batch"
)

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "ringlog:", err)
		os.Exit(1)
	}
}

func run() error {
	dataDir := flag.String("data-dir", "./data", "directory for partition logs")
	ioMode := flag.String("io", "auto", "I/O path: auto, uring or portable")
	flush := flag.String("flush", "never", "flush policy: always, interval or never")
	batches := flag.Int("batches", 10000, "batches to append")
	records := flag.Int("records", 10, "records per batch")
	valueBytes := flag.Int("value-bytes", 100, "bytes per record value")
	flag.Parse()

	mode, err := ioring.ParseMode(*ioMode)
	if err != nil {
		return err
	}
	policy, err := segment.ParseFlushPolicy(*flush)
	if err != nil {
		return err
	}
	io, choice, err := ioring.Open(mode, ioring.Config{})
	if err != nil {
		return err
	}
	defer io.Close()
	slog.Info("I/O path", "kind", choice.Kind, "reason", choice.Reason)

	cfg := segment.DefaultConfig()
	cfg.Flush = policy
	dir := filepath.Join(*dataDir, "demo-0")
	l, err := segment.Open(dir, cfg, segment.Options{IO: io})
	if err != nil {
		return err
	}
	r := l.Recovery()
	slog.Info("log opened", "dir", dir, "clean", r.Clean, "segments_scanned", r.SegmentsScanned,
		"truncated_bytes", r.TruncatedBytes, "log_end_offset", l.LEO())

	recs := make([]batch.Record, *records)
	for i := range recs {
		recs[i] = batch.Record{OffsetDelta: int32(i), Value: make([]byte, *valueBytes)}
	}
	start := l.LEO()
	began := time.Now()
	var bytes int64
	for i := 0; i < *batches; i++ {
		now := time.Now().UnixMilli()
		h := batch.Header{LastOffsetDelta: int32(len(recs) - 1), BaseTimestamp: now, MaxTimestamp: now,
			ProducerID: -1, ProducerEpoch: -1, BaseSequence: -1}
		b, err := batch.Build(nil, h, batch.None, recs)
		if err != nil {
			return err
		}
		res, err := l.Append([][]byte{b}, segment.AppendOptions{})
		if err != nil {
			return err
		}
		bytes += res.Bytes
	}
	took := time.Since(began)
	slog.Info("appended", "batches", *batches, "records", l.LEO()-start, "bytes", bytes,
		"MB/s", fmt.Sprintf("%.1f", float64(bytes)/took.Seconds()/1e6), "flush", policy)

	got, err := l.ReadBatches(start, bytes, l.LEO())
	if err != nil {
		return err
	}
	slog.Info("read back", "from_offset", start, "bytes", len(got), "log_end_offset", l.LEO(), "segments", l.Segments())
	return l.Close()
}
