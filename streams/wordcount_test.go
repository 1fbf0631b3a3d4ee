package streams

import (
	"strings"

	"github.com/prometheus/client_golang/prometheus"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

// TestWordCount: the word count of lines spread over 4 partitions,
// repartitioned by word, equals the reference counted here from the same
// lines: in the output topic (last update per word) and in the store read
// by key.
func TestWordCount(t *testing.T) {
	onClusters(t, func(t *testing.T, addr string) {
		createTopic(t, addr, "lines", 4, nil)
		createTopic(t, addr, "counts-out", 4, nil)
		n := 2000
		if testing.Short() {
			n = 300
		}
		ls, ref := lines(1, n)
		produceLines(t, newClient(t, addr), "lines", ls)
		a := startApp(t, wordCount("lines", "counts-out"), Config{ApplicationID: "wc", Brokers: []string{addr}, StateDir: t.TempDir()})
		got := readCounts(t, addr, "counts-out", ref, kgo.ReadUncommitted(), 20*time.Second)
		checkFinal(t, got, ref)
		// Updates are emitted per record (the zero Config has no record
		// cache): 1, 2, ... per word.
		for w, u := range got {
			if int64(len(u)) < ref[w] {
				t.Errorf("%s: %d updates for %d occurrences", w, len(u), ref[w])
			}
		}
		checkStore(t, ref, a)
		st := a.Stats()
		if len(st.Tasks) != 8 { // 4 partitions of lines, 4 of the repartition topic
			t.Errorf("tasks: %+v, want 8", st.Tasks)
		}
		// The Prometheus collector reports the same counters: every line
		// processed once by the tasks of subtopology 0.
		reg := prometheus.NewRegistry()
		reg.MustRegister(a.Collector())
		mfs, err := reg.Gather()
		if err != nil {
			t.Fatal(err)
		}
		var lines0 float64
		for _, mf := range mfs {
			if mf.GetName() != "ringlog_streams_task_processed_total" {
				continue
			}
			for _, m := range mf.GetMetric() {
				for _, l := range m.GetLabel() {
					if l.GetName() == "task" && strings.HasPrefix(l.GetValue(), "0_") {
						lines0 += m.GetCounter().GetValue()
					}
				}
			}
		}
		if int(lines0) != n {
			t.Errorf("ringlog_streams_task_processed_total over tasks 0_*: %v, want %d", lines0, n)
		}
	})
}
