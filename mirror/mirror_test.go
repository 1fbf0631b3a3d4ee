package mirror

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"ringlog/internal/testkit"
	"ringlog/internal/testkit/testbroker"
)

func startBroker(t *testing.T) string {
	t.Helper()
	return testbroker.StartBroker(t, testbroker.Config(t.TempDir())).Addr
}

func client(t *testing.T, addr string, opts ...kgo.Opt) *kgo.Client {
	t.Helper()
	cl, err := kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(addr)}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl.Close)
	return cl
}

// runMirror runs the flows of p in the test's process until the test ends.
func runMirror(t *testing.T, p map[string]string) {
	t.Helper()
	runMirrorOpt(t, p, Options{})
}

func runMirrorOpt(t *testing.T, p map[string]string, opt Options) {
	t.Helper()
	opt.Logger = testbroker.Logger()
	flows, err := LoadProperties(p)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		Run(ctx, flows, opt)
	}()
	t.Cleanup(func() { cancel(); <-done })
}

// readAll reads topic's partitions read_committed until it holds n
// records (failing after d), in order per partition.
func readAll(t *testing.T, addr, topic string, n int, d time.Duration) map[int32][]*kgo.Record {
	t.Helper()
	cl := client(t, addr, kgo.ConsumeTopics(topic), kgo.FetchIsolationLevel(kgo.ReadCommitted()),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.MetadataMinAge(100*time.Millisecond), kgo.MetadataMaxAge(200*time.Millisecond), kgo.FetchMaxWait(200*time.Millisecond))
	ctx, cancel := context.WithTimeout(context.Background(), d)
	defer cancel()
	out := map[int32][]*kgo.Record{}
	got := 0
	for got < n {
		fs := cl.PollFetches(ctx)
		if ctx.Err() != nil {
			t.Fatalf("%s: %d records after %v, want %d", topic, got, d, n)
		}
		fs.EachRecord(func(r *kgo.Record) {
			out[r.Partition] = append(out[r.Partition], r)
			got++
		})
	}
	return out
}

func createTopic(t *testing.T, adm *kadm.Client, topic string, partitions int32, cfg map[string]*string) {
	t.Helper()
	if _, err := adm.CreateTopic(context.Background(), partitions, 1, cfg, topic); err != nil {
		t.Fatalf("create %s: %v", topic, err)
	}
}

// TestMirrorPreserves: A -> B mirrors a topic of several partitions into
// A.orders with each record's partition, key, value, headers and
// timestamp, in order; the topic's configs follow (but for MM2's deny
// list), new partitions are followed, and the offset syncs and heartbeats
// MM2's tooling reads are on B in MM2's formats.
func TestMirrorPreserves(t *testing.T) {
	a, b := startBroker(t), startBroker(t)
	admA, admB := kadm.NewClient(client(t, a)), kadm.NewClient(client(t, b))
	createTopic(t, admA, "orders", 3, map[string]*string{"retention.ms": kadm.StringPtr("987654321"), "min.insync.replicas": kadm.StringPtr("1")})
	prod := client(t, a, kgo.RecordPartitioner(kgo.ManualPartitioner()))
	ctx := context.Background()
	const n = 300
	base := time.UnixMilli(1_600_000_000_000)
	var sent []*kgo.Record
	for i := range n {
		r := &kgo.Record{Topic: "orders", Partition: int32(i % 3), Key: fmt.Appendf(nil, "k%d", i), Value: fmt.Appendf(nil, "v%d", i),
			Headers: []kgo.RecordHeader{{Key: "h", Value: fmt.Appendf(nil, "x%d", i)}, {Key: "empty"}}, Timestamp: base.Add(time.Duration(i) * time.Second)}
		sent = append(sent, r)
		prod.Produce(ctx, r, nil)
	}
	if err := prod.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	runMirror(t, map[string]string{
		"clusters": "A, B", "A.bootstrap.servers": a, "B.bootstrap.servers": b,
		"A->B.enabled": "true", "A->B.topics": "orders", "refresh.topics.interval.seconds": "0.3",
		"emit.heartbeats.interval.seconds": "0.2",
	})
	got := readAll(t, b, "A.orders", n, 15*time.Second)
	for p := range int32(3) {
		var want []*kgo.Record
		for _, r := range sent {
			if r.Partition == p {
				want = append(want, r)
			}
		}
		if len(got[p]) != len(want) {
			t.Fatalf("partition %d: %d records, want %d", p, len(got[p]), len(want))
		}
		for i, r := range got[p] {
			w := want[i]
			if string(r.Key) != string(w.Key) || string(r.Value) != string(w.Value) || !r.Timestamp.Equal(w.Timestamp) ||
				len(r.Headers) != 2 || r.Headers[0].Key != "h" || string(r.Headers[0].Value) != string(w.Headers[0].Value) || r.Headers[1].Key != "empty" {
				t.Fatalf("partition %d record %d: got key %q value %q ts %v headers %v; want %q %q %v %v",
					p, i, r.Key, r.Value, r.Timestamp, r.Headers, w.Key, w.Value, w.Timestamp, w.Headers)
			}
		}
	}
	rcs, err := admB.DescribeTopicConfigs(ctx, "A.orders")
	if err != nil {
		t.Fatal(err)
	}
	rc, _ := rcs.On("A.orders", nil)
	for _, c := range rc.Configs {
		switch {
		case c.Key == "retention.ms" && (c.Value == nil || *c.Value != "987654321"):
			t.Errorf("A.orders retention.ms = %v, want the source's 987654321", c.Value)
		case c.Key == "min.insync.replicas" && c.Value != nil && *c.Value == "1" && c.Source.String() == "DYNAMIC_TOPIC_CONFIG":
			t.Errorf("A.orders took min.insync.replicas, which MM2's deny list keeps back")
		}
	}

	// New partitions are followed.
	if _, err := admA.UpdatePartitions(ctx, 5, "orders"); err != nil {
		t.Fatal(err)
	}
	prod5 := client(t, a, kgo.RecordPartitioner(kgo.ManualPartitioner()))
	if err := prod5.ProduceSync(ctx, &kgo.Record{Topic: "orders", Partition: 4, Value: []byte("late")}).FirstErr(); err != nil {
		t.Fatal(err)
	}
	late := readAll(t, b, "A.orders", n+1, 15*time.Second)
	if len(late[4]) != 1 || string(late[4][0].Value) != "late" {
		t.Fatalf("A.orders partition 4: %v, want the record produced to orders/4 after the mirror started", late[4])
	}

	// Offset syncs: each maps a source offset to the offset of the same
	// record on B.
	syncs := readAll(t, b, "mm2-offset-syncs.A.internal", 1, 10*time.Second)
	for _, r := range syncs[0] {
		s, err := DecodeOffsetSync(r.Key, r.Value)
		if err != nil {
			t.Fatal(err)
		}
		up := fetchAt(t, a, s.Topic, s.Partition, s.Upstream)
		down := fetchAt(t, b, "A."+s.Topic, s.Partition, s.Downstream)
		if string(up.Value) != string(down.Value) {
			t.Fatalf("offset sync %+v: source record %q, target record %q", s, up.Value, down.Value)
		}
	}
	hbs := readAll(t, b, "heartbeats", 1, 10*time.Second)
	h, err := DecodeHeartbeat(hbs[0][0].Key, hbs[0][0].Value)
	if err != nil || h.SourceAlias != "A" || h.TargetAlias != "B" || time.Since(time.UnixMilli(h.TimestampMs)) > time.Minute {
		t.Fatalf("heartbeat %+v, %v: want A -> B, recent", h, err)
	}
}

// fetchAt reads the record at offset of topic/partition.
func fetchAt(t *testing.T, addr, topic string, p int32, offset int64) *kgo.Record {
	t.Helper()
	cl := client(t, addr, kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{topic: {p: kgo.NewOffset().At(offset)}}),
		kgo.FetchIsolationLevel(kgo.ReadCommitted()))
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	for {
		fs := cl.PollFetches(ctx)
		if ctx.Err() != nil {
			t.Fatalf("no record at %s/%d@%d", topic, p, offset)
		}
		for _, r := range fs.Records() {
			if r.Offset == offset {
				return r
			}
			t.Fatalf("%s/%d: asked for offset %d, got %d first", topic, p, offset, r.Offset)
		}
	}
}

// TestMirrorCycle: A -> B and B -> A both running mirror each cluster's
// own topic to the other, and never a remote topic back to the cluster it
// came from (no B.A.t on A, no A.B.u on B).
func TestMirrorCycle(t *testing.T) {
	a, b := startBroker(t), startBroker(t)
	admA, admB := kadm.NewClient(client(t, a)), kadm.NewClient(client(t, b))
	createTopic(t, admA, "t", 2, nil)
	createTopic(t, admB, "u", 2, nil)
	ctx := context.Background()
	for addr, topic := range map[string]string{a: "t", b: "u"} {
		cl := client(t, addr)
		for i := range 50 {
			cl.Produce(ctx, &kgo.Record{Topic: topic, Value: fmt.Appendf(nil, "%s%d", topic, i)}, nil)
		}
		if err := cl.Flush(ctx); err != nil {
			t.Fatal(err)
		}
	}
	runMirror(t, map[string]string{
		"clusters": "A, B", "A.bootstrap.servers": a, "B.bootstrap.servers": b,
		"A->B.enabled": "true", "B->A.enabled": "true", "refresh.topics.interval.seconds": "0.2",
		"emit.heartbeats.interval.seconds": "0.2",
	})
	readAll(t, b, "A.t", 50, 15*time.Second)
	readAll(t, a, "B.u", 50, 15*time.Second)
	// Several refreshes, in which a loop would have made its topics.
	time.Sleep(1500 * time.Millisecond)
	for _, c := range []struct {
		adm  *kadm.Client
		self string
	}{{admA, "A"}, {admB, "B"}} {
		ts, err := c.adm.ListTopics(ctx)
		if err != nil {
			t.Fatal(err)
		}
		for _, name := range ts.Names() {
			// A topic on cluster X whose path of aliases names X came back.
			if slices.Contains(strings.Split(name, ".")[:strings.Count(name, ".")], c.self) && !strings.HasSuffix(name, ".internal") {
				t.Errorf("cluster %s holds %s: a record came back to the cluster it came from (topics: %v)", c.self, name, ts.Names())
			}
		}
	}
	// And the mirrored topics hold each record once.
	if got := readAll(t, b, "A.t", 50, 5*time.Second); len(got[0])+len(got[1]) != 50 {
		t.Fatalf("A.t on B: %d records, want 50", len(got[0])+len(got[1]))
	}
	_ = testkit.WaitFor
}
