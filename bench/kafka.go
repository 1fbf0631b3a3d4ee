package bench

import (
	"fmt"
	"strings"
	"time"

	"ringlog/internal/kafkaref"
)

// The Apache Kafka peers: Kafka itself (internal/kafkaref, the release its
// pom names), one node in the matrix and three in the Replication section,
// each node a JVM of its own with combined broker and controller roles
// (KRaft), measured from /proc/<pid> like every other peer.
//
// Kafka runs with its defaults and the heap of its start script. Its flush
// policy is the page cache: log.flush.interval.messages and
// log.flush.interval.ms are unset, so Kafka never forces an fsync, as
// ringlog -flush never. The peer instances of the workloads with flush
// always set log.flush.interval.messages=1: the log is fsynced after every
// append, in the request's path, before the produce is acknowledged
// (UnifiedLog.append ends with "if unflushed messages >= flush interval,
// flush", as the 4.4.0 kafka-storage jar's bytecode shows), as ringlog
// -flush always fsyncs before it acknowledges.

// kafkaHeap is every node's -Xms and -Xmx: kafka-server-start.sh's.
const kafkaHeap = "1g"

// kafkaFlushAlways is the broker setting of the flush always instances.
const kafkaFlushAlways = "log.flush.interval.messages"

// kafkaWarmup is how long a Kafka peer is warmed up after it starts,
// longer than the others' second: the JVM interprets the produce path
// until its JIT compiler has compiled it, and a peer is to be measured as
// it runs, not as it starts. Three JVMs sharing two cores each get a third
// of the time to compile in: a 3-node cluster measured 10k-50k records/s
// in its first 5 s runs and 50k-80k after 30 s of load, on a loaded
// machine. -quick, which only checks that everything runs, warms up 2 s.
func (s *suite) kafkaWarmup(p *peer) time.Duration {
	if s.cfg.quick {
		return 2 * time.Second
	}
	return time.Duration(p.spec.kafkaNodes) * 5 * time.Second
}

// startKafka starts the peer's Kafka nodes and waits until each serves
// metadata naming all of them. The jars come from Maven the first time
// (internal/kafkaref caches them).
func (p *peer) startKafka() error {
	props := map[string]string{}
	if p.fsync {
		props[kafkaFlushAlways] = "1"
	}
	c, err := kafkaref.Start(kafkaref.Options{Dir: p.dataDir, Nodes: p.spec.kafkaNodes, Heap: kafkaHeap, Props: props})
	if err != nil {
		return err
	}
	p.kc, p.addr = c, c.Bootstrap()
	p.settings = kafkaSettings(c.Settings(), p.fsync)
	if p.spec.replicas() > 1 {
		p.settings += fmt.Sprintf("; every topic RF %d with min.insync.replicas=%d (a topic config, as on the ringlog "+
			"cluster); the %d nodes share this machine's cores with each other and the clients; broker CPU and RSS "+
			"are sums over the %d JVMs", clusterBrokers, clusterMinISR, len(c.Nodes), len(c.Nodes))
	}
	return nil
}

// kafkaFlushDefault is how kafkaref's Settings states the default flush
// policy, which the flush always instances replace.
const kafkaFlushDefault = "log.flush.interval.messages and log.flush.interval.ms at Kafka's defaults " +
	"(never forced: the page cache, as ringlog -flush never)"

// kafkaSettings is the peer's line in the Peers table: kafkaref's account
// of the cluster, with the flush policy as the instance runs it.
func kafkaSettings(settings string, fsync bool) string {
	if !fsync {
		return settings
	}
	always := kafkaFlushAlways + "=1 (the log fsynced after every append, before the produce is acknowledged, " +
		"as ringlog -flush always)"
	if strings.Contains(settings, kafkaFlushDefault) {
		return strings.Replace(settings, kafkaFlushDefault, always, 1)
	}
	return settings + "; " + always
}

// kafkaExited says which node of the peer's Kafka exited, or "".
func (p *peer) kafkaExited() string {
	for _, n := range p.kc.Nodes {
		if !procAlive(n.Pid()) {
			return fmt.Sprintf("%s/node-%d: %s", p.id(), n.ID, lastKafkaLine(n.Log(), func(string) bool { return true }))
		}
	}
	return ""
}

// kafkaProblem is the last error any node logged, or "". Warnings are
// left out: Kafka's followers warn of every deleted topic
// (UNKNOWN_TOPIC_ID), which the suite does after every run.
func (p *peer) kafkaProblem() string {
	var ls []string
	for _, n := range p.kc.Nodes {
		l := lastKafkaLine(n.Log(), func(l string) bool { return strings.Contains(l, "] ERROR ") })
		if l != "" {
			ls = append(ls, fmt.Sprintf("node-%d: %s", n.ID, l))
		}
	}
	return strings.Join(ls, "; ")
}

// lastKafkaLine is the last line of a node's log that match accepts, or "".
// Log lines are "[time] LEVEL message (logger)", as kafkaref's log4j
// configuration writes them.
func lastKafkaLine(log string, match func(string) bool) string {
	ls := strings.Split(strings.TrimRight(log, "\n"), "\n")
	for i := len(ls) - 1; i >= 0; i-- {
		if l := strings.TrimSpace(ls[i]); l != "" && match(l) {
			return l
		}
	}
	return ""
}
