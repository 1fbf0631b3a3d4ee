package broker

import (
	"context"
	"strconv"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"ringlog/engine"
	"ringlog/engine/group"
)

// Consumer group lag, computed by the broker. Kafka has no broker-side
// metric for it (operators run kafka-consumer-groups --describe or an
// exporter that asks for offsets over the protocol); ringlog's coordinator
// holds the committed offsets and its engine the high watermarks, so each
// scrape computes it where the data is.

// groupLagSeriesMax bounds the series of ringlog_group_lag in one scrape:
// a broker coordinating many groups over many partitions must not make a
// scrape as large as its offsets.
const groupLagSeriesMax = 10_000

// groupLagWait bounds a scrape's wait for the shards that hold the groups.
const groupLagWait = 2 * time.Second

// groupLagCollector reports each committed offset's lag: the partition's
// high watermark minus the offset, as kafka-consumer-groups computes LAG
// (the high watermark, not the last stable offset, whatever the
// consumer's isolation level).
type groupLagCollector struct {
	groups *group.Coordinator
	eng    *engine.Core
	max    int // series at most (groupLagSeriesMax)

	lag, skipped *prometheus.Desc
}

func newGroupLagCollector(groups *group.Coordinator, eng *engine.Core, max int) *groupLagCollector {
	return &groupLagCollector{groups: groups, eng: eng, max: max,
		lag: prometheus.NewDesc("ringlog_group_lag",
			"Consumer group lag (no Kafka broker metric has it): the partition's high watermark minus the group's committed offset, "+
				"as kafka-consumer-groups' LAG, for the groups this broker coordinates and the partitions it holds a replica of "+
				"(on a follower its high watermark, which trails the leader's by at most a fetch). Computed at scrape time.",
			[]string{"group", "topic", "partition"}, nil),
		skipped: prometheus.NewDesc("ringlog_group_lag_skipped",
			"What this scrape left out of ringlog_group_lag, by reason: limit, committed offsets above the cap of "+strconv.Itoa(max)+
				" series (which ones are kept may change between scrapes); no_log, offsets of partitions whose log this broker does not have "+
				"(no replica here, or its replica offline; no other broker reports them: the group's coordinator is this one); late, partitions of __consumer_offsets "+
				"whose shard did not answer in time (their groups' offsets are all left out).",
			[]string{"reason"}, nil),
	}
}

func (c *groupLagCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- c.lag
	ch <- c.skipped
}

func (c *groupLagCollector) Collect(ch chan<- prometheus.Metric) {
	ctx, cancel := context.WithTimeout(context.Background(), groupLagWait)
	defer cancel()
	offsets, over, late := c.groups.CommittedOffsets(ctx, c.max)
	noLog := 0
	// One engine lookup per partition, however many groups committed to it.
	hws := map[engine.TP]int64{}
	for _, o := range offsets {
		hw, ok := hws[o.TP]
		if !ok {
			st, err := c.eng.State(o.TP)
			if err != nil {
				hw = -1
			} else {
				hw = st.HW
			}
			hws[o.TP] = hw
		}
		if hw < 0 {
			noLog++
			continue
		}
		if o.Offset < 0 {
			continue // no position (kafka-consumer-groups shows "-")
		}
		// An offset committed beyond the high watermark (a follower's,
		// behind the leader's) is no lag.
		lag := max(hw-o.Offset, 0)
		ch <- prometheus.MustNewConstMetric(c.lag, prometheus.GaugeValue, float64(lag), o.Group, o.TP.Topic, strconv.Itoa(int(o.TP.Partition)))
	}
	ch <- prometheus.MustNewConstMetric(c.skipped, prometheus.GaugeValue, float64(over), "limit")
	ch <- prometheus.MustNewConstMetric(c.skipped, prometheus.GaugeValue, float64(noLog), "no_log")
	ch <- prometheus.MustNewConstMetric(c.skipped, prometheus.GaugeValue, float64(late), "late")
}

// registerGroupLagMetrics registers ringlog_group_lag and what it skipped.
func registerGroupLagMetrics(reg prometheus.Registerer, groups *group.Coordinator, eng *engine.Core) {
	reg.MustRegister(newGroupLagCollector(groups, eng, groupLagSeriesMax))
}
