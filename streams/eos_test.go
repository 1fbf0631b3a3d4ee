package streams

import (
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

// TestExactlyOnceWordCount: two exactly-once instances count words while
// the input is written, and are killed (stopped without committing or
// ending their open transaction) and restarted with the same instance id
// several times, one of them with its state directory wiped. A
// read_committed consumer of the output sees, for each word, the updates
// 1, 2, ..., n exactly once each, n the reference count: no update lost,
// none duplicated by the replays that follow the kills.
func TestExactlyOnceWordCount(t *testing.T) {
	onClusters(t, func(t *testing.T, addr string) {
		createTopic(t, addr, "lines", 4, nil)
		createTopic(t, addr, "counts-out", 4, nil)
		rounds, per, kills := 12, 60, 4
		if testing.Short() {
			rounds, per, kills = 6, 40, 2
		}
		states := []string{t.TempDir(), t.TempDir()}
		cfg := func(i int) Config {
			return Config{ApplicationID: "eos", Brokers: []string{addr}, StateDir: states[i],
				Guarantee: ExactlyOnce, InstanceID: []string{"a", "b"}[i],
				// Long enough that a kill finds processed records not yet
				// committed, which at least once would process again.
				CommitInterval: 400 * time.Millisecond}
		}
		topo := wordCount("lines", "counts-out")
		apps := []*App{startApp(t, topo, cfg(0)), startApp(t, topo, cfg(1))}
		var mu sync.Mutex
		t.Cleanup(func() {
			mu.Lock()
			defer mu.Unlock()
			for _, a := range apps {
				_ = a.Close()
			}
		})
		prod := newClient(t, addr)
		ref := map[string]int64{}
		var killed int
		for r := range rounds {
			ls, rr := lines(int64(100+r), per)
			produceLines(t, prod, "lines", ls)
			addRef(ref, rr)
			time.Sleep(200 * time.Millisecond)
			if r%(rounds/kills) == 1 && killed < kills {
				i := killed % 2
				mu.Lock()
				apps[i].kill()
				mu.Unlock()
				if killed == 2 {
					_ = removeAll(states[i])
				}
				time.Sleep(100 * time.Millisecond)
				a := startApp(t, topo, cfg(i))
				mu.Lock()
				apps[i] = a
				mu.Unlock()
				killed++
			}
		}
		got := readCounts(t, addr, "counts-out", ref, kgo.ReadCommitted(), 30*time.Second)
		checkFinal(t, got, ref)
		for w, u := range got {
			for i, v := range u {
				if v != int64(i+1) {
					t.Errorf("%s: updates %v: want 1..%d, each once", w, u, ref[w])
					break
				}
			}
		}
	})
}
