package mirror

import (
	"bytes"
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// rawBatchCodecs fetches topic/partition's record batches from addr with a
// plain Fetch (kmsg, read_uncommitted) and returns each data batch's
// compression codec (attributes bits 0-2) and record count, in log order.
// Transaction markers are left out.
func rawBatchCodecs(t *testing.T, addr, topic string, partition int32) (codecs []int8, counts []int32) {
	t.Helper()
	cl := client(t, addr)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	// Fetch v13 and later name topics by ID (kgo sends the newest
	// version both sides know).
	td, err := kadm.NewClient(cl).ListTopics(ctx, topic)
	if err != nil || td[topic].Err != nil {
		t.Fatalf("metadata of %s: %v %v", topic, err, td[topic].Err)
	}
	var offset int64
	for {
		req := kmsg.NewPtrFetchRequest()
		req.ReplicaID = -1
		req.MaxWaitMillis = 100
		req.MaxBytes = 8 << 20
		rt := kmsg.NewFetchRequestTopic()
		rt.Topic, rt.TopicID = topic, td[topic].ID
		rp := kmsg.NewFetchRequestTopicPartition()
		rp.Partition, rp.FetchOffset, rp.PartitionMaxBytes, rp.CurrentLeaderEpoch = partition, offset, 8<<20, -1
		rt.Partitions = append(rt.Partitions, rp)
		req.Topics = append(req.Topics, rt)
		resp, err := req.RequestWith(ctx, cl)
		if err != nil {
			t.Fatalf("fetch %s/%d@%d: %v", topic, partition, offset, err)
		}
		p := resp.Topics[0].Partitions[0]
		if err := kerr.ErrorForCode(p.ErrorCode); err != nil {
			t.Fatalf("fetch %s/%d@%d: %v", topic, partition, offset, err)
		}
		b := p.RecordBatches
		if len(b) == 0 {
			return codecs, counts
		}
		for len(b) >= 12 {
			var batch kmsg.RecordBatch
			n := 12 + int(int32(uint32(b[8])<<24|uint32(b[9])<<16|uint32(b[10])<<8|uint32(b[11])))
			if n > len(b) {
				break // a partial batch at the end of the response
			}
			if err := batch.ReadFrom(b[:n]); err != nil {
				t.Fatalf("%s/%d: batch at %d: %v", topic, partition, offset, err)
			}
			if batch.Attributes&0x20 == 0 { // not a control batch
				codecs = append(codecs, int8(batch.Attributes&0x07))
				counts = append(counts, batch.NumRecords)
			}
			offset = batch.FirstOffset + int64(batch.LastOffsetDelta) + 1
			b = b[n:]
		}
	}
}

// TestMirrorKeepsCompression: records of gzip, snappy, lz4, zstd and
// uncompressed batches on the source are written to the target in
// batches of the same codec, topic by topic, and a partition whose
// producer switched codecs keeps both, in order. Read from the target's
// raw batches (a Fetch, each batch's attributes).
func TestMirrorKeepsCompression(t *testing.T) {
	t.Parallel()
	a, b := startBroker(t), startBroker(t)
	adm := kadm.NewClient(client(t, a))
	ctx := context.Background()
	const n = 200
	value := func(i int) []byte { return bytes.Repeat(fmt.Appendf(nil, "record %d ", i), 20) } // compressible
	write := func(topic string, codec int8, from, to int) {
		cl := client(t, a, kgo.ProducerBatchCompression(codecOpt(codec)), kgo.ProducerLinger(5*time.Millisecond))
		for i := from; i < to; i++ {
			cl.Produce(ctx, &kgo.Record{Topic: topic, Value: value(i)}, nil)
		}
		if err := cl.Flush(ctx); err != nil {
			t.Fatal(err)
		}
	}
	for c, name := range codecNames {
		createTopic(t, adm, "z-"+name, 1, nil)
		write("z-"+name, int8(c), 0, n)
	}
	// One partition written gzip, then zstd.
	createTopic(t, adm, "z-mixed", 1, nil)
	write("z-mixed", 1, 0, n)
	write("z-mixed", 4, n, 2*n)
	runMirror(t, map[string]string{
		"clusters": "A, B", "A.bootstrap.servers": a, "B.bootstrap.servers": b,
		"A->B.enabled": "true", "A->B.topics": "z-.*", "emit.checkpoints.enabled": "false",
	})
	for c, name := range codecNames {
		remote := "A.z-" + name
		got := readAll(t, b, remote, n, 15*time.Second)
		for i, r := range got[0] {
			if !bytes.Equal(r.Value, value(i)) {
				t.Fatalf("%s at %d: %q, want %q", remote, i, r.Value, value(i))
			}
		}
		codecs, _ := rawBatchCodecs(t, b, remote, 0)
		for _, have := range codecs {
			if have != int8(c) {
				t.Errorf("%s: a batch compressed %s, the source's were %s (batches: %v)", remote, codecNames[have], name, codecs)
				break
			}
		}
	}
	got := readAll(t, b, "A.z-mixed", 2*n, 15*time.Second)
	for i, r := range got[0] {
		if !bytes.Equal(r.Value, value(i)) {
			t.Fatalf("A.z-mixed at %d: %q, want %q (order across the codec change)", i, r.Value, value(i))
		}
	}
	codecs, counts := rawBatchCodecs(t, b, "A.z-mixed", 0)
	seen := 0
	for i, c := range codecs {
		want := int8(1)
		if seen >= n {
			want = 4
		}
		if c != want {
			t.Fatalf("A.z-mixed: batch %d (records %d..) compressed %s, want %s (batches %v, records %v)", i, seen, codecNames[c], codecNames[want], codecs, counts)
		}
		seen += int(counts[i])
	}
}
