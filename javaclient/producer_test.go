package javaclient

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

// TestIdempotentProducer: Kafka's Java producer with enable.idempotence and
// acks=all, once per codec (none, gzip, snappy, lz4, zstd), sends records
// across four partitions with five requests in flight. Every record is
// acknowledged without error or retry, each partition's offsets run from 0
// with no gap or duplicate, and franz-go reads every record back at its
// acknowledged offset with its key and value, stamped with the producer id
// its producer was given (one per producer, all different). Then record
// sizes: 900 kB taken and read back by a consumer that asks for 1000 bytes
// (KIP-74), 2 MB refused (RecordTooLargeException); and a transactional
// producer that commits three records and aborts two, of which a
// read_committed consumer reads the three.
func TestIdempotentProducer(t *testing.T) {
	t.Parallel()
	b := startBroker(t)
	const topic, parts, n = "idempotent", 4, 2000
	b.createTopic(t, topic, parts)
	b.createTopic(t, "large", 1)
	b.createTopic(t, "txn", 1)
	r := runJava(t, 90*time.Second, "Producer", b.addr, topic, strconv.Itoa(parts), strconv.Itoa(n), "large")
	r.noErrors(t, "limits.tooLarge")
	r.want(t, "limits.large", "0")
	r.wantPrefix(t, "limits.tooLarge.error", "RecordTooLargeException")
	r.want(t, "limits.after", "1")
	r.want(t, "limits.read", "0:900000,1:10")
	r.want(t, "transactional.read", "c0,c1,c2")
	codecs := []string{"none", "gzip", "snappy", "lz4", "zstd"}
	for _, c := range codecs {
		r.want(t, c+".errors", "0")
		r.want(t, c+".retries", "0")
	}

	// acked[p][offset] is the value acknowledged there.
	acked := make([]map[int64]string, parts)
	for p := range acked {
		acked[p] = map[int64]string{}
	}
	for _, e := range r.events {
		if e[0] != "ack" || len(e) != 5 {
			continue
		}
		p, _ := strconv.Atoi(e[3])
		o, _ := strconv.ParseInt(e[4], 10, 64)
		value := e[1] + "-" + e[2]
		if p < 0 || p >= parts {
			t.Fatalf("ack of %s in partition %d", value, p)
		}
		if prev, dup := acked[p][o]; dup {
			t.Errorf("partition %d offset %d acknowledged twice: %s and %s", p, o, prev, value)
		}
		acked[p][o] = value
	}
	total := 0
	for p := range parts {
		if len(acked[p]) != len(codecs)*n/parts {
			t.Errorf("partition %d: %d records acknowledged, want %d", p, len(acked[p]), len(codecs)*n/parts)
		}
		for o := range int64(len(acked[p])) {
			if _, ok := acked[p][o]; !ok {
				t.Errorf("partition %d: no record acknowledged at offset %d, below %d", p, o, len(acked[p]))
				break
			}
		}
		total += len(acked[p])
	}
	if t.Failed() {
		t.FailNow()
	}

	// Read everything back with franz-go.
	cl := b.client(t, kgo.ConsumeTopics(topic), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	pids := map[string]map[int64]bool{} // codec -> producer ids seen
	for got := 0; got < total; {
		fs := cl.PollFetches(ctx)
		if ctx.Err() != nil {
			t.Fatalf("read back %d of %d records", got, total)
		}
		fs.EachError(func(topic string, p int32, err error) { t.Fatalf("fetching %s[%d]: %v", topic, p, err) })
		fs.EachRecord(func(rec *kgo.Record) {
			got++
			want, ok := acked[rec.Partition][rec.Offset]
			if !ok || string(rec.Value) != want {
				t.Errorf("partition %d offset %d holds %q, %q was acknowledged there", rec.Partition, rec.Offset, rec.Value, want)
				return
			}
			codec, i, _ := strings.Cut(want, "-")
			if string(rec.Key) != "key-"+i {
				t.Errorf("%s: key %q, want key-%s", want, rec.Key, i)
			}
			if rec.ProducerID < 0 || rec.ProducerEpoch < 0 {
				t.Errorf("%s: producer id %d epoch %d: not written by an idempotent producer", want, rec.ProducerID, rec.ProducerEpoch)
			}
			if pids[codec] == nil {
				pids[codec] = map[int64]bool{}
			}
			pids[codec][rec.ProducerID] = true
		})
	}
	seen := map[int64]string{}
	for _, c := range codecs {
		if len(pids[c]) != 1 {
			t.Errorf("producer %s: records carry producer ids %v, want one", c, pids[c])
		}
		for pid := range pids[c] {
			if other, ok := seen[pid]; ok {
				t.Errorf("producers %s and %s were both given producer id %d", other, c, pid)
			}
			seen[pid] = c
		}
	}
	t.Logf("%d records from %d idempotent producers (%s), producer ids %v", total, len(codecs), strings.Join(codecs, ", "), fmt.Sprint(seen))
}
