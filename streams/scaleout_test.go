package streams

import (
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

// TestScaleOut: an exactly-once word count runs on one instance, which
// owns all 8 tasks and fills their stores and changelogs; a second
// instance joins while lines are still being written and takes half of
// the tasks (4, two of them with a store), restoring those stores from
// their changelogs (TaskStats.Restored, the OnRestore callback) before it
// processes their records. The results are those of one instance: final
// counts equal to the reference, every update of a word one more than the
// one before it, each word in exactly one instance's store with its count.
func TestScaleOut(t *testing.T) {
	onClusters(t, func(t *testing.T, addr string) {
		createTopic(t, addr, "lines", 4, nil)
		createTopic(t, addr, "counts-out", 4, nil)
		batches, per := 20, 30
		if testing.Short() {
			batches, per = 10, 20
		}
		cfg := Config{ApplicationID: "scale", Brokers: []string{addr}, Guarantee: ExactlyOnce}
		cfg.StateDir, cfg.InstanceID = t.TempDir(), "a"
		a := startApp(t, wordCount("lines", "counts-out"), cfg)
		prod := newClient(t, addr)
		ref := map[string]int64{}
		ls, rr := lines(300, 10*per)
		produceLines(t, prod, "lines", ls)
		addRef(ref, rr)
		// a holds every task and its stores hold counts, in the changelogs too.
		checkFinal(t, readCounts(t, addr, "counts-out", ref, kgo.ReadCommitted(), 20*time.Second), ref)
		if n := len(a.Stats().Tasks); n != 8 {
			t.Fatalf("a alone has %d tasks, want 8", n)
		}

		// Lines go on being written while b joins.
		var refMu sync.Mutex
		done := make(chan struct{})
		go func() {
			defer close(done)
			for i := range batches {
				ls, rr := lines(int64(301+i), per)
				produceLines(t, prod, "lines", ls)
				refMu.Lock()
				addRef(ref, rr)
				refMu.Unlock()
				time.Sleep(50 * time.Millisecond)
			}
		}()
		time.Sleep(200 * time.Millisecond)
		var restoreMu sync.Mutex
		restored := map[string]RestoreProgress{} // of b, last report per task
		cfg.StateDir, cfg.InstanceID = t.TempDir(), "b"
		cfg.OnRestore = func(p RestoreProgress) {
			restoreMu.Lock()
			defer restoreMu.Unlock()
			if p.Store == "counts" {
				restored[p.Task] = p
			}
		}
		b := startApp(t, wordCount("lines", "counts-out"), cfg)
		<-done

		// b took half the tasks, a kept the other half, and b restored
		// the stores of those it took. A task shows in Stats as soon as
		// it is created, before its restore begins: wait for the
		// restores' last reports.
		var ta, tb []TaskStats
		deadline := time.Now().Add(20 * time.Second)
		for {
			ta, tb = a.Stats().Tasks, b.Stats().Tasks
			if len(ta) == 4 && len(tb) == 4 && restoresDone(tb, &restoreMu, restored) {
				break
			}
			if time.Now().After(deadline) {
				restoreMu.Lock()
				t.Fatalf("tasks not shared half and half, or b's stores not restored: a %v, b %v, b's restores %+v", ta, tb, restored)
			}
			time.Sleep(50 * time.Millisecond)
		}
		seen := map[string]bool{}
		for _, x := range append(append([]TaskStats{}, ta...), tb...) {
			if seen[x.Task] {
				t.Fatalf("task %s on both instances: a %v, b %v", x.Task, ta, tb)
			}
			seen[x.Task] = true
		}
		var stateful []string
		for _, x := range tb {
			if strings.HasPrefix(x.Task, "1_") {
				stateful = append(stateful, x.Task)
				if x.Restored == 0 {
					t.Errorf("b took task %s without restoring its store: %+v", x.Task, x)
				}
			}
		}
		if len(stateful) == 0 {
			t.Errorf("b took no task with a store: %v", tb)
		}
		restoreMu.Lock()
		for _, id := range stateful {
			if p := restored[id]; !p.Done || p.Total == 0 || p.Restored == 0 {
				t.Errorf("b's restore of task %s reported %+v, want done with records", id, p)
			}
		}
		restoreMu.Unlock()

		refMu.Lock()
		defer refMu.Unlock()
		got := readCounts(t, addr, "counts-out", ref, kgo.ReadCommitted(), 20*time.Second)
		checkFinal(t, got, ref)
		for w, u := range got {
			for i, v := range u {
				if v != int64(i+1) {
					t.Errorf("%s: update %d is %d after %s: want 1..%d, each once", w, i, v, fmt.Sprint(u[max(0, i-3):i]), ref[w])
					break
				}
			}
		}
		checkStore(t, ref, a, b)
	})
}

// restoresDone says whether every task with a store (subtopology 1) of
// ts has reported the end of its restore.
func restoresDone(ts []TaskStats, mu *sync.Mutex, reports map[string]RestoreProgress) bool {
	mu.Lock()
	defer mu.Unlock()
	for _, x := range ts {
		if strings.HasPrefix(x.Task, "1_") && !reports[x.Task].Done {
			return false
		}
	}
	return true
}
