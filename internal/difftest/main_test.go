package difftest

import (
	"context"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"ringlog/broker"
	"ringlog/internal/kafkaref"
	"ringlog/internal/testkit/testbroker"
)

// full runs the slow scenarios too (scripts/difftest.sh sets it).
var full = flag.Bool("full", os.Getenv("RINGLOG_DIFFTEST_FULL") != "", "run the slow scenarios too (also RINGLOG_DIFFTEST_FULL=1)")

// dump logs both answers to every step.
var dump = flag.Bool("dump", false, "log both brokers' answers to every step")

// nodeID is both brokers' node.id, so that node ids in answers compare.
const nodeID = 1

// offsetsPartitions is offsets.topic.num.partitions on both brokers: the
// test brokers' 4 rather than Kafka's 50, which would make the first
// FindCoordinator slow on both.
const offsetsPartitions = 4

// kafkaProps configure Kafka as ringlog's test broker is configured. All of
// them are also among what kafkaref writes into server.properties; they are
// repeated because the comparison depends on them. A setting in that file
// reads as STATIC_BROKER_CONFIG in DescribeConfigs even when it repeats
// Kafka's default (ringlog's test broker has no file), so TestDescribeConfigs
// leaves these names out.
var kafkaProps = map[string]string{
	"node.id":                          fmt.Sprint(nodeID),
	"auto.create.topics.enable":        "true",
	"num.partitions":                   "1",
	"offsets.topic.replication.factor": "1",
	"offsets.topic.num.partitions":     fmt.Sprint(offsetsPartitions),
	"group.initial.rebalance.delay.ms": "0",
	// The slow scenarios find a transaction coordinator: 4 partitions of
	// __transaction_state rather than 50 (ringlog has none).
	"transaction.state.log.num.partitions": "4",
}

// ringlogConfig is testbroker's configuration with the few settings the
// comparison depends on written out.
func ringlogConfig(dir string) broker.Config {
	cfg := testbroker.Config(dir)
	cfg.NodeID = nodeID
	cfg.AutoCreateTopics = true
	cfg.NumPartitions = 1
	cfg.Cluster.ReplicationFactor = 1
	cfg.Groups.OffsetsTopicPartitions = offsetsPartitions
	cfg.Groups.OffsetsTopicReplicationFactor = 1
	cfg.Groups.InitialRebalanceDelay = 0
	return cfg
}

// brokers are the two brokers every test of the binary shares: Kafka takes
// seconds to start, so it starts once, on the first test that needs it.
var brokers struct {
	once    sync.Once
	err     error
	dir     string
	kafka   *kafkaref.Cluster
	ringlog *broker.Broker
}

// pair returns the two brokers' addresses, starting them the first time.
// Missing Java or Maven fails the test: the differential tests never skip.
func pair(t *testing.T) (kafkaAddr, ringlogAddr string) {
	t.Helper()
	brokers.once.Do(func() {
		start := time.Now()
		startBrokers()
		t.Logf("Apache Kafka %s and ringlog started in %v", kafkaref.Version, time.Since(start).Round(time.Millisecond))
	})
	if brokers.err != nil {
		t.Fatal(brokers.err)
	}
	return brokers.kafka.Bootstrap(), brokers.ringlog.Addr()
}

// afterFirstRetentionPass waits, once Kafka answers, until its first
// retention pass is over: Kafka's LogManager runs it 30 s after it
// starts (InitialTaskDelayMs; then every log.retention.check.interval.ms,
// 5 minutes), ringlog's first one comes after the whole interval. The
// scripts' records carry baseTimestamp, from 2023, far past the default
// retention.ms of 7 days, so a script whose topic existed at that moment
// found its records deleted on Kafka's side only (a fetch from offset 0:
// OFFSET_OUT_OF_RANGE from Kafka, the records from ringlog; seen once in
// TestProduce). The next pass comes after the package has finished.
func afterFirstRetentionPass() {
	time.Sleep(31 * time.Second)
}

// startBrokers starts Kafka and ringlog side by side (Kafka's JVM takes
// seconds, ringlog's one-voter quorum waits for its election).
func startBrokers() {
	dir, err := os.MkdirTemp("", "difftest-")
	if err != nil {
		brokers.err = err
		return
	}
	brokers.dir = dir
	var wg sync.WaitGroup
	var kafkaErr, ringlogErr error
	wg.Go(func() {
		brokers.kafka, kafkaErr = kafkaref.Start(kafkaref.Options{Dir: filepath.Join(dir, "kafka"), Heap: "512m", Props: kafkaProps})
	})
	wg.Go(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		brokers.ringlog, ringlogErr = broker.Start(ctx, ringlogConfig(filepath.Join(dir, "ringlog")))
	})
	wg.Wait()
	if kafkaErr == nil {
		afterFirstRetentionPass()
	}
	switch {
	case kafkaErr != nil:
		brokers.err = fmt.Errorf("difftest: Apache Kafka: %w", kafkaErr)
	case ringlogErr != nil:
		brokers.err = fmt.Errorf("difftest: ringlog: %w", ringlogErr)
	}
}

func TestMain(m *testing.M) {
	flag.Parse()
	code := m.Run()
	if brokers.ringlog != nil {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		if err := brokers.ringlog.Close(ctx); err != nil {
			fmt.Fprintln(os.Stderr, "difftest: closing ringlog:", err)
			code = max(code, 1)
		}
		cancel()
	}
	if brokers.kafka != nil {
		brokers.kafka.Stop()
	}
	if brokers.dir != "" {
		os.RemoveAll(brokers.dir)
	}
	os.Exit(code)
}
