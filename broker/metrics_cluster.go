package broker

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"ringlog/engine"
	"ringlog/replication/controller"
	"ringlog/replication/node"
)

// Operators' metrics of replication and of the metadata quorum, under
// Kafka's names as the Prometheus JMX exporter renders its beans
// (lowercased, type and name joined by underscores):
// kafka.server:type=ReplicaManager,name=UnderReplicatedPartitions is
// kafka_server_replicamanager_underreplicatedpartitions, as the request
// metrics are kafka_network_requestmetrics_* (ARCHITECTURE.md, "Request
// metrics"). Gauges are counted at scrape time from the state the node
// and the controller keep anyway; nothing is added to a hot path but the
// counting of ISR changes and one clock read per controller command.
//
// Kafka's IsrShrinksPerSec, IsrExpandsPerSec and FailedIsrUpdatesPerSec
// are meters: a count and rates over 1, 5 and 15 minutes. Prometheus
// computes rates itself (rate(...[5m])), so they are exported as the
// counters behind the meters, named ..._total without "PerSec" (the form
// the JMX exporter's usual rules give a meter's Count): a rate computed
// here would only be a worse copy of what the query does.

// replicaCollector reports Kafka's kafka.server:type=ReplicaManager
// metrics from one read of the node's replica state per scrape.
type replicaCollector struct {
	node *node.Node
	eng  *engine.Core

	underReplicated, underMinISR, atMinISR, offline *prometheus.Desc
	partitions, leaders, reassigning                *prometheus.Desc
	shrinks, expands, failed                        *prometheus.Desc
	leaderReplication, followerReplication          *prometheus.Desc
}

func newReplicaCollector(n *node.Node, eng *engine.Core) *replicaCollector {
	d := func(name, help string) *prometheus.Desc {
		return prometheus.NewDesc("kafka_server_replicamanager_"+name, help, nil, nil)
	}
	return &replicaCollector{node: n, eng: eng,
		underReplicated: d("underreplicatedpartitions", "Kafka's UnderReplicatedPartitions: partitions this broker leads whose ISR is smaller than their replica set."),
		underMinISR:     d("underminisrpartitioncount", "Kafka's UnderMinIsrPartitionCount: partitions this broker leads whose ISR is below min.insync.replicas (capped at the replication factor); acks=all produce to them fails with NOT_ENOUGH_REPLICAS."),
		atMinISR:        d("atminisrpartitioncount", "Kafka's AtMinIsrPartitionCount: partitions this broker leads whose ISR is exactly min.insync.replicas (capped at the replication factor): one more replica lost and acks=all produce fails."),
		offline:         d("offlinereplicacount", "Kafka's OfflineReplicaCount: replicas on this broker whose log a disk failure or corruption took offline (the same count as ringlog_offline_partitions)."),
		partitions:      d("partitioncount", "Kafka's PartitionCount: partitions this broker holds a replica of."),
		leaders:         d("leadercount", "Kafka's LeaderCount: partitions this broker leads."),
		reassigning:     d("reassigningpartitions", "Kafka's ReassigningPartitions: partitions this broker leads that are being reassigned."),
		shrinks: d("isrshrinks_total", "Kafka's IsrShrinksPerSec meter as a counter (take rate() of it): changes of the ISR of a partition this broker leads that removed a replica, "+
			"whether the leader asked for them (AlterPartition) or the controller made them (a fenced broker leaves every ISR)."),
		expands: d("isrexpands_total", "Kafka's IsrExpandsPerSec meter as a counter (take rate() of it): changes of the ISR of a partition this broker leads that added a replica."),
		failed:  d("failedisrupdates_total", "Kafka's FailedIsrUpdatesPerSec meter as a counter (take rate() of it): ISR changes this broker asked the controller for (AlterPartition) that were refused or not answered."),
		// kafka.server:type=LeaderReplication and FollowerReplication,
		// attribute byte-rate (ReplicationQuotaManager's sensors).
		leaderReplication: prometheus.NewDesc("kafka_server_leaderreplication_byte_rate",
			"Kafka's LeaderReplication byte-rate: bytes/s of throttled partitions (leader.replication.throttled.replicas) this broker sent followers, over the replication quota's windows.", nil, nil),
		followerReplication: prometheus.NewDesc("kafka_server_followerreplication_byte_rate",
			"Kafka's FollowerReplication byte-rate: bytes/s of throttled partitions (follower.replication.throttled.replicas) this broker fetched as a follower, over the replication quota's windows.", nil, nil),
	}
}

func (c *replicaCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{c.underReplicated, c.underMinISR, c.atMinISR, c.offline, c.partitions, c.leaders, c.reassigning,
		c.shrinks, c.expands, c.failed, c.leaderReplication, c.followerReplication} {
		ch <- d
	}
}

func (c *replicaCollector) Collect(ch chan<- prometheus.Metric) {
	st := c.node.ReplicaStats()
	gauge := func(d *prometheus.Desc, v int) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.GaugeValue, float64(v))
	}
	counter := func(d *prometheus.Desc, v int64) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.CounterValue, float64(v))
	}
	gauge(c.underReplicated, st.UnderReplicated)
	gauge(c.underMinISR, st.UnderMinISR)
	gauge(c.atMinISR, st.AtMinISR)
	gauge(c.offline, len(c.eng.OfflinePartitions()))
	gauge(c.partitions, st.Partitions)
	gauge(c.leaders, st.Leaders)
	gauge(c.reassigning, st.Reassigning)
	counter(c.shrinks, st.ISRShrinks)
	counter(c.expands, st.ISRExpands)
	counter(c.failed, st.FailedISRUpdates)
	rr := c.node.ReplicationRates()
	ch <- prometheus.MustNewConstMetric(c.leaderReplication, prometheus.GaugeValue, rr.LeaderByteRate)
	ch <- prometheus.MustNewConstMetric(c.followerReplication, prometheus.GaugeValue, rr.FollowerByteRate)
}

// controllerCollector reports Kafka's kafka.controller:type=KafkaController
// metrics. As in Kafka, only the active controller (the raft leader)
// reports non-zero values, so that sums over the cluster count each
// partition and broker once; in a local quorum the broker is always it.
type controllerCollector struct {
	ctl *controller.Controller

	active, offline, partitions, topics, imbalance, fenced, live *prometheus.Desc
}

func newControllerCollector(ctl *controller.Controller) *controllerCollector {
	d := func(name, help string) *prometheus.Desc {
		return prometheus.NewDesc("kafka_controller_kafkacontroller_"+name, help, nil, nil)
	}
	return &controllerCollector{ctl: ctl,
		active:     d("activecontrollercount", "Kafka's ActiveControllerCount: 1 on the broker whose controller leads the metadata quorum (the raft leader), else 0; the cluster's sum should be 1."),
		offline:    d("offlinepartitionscount", "Kafka's OfflinePartitionsCount: partitions without a leader (no eligible replica is live). Reported by the active controller only."),
		partitions: d("globalpartitioncount", "Kafka's GlobalPartitionCount: partitions in the cluster. Reported by the active controller only."),
		topics:     d("globaltopiccount", "Kafka's GlobalTopicCount: topics in the cluster. Reported by the active controller only."),
		imbalance:  d("preferredreplicaimbalancecount", "Kafka's PreferredReplicaImbalanceCount: partitions not led by their preferred (first) replica, leaderless ones included. Reported by the active controller only."),
		fenced:     d("fencedbrokercount", "Kafka's FencedBrokerCount: registered brokers that are fenced (missed their session, or in controlled shutdown). Reported by the active controller only."),
		live:       d("activebrokercount", "Kafka's ActiveBrokerCount: registered brokers that are not fenced. Reported by the active controller only."),
	}
}

func (c *controllerCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{c.active, c.offline, c.partitions, c.topics, c.imbalance, c.fenced, c.live} {
		ch <- d
	}
}

func (c *controllerCollector) Collect(ch chan<- prometheus.Metric) {
	st := c.ctl.Stats()
	gauge := func(d *prometheus.Desc, v int) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.GaugeValue, float64(v))
	}
	active := 0
	if st.Active {
		active = 1
	}
	gauge(c.active, active)
	gauge(c.offline, st.Offline)
	gauge(c.partitions, st.Partitions)
	gauge(c.topics, st.Topics)
	gauge(c.imbalance, st.PreferredImbalance)
	gauge(c.fenced, st.FencedBrokers)
	gauge(c.live, st.ActiveBrokers)
}

// queueTimeBuckets are the request metrics' (kafka/metrics.go): 20 us to
// 10 s, doubling. A command's wait is a raft round and a commit (a bolt
// fsync): milliseconds, more under load.
var queueTimeBuckets = prometheus.ExponentialBuckets(0.02, 2, 20)

// registerClusterMetrics registers the replication and controller metrics
// of a broker's node and controller, and hooks the controller's command
// queue time (Kafka's ControllerEventManager EventQueueTimeMs: the time an
// event waits before the controller handles it; here a command from its
// submission to raft to its application on the leader, the raft round and
// commit included, since that is where a controller command waits in a
// quorum).
func registerClusterMetrics(reg prometheus.Registerer, n *node.Node, ctl *controller.Controller, eng *engine.Core) {
	reg.MustRegister(newReplicaCollector(n, eng))
	registerControllerMetrics(reg, ctl)
}

// registerControllerMetrics registers the controller's metrics: a
// controller-only node (process.roles=controller) has these and no other.
func registerControllerMetrics(reg prometheus.Registerer, ctl *controller.Controller) {
	reg.MustRegister(newControllerCollector(ctl))
	queue := prometheus.NewHistogram(prometheus.HistogramOpts{Name: "kafka_controller_controllereventmanager_eventqueuetimems",
		Help: "Kafka's ControllerEventManager EventQueueTimeMs: milliseconds from a metadata command's submission to raft to its application " +
			"to the state machine on the active controller (the raft round, the commit's fsync and the commands ahead of it). Observed on the active controller only.",
		Buckets: queueTimeBuckets})
	reg.MustRegister(queue)
	ctl.ObserveQueueTime(func(d time.Duration) { queue.Observe(float64(d) / float64(time.Millisecond)) })
}
