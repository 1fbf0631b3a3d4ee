package kafkaref

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

// TestSingleNode: a one-node Kafka starts, takes records and hands them
// back, and a tool of Kafka's lists the topic.
func TestSingleNode(t *testing.T) {
	c := StartT(t, Options{Heap: "512m"})
	cl, err := kgo.NewClient(kgo.SeedBrokers(c.Bootstrap()), kgo.AllowAutoTopicCreation(), kgo.ConsumeTopics("ref"),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	if err := cl.ProduceSync(ctx, &kgo.Record{Topic: "ref", Value: []byte("hello")}).FirstErr(); err != nil {
		t.Fatal(err)
	}
	fs := cl.PollFetches(ctx)
	if err := fs.Err0(); err != nil {
		t.Fatal(err)
	}
	if recs := fs.Records(); len(recs) != 1 || string(recs[0].Value) != "hello" {
		t.Fatalf("consumed %v", recs)
	}
	out, err := Tool(ctx, "org.apache.kafka.tools.TopicCommand", "--bootstrap-server", c.Bootstrap(), "--list")
	if err != nil || !strings.Contains(out, "ref") {
		t.Fatalf("kafka-topics --list: %v\n%s", err, out)
	}
	if s := c.Settings(); !strings.Contains(s, "Apache Kafka "+Version) || !strings.Contains(s, "num.io.threads=8") {
		t.Fatalf("settings: %s", s)
	}
}

// Three nodes: internal/admincli's TestAgainstKafka starts the harness's
// three-node cluster (Options{Nodes: 3}) and moves partitions between its
// nodes, so no test here starts another one (it cost the suite about
// 40 s of CPU).

// TestBadSetting: nodes that cannot start end Start at once with the log
// that says why, instead of a wait for the deadline.
func TestBadSetting(t *testing.T) {
	start := time.Now()
	_, err := Start(Options{Dir: t.TempDir(), Nodes: 2, Heap: "256m", Props: map[string]string{"authorizer.class.name": "no.such.Authorizer"}})
	if err == nil || !strings.Contains(err.Error(), "exited while starting") || !strings.Contains(err.Error(), "no.such.Authorizer") {
		t.Fatalf("Start with a bad setting: %v", err)
	}
	if d := time.Since(start); d > 90*time.Second {
		t.Fatalf("Start took %v to see the nodes exit", d)
	}
}

// TestJars: the jars are in the cache folder, Kafka's broker and client
// among them, and a second call answers from the cache. scripts/test.sh
// runs this first, so that the test packages that start Kafka at once
// find the jars fetched.
func TestJars(t *testing.T) {
	dir, err := Jars()
	if err != nil {
		t.Fatal(err)
	}
	for _, jar := range []string{"kafka_2.13-" + Version + ".jar", "kafka-clients-" + Version + ".jar", "kafka-tools-" + Version + ".jar"} {
		if _, err := os.Stat(filepath.Join(dir, jar)); err != nil {
			t.Fatal(err)
		}
	}
	if again, err := Jars(); again != dir || err != nil {
		t.Fatalf("second call: %s %v", again, err)
	}
}
