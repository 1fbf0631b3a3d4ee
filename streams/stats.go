package streams

import (
	"sort"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// TaskStats is one task's counters: records processed (in all, and per
// second since the previous Stats call), the lag behind its input
// partitions' high watermarks (as of its last fetch), and its stores'
// restore. Kafka Streams' task metrics process-total, process-rate,
// records-lag and restore-total.
type TaskStats struct {
	Task      string
	Processed int64
	// RecordsPerSec is the task's records processed per second since the
	// previous Stats call (0 at the first call, and for a task the
	// instance did not have then).
	RecordsPerSec float64
	Lag           int64
	Restored      int64
	Restoring     bool
	Dropped       int64 // records of windows already closed (late), and foreign-key join answers for a left value since changed (stale)
	// Punctuations fired (stream time and wall clock) and the time spent
	// in them: Kafka Streams' punctuate-total and punctuate-latency.
	Punctuations    int64
	PunctuationTime time.Duration
}

// Stats is a snapshot of the instance's tasks, sorted by task id, with
// the records per second processed since the previous call.
type Stats struct {
	Tasks          []TaskStats
	Standbys       []StandbyStats // standby tasks (Config.NumStandbyReplicas), sorted by task id
	GlobalRestored int64
	RecordsPerSec  float64
}

func (t *task) setLag(topic string, lag int64) {
	if lag < 0 {
		lag = 0
	}
	t.lagByTP[topic] = lag
	var sum int64
	for _, l := range t.lagByTP {
		sum += l
	}
	t.lag.Store(sum)
}

// Stats returns the instance's task statistics; safe from any goroutine.
func (a *App) Stats() Stats {
	a.tasksMu.RLock()
	var s Stats
	var total int64
	for id, t := range a.tasks {
		ts := TaskStats{Task: id.String(), Processed: t.processed.Load(), Lag: t.lag.Load(),
			Restored: t.restored.Load(), Restoring: t.restoring.Load(), Dropped: t.dropped.Load(),
			Punctuations: t.punctuations.Load(), PunctuationTime: time.Duration(t.punctuationNanos.Load())}
		total += ts.Processed
		s.Tasks = append(s.Tasks, ts)
	}
	a.tasksMu.RUnlock()
	s.Standbys = a.standby.stats()
	if a.global != nil {
		s.GlobalRestored = a.global.restored.Load()
	}
	sort.Slice(s.Tasks, func(i, j int) bool { return s.Tasks[i].Task < s.Tasks[j].Task })
	a.rateMu.Lock()
	now := time.Now()
	byTask := make(map[string]int64, len(s.Tasks))
	for i := range s.Tasks {
		ts := &s.Tasks[i]
		byTask[ts.Task] = ts.Processed
		if prev, ok := a.rateByTask[ts.Task]; ok && now.After(a.rateAt) && ts.Processed >= prev {
			ts.RecordsPerSec = float64(ts.Processed-prev) / now.Sub(a.rateAt).Seconds()
		}
	}
	if !a.rateAt.IsZero() && now.After(a.rateAt) {
		s.RecordsPerSec = float64(total-a.rateTotal) / now.Sub(a.rateAt).Seconds()
	}
	a.rateAt, a.rateTotal, a.rateByTask = now, total, byTask
	a.rateMu.Unlock()
	return s
}

// Collector returns a Prometheus collector of the per-task counters,
// read at scrape time: ringlog_streams_task_processed_total,
// ringlog_streams_task_lag_records and
// ringlog_streams_task_restored_records_total,
// ringlog_streams_task_punctuations_total and
// ringlog_streams_task_punctuation_seconds_total, and for standby tasks
// ringlog_streams_standby_applied_records_total and
// ringlog_streams_standby_lag_records, labelled by application and task. Register it with the program's registry.
func (a *App) Collector() prometheus.Collector { return &collector{a: a} }

var (
	descProcessed = prometheus.NewDesc("ringlog_streams_task_processed_total", "Records processed by the task.", []string{"application", "task"}, nil)
	descLag       = prometheus.NewDesc("ringlog_streams_task_lag_records", "Records between the task's last fetched offset and its partitions' high watermark.", []string{"application", "task"}, nil)
	descRestored  = prometheus.NewDesc("ringlog_streams_task_restored_records_total", "Changelog records restored into the task's stores.", []string{"application", "task"}, nil)
	descPuncts    = prometheus.NewDesc("ringlog_streams_task_punctuations_total", "Punctuations fired in the task (stream time and wall clock).", []string{"application", "task"}, nil)
	descPunctSecs = prometheus.NewDesc("ringlog_streams_task_punctuation_seconds_total", "Time spent in the task's punctuators.", []string{"application", "task"}, nil)
	descSBApplied = prometheus.NewDesc("ringlog_streams_standby_applied_records_total", "Changelog records applied to the stores of a standby task.", []string{"application", "task"}, nil)
	descSBLag     = prometheus.NewDesc("ringlog_streams_standby_lag_records", "Records between a standby task's stores and its changelogs' high watermarks.", []string{"application", "task"}, nil)
)

type collector struct{ a *App }

func (c *collector) Describe(ch chan<- *prometheus.Desc) {
	ch <- descProcessed
	ch <- descLag
	ch <- descRestored
	ch <- descPuncts
	ch <- descPunctSecs
	ch <- descSBApplied
	ch <- descSBLag
}

func (c *collector) Collect(ch chan<- prometheus.Metric) {
	app := c.a.cfg.ApplicationID
	for _, s := range c.a.standby.stats() {
		ch <- prometheus.MustNewConstMetric(descSBApplied, prometheus.CounterValue, float64(s.Applied), app, s.Task)
		ch <- prometheus.MustNewConstMetric(descSBLag, prometheus.GaugeValue, float64(s.Lag), app, s.Task)
	}
	c.a.tasksMu.RLock()
	defer c.a.tasksMu.RUnlock()
	for id, t := range c.a.tasks {
		ch <- prometheus.MustNewConstMetric(descProcessed, prometheus.CounterValue, float64(t.processed.Load()), app, id.String())
		ch <- prometheus.MustNewConstMetric(descLag, prometheus.GaugeValue, float64(t.lag.Load()), app, id.String())
		ch <- prometheus.MustNewConstMetric(descRestored, prometheus.CounterValue, float64(t.restored.Load()), app, id.String())
		ch <- prometheus.MustNewConstMetric(descPuncts, prometheus.CounterValue, float64(t.punctuations.Load()), app, id.String())
		ch <- prometheus.MustNewConstMetric(descPunctSecs, prometheus.CounterValue, time.Duration(t.punctuationNanos.Load()).Seconds(), app, id.String())
	}
}
