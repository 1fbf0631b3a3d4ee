package javaclient

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

// TestToolOffsets: kafka-get-offsets (latest, earliest, max timestamp, by
// timestamp) and kafka-delete-records on records franz-go wrote with known
// timestamps: partition 0 holds ten records at base+0 s .. base+9 s,
// partition 1 five at base+0, 1, 20, 3 and 4 s (the largest not last),
// partition 2 none.
func TestToolOffsets(t *testing.T) {
	t.Parallel()
	b := startBroker(t)
	const topic = "ops-offsets"
	b.createTopic(t, topic, 3)
	base := time.Now().Add(-time.Hour).Truncate(time.Second)
	var recs []*kgo.Record
	for i := range 10 {
		recs = append(recs, &kgo.Record{Topic: topic, Partition: 0, Value: fmt.Appendf(nil, "a%d", i), Timestamp: base.Add(time.Duration(i) * time.Second)})
	}
	for _, s := range []int{0, 1, 20, 3, 4} {
		recs = append(recs, &kgo.Record{Topic: topic, Partition: 1, Value: fmt.Appendf(nil, "b%d", s), Timestamp: base.Add(time.Duration(s) * time.Second)})
	}
	cl := b.client(t, kgo.RecordPartitioner(kgo.ManualPartitioner()))
	ctx, cancel := context.WithTimeout(context.Background(), 120*time.Second)
	defer cancel()
	if err := cl.ProduceSync(ctx, recs...).FirstErr(); err != nil {
		t.Fatal(err)
	}

	out := b.toolOK(t, kafkaGetOffsets, "--topic", topic)
	wantLines(t, "kafka-get-offsets", out, topic+":0:10", topic+":1:5", topic+":2:0")
	out = b.toolOK(t, kafkaGetOffsets, "--topic", topic, "--time", "-2")
	wantLines(t, "kafka-get-offsets --time -2", out, topic+":0:0", topic+":1:0", topic+":2:0")
	// The largest timestamp's first record; an empty partition has none
	// and the tool leaves it out.
	out = b.toolOK(t, kafkaGetOffsets, "--topic", topic, "--time", "-3")
	wantLines(t, "kafka-get-offsets --time -3", out, topic+":0:9", topic+":1:2")
	// The first record at or after base+3.5 s.
	at := strconv.FormatInt(base.Add(3500*time.Millisecond).UnixMilli(), 10)
	out = b.toolOK(t, kafkaGetOffsets, "--topic-partitions", topic+":0,"+topic+":1", "--time", at)
	wantLines(t, "kafka-get-offsets --time base+3.5s", out, topic+":0:4", topic+":1:2")

	// kafka-delete-records: partition 0 up to offset 4, partition 1 all.
	plan := filepath.Join(t.TempDir(), "delete.json")
	if err := os.WriteFile(plan, []byte(`{"version":1,"partitions":[{"topic":"`+topic+`","partition":0,"offset":4},`+
		`{"topic":"`+topic+`","partition":1,"offset":5}]}`), 0o644); err != nil {
		t.Fatal(err)
	}
	out = b.toolOK(t, kafkaDeleteRecords, "--offset-json-file", plan)
	wantContains(t, "kafka-delete-records", out, "partition: "+topic+"-0\tlow_watermark: 4\n")
	wantContains(t, "kafka-delete-records", out, "partition: "+topic+"-1\tlow_watermark: 5\n")
	out = b.toolOK(t, kafkaGetOffsets, "--topic", topic, "--time", "-2")
	wantLines(t, "kafka-get-offsets --time -2 after kafka-delete-records", out, topic+":0:4", topic+":1:5", topic+":2:0")

	// A consumer from the start now begins at offset 4.
	cons := b.client(t, kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{topic: {0: kgo.NewOffset().AtStart()}}))
	fs := cons.PollFetches(ctx)
	if err := fs.Err0(); err != nil {
		t.Fatal(err)
	}
	if r := fs.Records(); len(r) == 0 || r[0].Offset != 4 || string(r[0].Value) != "a4" {
		t.Errorf("after kafka-delete-records, partition 0 starts with %v; want a4 at offset 4", r)
	}
}
