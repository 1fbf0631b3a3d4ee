package broker

import (
	"strconv"

	"github.com/prometheus/client_golang/prometheus"

	"ringlog/engine"
	"ringlog/netpoll"
)

// registerNetMetrics exposes the network layer's counters.
func registerNetMetrics(reg prometheus.Registerer, ns *netpoll.Server) {
	counter := func(name, help string, get func(netpoll.Stats) int64) {
		reg.MustRegister(prometheus.NewCounterFunc(prometheus.CounterOpts{Namespace: "ringlog", Name: name, Help: help},
			func() float64 { return float64(get(ns.Stats())) }))
	}
	counter("network_bytes_in_total", "Bytes received from clients.", func(s netpoll.Stats) int64 { return s.BytesIn })
	counter("network_bytes_out_total", "Bytes sent to clients.", func(s netpoll.Stats) int64 { return s.BytesOut })
	counter("fetch_sendfile_bytes_total", "Record bytes sent to clients with sendfile (zero-copy).", func(s netpoll.Stats) int64 { return s.SendfileBytes })
	counter("fetch_copied_bytes_total", "Record bytes that had to be copied instead of sent with sendfile.", func(s netpoll.Stats) int64 { return s.CopiedBytes })
	counter("connections_accepted_total", "Connections accepted.", func(s netpoll.Stats) int64 { return s.Accepted })
	counter("connections_moved_total", "Connections moved by the balancer from one shard's ring to another's (-net uring, the default on io_uring: a client whose load grew after it connected).",
		func(s netpoll.Stats) int64 { return s.UringMoves })
	reg.MustRegister(prometheus.NewGaugeFunc(prometheus.GaugeOpts{Namespace: "ringlog", Name: "connections", Help: "Open connections."},
		func() float64 { return float64(ns.Stats().Conns) }))
}

// engineCollector reports each partition's offsets.
type engineCollector struct {
	eng     *engine.Core
	leo, hw *prometheus.Desc
	start   *prometheus.Desc
}

func registerEngineMetrics(reg prometheus.Registerer, eng *engine.Core) {
	reg.MustRegister(prometheus.NewGaugeFunc(prometheus.GaugeOpts{Namespace: "ringlog", Name: "offline_partitions",
		Help: "Partitions this broker hosts that a disk failure or corruption took offline (Kafka's OfflineReplicaCount, also exported as kafka_server_replicamanager_offlinereplicacount); the broker's log names each."},
		func() float64 { return float64(len(eng.OfflinePartitions())) }))
	reg.MustRegister(prometheus.NewGaugeFunc(prometheus.GaugeOpts{Namespace: "ringlog", Name: "tail_cache_bytes",
		Help: "Memory the direct-written partitions' tail caches (their latest appends, served to readers from memory) hold together; ringlog.tail.cache.bytes bounds it."},
		func() float64 { return float64(eng.TailCacheHeld()) }))
	labels := []string{"topic", "partition"}
	reg.MustRegister(&engineCollector{eng: eng,
		leo:   prometheus.NewDesc("ringlog_log_end_offset", "Log end offset of each partition.", labels, nil),
		hw:    prometheus.NewDesc("ringlog_high_watermark", "High watermark of each partition.", labels, nil),
		start: prometheus.NewDesc("ringlog_log_start_offset", "Log start offset of each partition.", labels, nil),
	})
	reg.MustRegister(newStorageCollector(eng))
}

func (c *engineCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- c.leo
	ch <- c.hw
	ch <- c.start
}

func (c *engineCollector) Collect(ch chan<- prometheus.Metric) {
	for _, tp := range c.eng.Partitions() {
		st, err := c.eng.State(tp)
		if err != nil {
			continue
		}
		p := strconv.Itoa(int(tp.Partition))
		ch <- prometheus.MustNewConstMetric(c.leo, prometheus.GaugeValue, float64(st.LEO), tp.Topic, p)
		ch <- prometheus.MustNewConstMetric(c.hw, prometheus.GaugeValue, float64(st.HW), tp.Topic, p)
		ch <- prometheus.MustNewConstMetric(c.start, prometheus.GaugeValue, float64(st.LogStartOffset), tp.Topic, p)
	}
}
