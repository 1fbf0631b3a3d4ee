package streams

import (
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

// TestRestoreBetweenPolls: instance A counts 3,000 lines (its changelog
// written in small batches); B joins with an empty state directory and
// restores the tasks it is given slowly (small fetches, its OnRestore
// taking 250 ms a report: about 20 reports, 5 s). While B restores, C joins: the rebalance
// completes, C gets tasks, before B's restore is over (B still restoring,
// or its restore cut short by the task moving); a query of B's restoring
// store is refused meanwhile (ErrStoreRestoring). Restoring before polls,
// B's loop held the rebalance back (BlockRebalanceOnPoll) until its
// restore ended, and C got nothing until then. The counts end at the
// reference on every instance.
func TestRestoreBetweenPolls(t *testing.T) {
	onClusters(t, func(t *testing.T, addr string) {
		createTopic(t, addr, "lines", 2, nil)
		createTopic(t, addr, "counts-out", 2, nil)
		ls, ref := lines(11, 3000)
		produceLines(t, newClient(t, addr), "lines", ls)
		topo := wordCount("lines", "counts-out")
		base := Config{ApplicationID: "rbp", Brokers: []string{addr}, CommitInterval: 200 * time.Millisecond}

		cfgA := base
		cfgA.StateDir = t.TempDir()
		cfgA.ClientOpts = []kgo.Opt{kgo.ProducerBatchMaxBytes(2048)}
		a := startApp(t, topo, cfgA)
		checkFinal(t, readCounts(t, addr, "counts-out", ref, kgo.ReadUncommitted(), 60*time.Second), ref)

		var mu sync.Mutex
		started, done := map[string]bool{}, map[string]bool{}
		firstReport := make(chan struct{})
		var once sync.Once
		cfgB := base
		cfgB.StateDir = t.TempDir()
		cfgB.ClientOpts = []kgo.Opt{kgo.FetchMaxPartitionBytes(4096)}
		cfgB.OnRestore = func(p RestoreProgress) {
			mu.Lock()
			k := p.Topic + "/" + p.Task
			started[k] = true
			if p.Done {
				done[k] = true
			}
			mu.Unlock()
			once.Do(func() { close(firstReport) })
			time.Sleep(250 * time.Millisecond)
		}
		b := startApp(t, topo, cfgB)
		select {
		case <-firstReport:
		case <-time.After(30 * time.Second):
			t.Fatal("B reported no restore in 30 s")
		}

		// A query of a restoring task's store is refused, not answered
		// from the part restored so far.
		q, err := Query[string, int64](b, "counts")
		if err != nil {
			t.Fatal(err)
		}
		refused := 0
		for w := range ref {
			if _, _, err := q.Get(w); errors.Is(err, ErrStoreRestoring) {
				refused++
			}
		}
		if refused == 0 {
			t.Errorf("no query of B refused with ErrStoreRestoring during its restore (%d words)", len(ref))
		}

		cfgC := base
		cfgC.StateDir = t.TempDir()
		c := startApp(t, topo, cfgC)
		deadline := time.Now().Add(60 * time.Second)
		for len(c.Stats().Tasks) == 0 {
			if time.Now().After(deadline) {
				t.Fatal("C got no task in 60 s")
			}
			time.Sleep(10 * time.Millisecond)
		}
		restoring := false
		for _, ts := range b.Stats().Tasks {
			restoring = restoring || ts.Restoring
		}
		mu.Lock()
		unfinished := len(done) < len(started)
		nDone, nStarted := len(done), len(started)
		mu.Unlock()
		t.Logf("C got tasks: B restoring %v, %d of %d changelog partitions done", restoring, nDone, nStarted)
		if !restoring && !unfinished {
			t.Errorf("C got its tasks only once B's restore was over (%d of %d changelog partitions done): the restore held the rebalance back", nDone, nStarted)
		}

		more, ref2 := lines(12, 200)
		produceLines(t, newClient(t, addr), "lines", more)
		addRef(ref, ref2)
		checkFinal(t, readCounts(t, addr, "counts-out", ref, kgo.ReadUncommitted(), 60*time.Second), ref)
		checkStore(t, ref, a, b, c)
	})
}
