package streams

import (
	"context"
	"encoding/base64"
	"encoding/binary"
	"errors"
	"fmt"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// Stream time across restarts and task moves, as Kafka Streams keeps it
// (KAFKA-7994): each input partition's partition time, the largest
// record timestamp processed from it, is committed with its offset, in
// the OffsetCommit (at least once) or TxnOffsetCommit (exactly once)
// metadata string, in Kafka's TopicPartitionMetadata encoding. A task
// starting reads it back with the committed offsets and starts at the
// largest of its partitions' times, so that windows, grace periods,
// suppression and retention go on from where the previous owner left
// off: a record late before a restart is late after it.
//
// Kafka restores the task's time only; its windowed and suppression
// processors keep an observed stream time of their own in memory, which
// starts again from the first record after a restart. Here the
// processors read the task's time, so they take the restored time up.

// unknownTime is Kafka's RecordQueue.UNKNOWN: no partition time.
const unknownTime = -1

// partitionTimeMagic is the version of Kafka's TopicPartitionMetadata
// written (LATEST_MAGIC_BYTE): the version byte, the partition time (i64
// big endian), then processor metadata, none here.
const partitionTimeMagic = 2

// taskSource is one input partition of a task (the task's partition of
// one source topic, repartition topics included): its processing
// function and its partition time.
type taskSource struct {
	fn sourceFn
	// time is the largest timestamp processed from the partition (ms),
	// unknownTime before the first record or a restored time.
	time int64
	// committed is time as of the last commit (or as restored): what a
	// discard (an aborted transaction) rewinds to, as kgo rewinds the
	// partition to its committed offset.
	committed int64
}

// encodePartitionTime is Kafka's TopicPartitionMetadata.encode with no
// processor metadata: base64 of the version byte and the time.
func encodePartitionTime(ts int64) string {
	var b [9]byte
	b[0] = partitionTimeMagic
	binary.BigEndian.PutUint64(b[1:], uint64(ts))
	return base64.StdEncoding.EncodeToString(b[:])
}

// errPartitionTime: committed metadata that is not a partition time.
var errPartitionTime = errors.New("not Kafka Streams' partition time")

// decodePartitionTime reads committed offset metadata as Kafka's
// TopicPartitionMetadata.decode does: empty is no time (unknownTime);
// versions 1 and 2 hold the time after the version byte (version 2's
// processor metadata after it is not used here). Only the first 12
// base64 characters (9 bytes) are decoded: the allocation is bounded
// whatever the metadata's length.
func decodePartitionTime(meta string) (int64, error) {
	if meta == "" {
		return unknownTime, nil
	}
	head := meta
	if len(head) > 12 {
		head = head[:12] // 12 characters are 9 bytes, no padding
	}
	var b [9]byte
	n, err := base64.StdEncoding.Decode(b[:], []byte(head))
	if err != nil || n < 9 {
		return unknownTime, fmt.Errorf("%w: %d bytes of metadata", errPartitionTime, len(meta))
	}
	if b[0] != 1 && b[0] != 2 {
		return unknownTime, fmt.Errorf("%w: version %d", errPartitionTime, b[0])
	}
	ts := int64(binary.BigEndian.Uint64(b[1:]))
	if ts < 0 {
		ts = unknownTime
	}
	return ts, nil
}

// timesCommitted records the partition times as committed: called once
// the commit that carried them succeeded (or is about to, at least once,
// where a failed offset commit stops the application).
func (t *task) timesCommitted() {
	for _, src := range t.srcs {
		src.committed = src.time
	}
}

// rewindTimes sets the partition times and the task's stream time back
// to the last committed ones: the records since are processed again.
func (t *task) rewindTimes() {
	st := int64(0)
	for _, src := range t.srcs {
		src.time = src.committed
		st = max(st, src.time)
	}
	t.streamTime = st
}

// setTime restores the partition time of a source topic's partition.
func (t *task) setTime(topic string, ts int64) {
	if src, ok := t.srcs[topic]; ok {
		src.time, src.committed = ts, ts
		t.streamTime = max(t.streamTime, ts)
	}
}

// offsetMetadata is the metadata to commit with each input partition's
// offset: its partition time, encoded. A snapshot taken in the
// processing goroutine, read by kgo's commit goroutine.
func (a *App) offsetMetadata() map[string]map[int32]string {
	out := map[string]map[int32]string{}
	for _, t := range a.tasks {
		for topic, src := range t.srcs {
			if out[topic] == nil {
				out[topic] = map[int32]string{}
			}
			out[topic][t.id.partition] = encodePartitionTime(src.time)
		}
	}
	return out
}

// metaFor returns the metadata for a partition of a commit request: its
// partition time, or Kafka's unknown time for a partition of no task
// here (kgo writes the member id otherwise).
func metaFor(meta map[string]map[int32]string, topic string, p int32) *string {
	m, ok := meta[topic][p]
	if !ok {
		m = encodePartitionTime(unknownTime)
	}
	return &m
}

// withOffsetMetadata returns ctx carrying the partition times to kgo's
// offset commit (at least once) and transactional offset commit (exactly
// once).
func (a *App) withOffsetMetadata(ctx context.Context) context.Context {
	meta := a.offsetMetadata()
	ctx = kgo.PreCommitFnContext(ctx, func(req *kmsg.OffsetCommitRequest) error {
		for i := range req.Topics {
			rt := &req.Topics[i]
			for j := range rt.Partitions {
				rt.Partitions[j].Metadata = metaFor(meta, rt.Topic, rt.Partitions[j].Partition)
			}
		}
		return nil
	})
	return kgo.PreTxnCommitFnContext(ctx, func(req *kmsg.TxnOffsetCommitRequest) error {
		for i := range req.Topics {
			rt := &req.Topics[i]
			for j := range rt.Partitions {
				rt.Partitions[j].Metadata = metaFor(meta, rt.Topic, rt.Partitions[j].Partition)
			}
		}
		return nil
	})
}

// restoreTimes reads the committed offsets' metadata of the new tasks'
// input partitions and sets their partition times (Kafka's
// StreamTask.initializeTaskTimeAndProcessorMetadata). Exactly once it
// asks for stable offsets: a previous owner's transactional commit still
// open is waited for (UNSTABLE_OFFSET_COMMIT, retried).
func (a *App) restoreTimes(ctx context.Context, tasks []*task) error {
	fctx := ctx
	if a.cfg.Guarantee == ExactlyOnce {
		fctx = kadm.RequireStable(ctx)
	}
	deadline := time.Now().Add(60 * time.Second) // Kafka's default.api.timeout.ms
	for {
		offs, err := a.adm.FetchOffsets(fctx, a.cfg.ApplicationID)
		if err == nil {
			for _, t := range tasks {
				for topic := range t.srcs {
					if o, ok := offs.Lookup(topic, t.id.partition); ok && o.Err != nil && err == nil {
						err = fmt.Errorf("%s/%d: %w", topic, t.id.partition, o.Err)
					}
				}
			}
		}
		if err == nil {
			for _, t := range tasks {
				for topic := range t.srcs {
					o, ok := offs.Lookup(topic, t.id.partition)
					if !ok || o.At < 0 {
						continue // nothing committed: no time
					}
					ts, err := decodePartitionTime(o.Metadata)
					if err != nil {
						a.log.Warn("streams: partition time unknown", "task", t.id.String(), "topic", topic,
							"partition", t.id.partition, "err", err)
						continue
					}
					t.setTime(topic, ts)
				}
			}
			return nil
		}
		if !errors.Is(err, kerr.UnstableOffsetCommit) || time.Now().After(deadline) {
			return fmt.Errorf("streams: committed offsets of the new tasks: %w", err)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(100 * time.Millisecond):
		}
	}
}
