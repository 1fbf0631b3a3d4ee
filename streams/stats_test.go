package streams

import (
	"strings"
	"testing"
	"time"
)

// TestTaskRecordsPerSec: each task's rate (Kafka Streams' process-rate)
// is the records it processed between two Stats calls over the time
// between them: bracketed here by the times read around the calls, and
// it sums to the instance's rate. The first call knows no rate.
func TestTaskRecordsPerSec(t *testing.T) {
	onClusters(t, func(t *testing.T, addr string) {
		createTopic(t, addr, "lines", 4, nil)
		createTopic(t, addr, "counts-out", 4, nil)
		cl := newClient(t, addr)
		a := startApp(t, wordCount("lines", "counts-out"), Config{ApplicationID: "rate", Brokers: []string{addr}, StateDir: t.TempDir()})

		// Stats is not called to wait: each call starts the next rate's
		// interval.
		waitCounted := func(words int64) {
			t.Helper()
			for deadline := time.Now().Add(20 * time.Second); ; time.Sleep(20 * time.Millisecond) {
				var n int64
				a.tasksMu.RLock()
				for id, tk := range a.tasks {
					if strings.HasPrefix(id.String(), "1_") {
						n += tk.processed.Load()
					}
				}
				a.tasksMu.RUnlock()
				if n >= words {
					return
				}
				if time.Now().After(deadline) {
					t.Fatalf("%d of %d words processed", n, words)
				}
			}
		}
		ls, ref := lines(3, 1000)
		produceLines(t, cl, "lines", ls)
		waitCounted(total(ref))

		before0 := time.Now()
		st1 := a.Stats()
		after0 := time.Now()
		for _, ts := range st1.Tasks {
			if ts.RecordsPerSec != 0 {
				t.Errorf("first call: task %s at %.1f records/s, want 0", ts.Task, ts.RecordsPerSec)
			}
		}
		ls2, ref2 := lines(4, 3000)
		produceLines(t, cl, "lines", ls2)
		waitCounted(total(ref) + total(ref2))
		before1 := time.Now()
		st2 := a.Stats()
		after1 := time.Now()

		prev := map[string]int64{}
		for _, ts := range st1.Tasks {
			prev[ts.Task] = ts.Processed
		}
		longest, shortest := after1.Sub(before0).Seconds(), before1.Sub(after0).Seconds()
		var sum float64
		var words int64
		for _, ts := range st2.Tasks {
			delta := ts.Processed - prev[ts.Task]
			if strings.HasPrefix(ts.Task, "1_") {
				words += delta
			}
			lo, hi := float64(delta)/longest, float64(delta)/shortest
			if ts.RecordsPerSec < lo*0.999 || ts.RecordsPerSec > hi*1.001 {
				t.Errorf("task %s: %.1f records/s, want between %.1f and %.1f (%d records in %.3f to %.3f s)", ts.Task, ts.RecordsPerSec, lo, hi, delta, shortest, longest)
			}
			sum += ts.RecordsPerSec
		}
		if words < total(ref2) {
			t.Errorf("the counting tasks processed %d words between the calls, want %d", words, total(ref2))
		}
		if sum <= 0 || sum < st2.RecordsPerSec*0.999 || sum > st2.RecordsPerSec*1.001 {
			t.Errorf("tasks' rates sum to %.1f records/s, the instance's is %.1f", sum, st2.RecordsPerSec)
		}
	})
}
