package streams

import (
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

// waitWords waits until the tasks of subtopology 1 (the counting one)
// processed words records.
func waitWords(t *testing.T, a *App, words int64) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for {
		var n int64
		for _, ts := range a.Stats().Tasks {
			if strings.HasPrefix(ts.Task, "1_") {
				n += ts.Processed
			}
		}
		if n >= words {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d of %d words processed", n, words)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func total(ref map[string]int64) (n int64) {
	for _, v := range ref {
		n += v
	}
	return n
}

// TestRecordCache: with the record cache on (KIP-63), each word, counted
// about 150 times between two commits, reaches the output topic and the
// store's changelog once per commit with its latest count; a restarted
// instance reads its counts back through the cache from its store and
// goes on from them. With a cache too small for the 40 words, evictions forward
// intermediate counts: each word's updates still only grow and end at
// the reference. With the cache off (Config's zero value) every update
// is forwarded, which TestWordCount checks.
func TestRecordCache(t *testing.T) {
	onClusters(t, func(t *testing.T, addr string) {
		createTopic(t, addr, "lines", 4, nil)
		createTopic(t, addr, "counts-out", 4, nil)
		cl := newClient(t, addr)
		state := t.TempDir()
		cfg := Config{ApplicationID: "wc", Brokers: []string{addr}, StateDir: state,
			CommitInterval: time.Hour, CacheMaxBytes: DefaultCacheMaxBytes}

		// Phase 1: one commit (Close), everything cached until then.
		ls1, ref1 := lines(7, 2000)
		produceLines(t, cl, "lines", ls1)
		a := startApp(t, wordCount("lines", "counts-out"), cfg)
		waitWords(t, a, total(ref1))
		if err := a.Close(); err != nil {
			t.Fatal(err)
		}
		for _, topic := range []string{"counts-out", "wc-counts-changelog"} {
			got := readCounts(t, addr, topic, ref1, kgo.ReadUncommitted(), 10*time.Second)
			checkFinal(t, got, ref1)
			for w, u := range got {
				if len(u) != 1 {
					t.Errorf("%s: %s: updates %v for %d occurrences in one commit, want one", topic, w, u, ref1[w])
				}
			}
		}

		// Phase 2: a cache of a few entries (the counts store's keys are
		// 3 bytes, values 8): least recently used words are evicted,
		// written and forwarded between commits.
		ls2, ref2 := lines(8, 2000)
		produceLines(t, cl, "lines", ls2)
		ref := map[string]int64{}
		addRef(ref, ref1)
		addRef(ref, ref2)
		cfg.CacheMaxBytes = 4 * (3 + 8 + cacheEntryOverhead)
		a = startApp(t, wordCount("lines", "counts-out"), cfg)
		waitWords(t, a, total(ref2))
		if err := a.Close(); err != nil {
			t.Fatal(err)
		}
		got := readCounts(t, addr, "counts-out", ref, kgo.ReadUncommitted(), 10*time.Second)
		checkFinal(t, got, ref)
		var updates, evicted int
		for w, u := range got {
			if u[0] != ref1[w] {
				t.Errorf("%s: first update %d, want %d (phase 1's)", w, u[0], ref1[w])
			}
			for i := 1; i < len(u); i++ {
				if u[i] <= u[i-1] {
					t.Errorf("%s: updates %v not strictly increasing", w, u)
					break
				}
			}
			updates += len(u) - 1
			if len(u) > 2 {
				evicted++
			}
		}
		if words := int(total(ref2)); updates >= words || evicted == 0 {
			t.Errorf("phase 2: %d updates for %d words, %d words updated more than once: want fewer updates than words, and evictions", updates, words, evicted)
		}
		checkFinal(t, readCounts(t, addr, "wc-counts-changelog", ref, kgo.ReadUncommitted(), 10*time.Second), ref)
	})
}

// TestRecordCacheExactlyOnce: exactly once, the cache is flushed into
// each transaction before it commits: a read_committed consumer sees
// each word's counts only grow, end at the reference, and fewer updates
// than words (merged between commits).
func TestRecordCacheExactlyOnce(t *testing.T) {
	onClusters(t, func(t *testing.T, addr string) {
		createTopic(t, addr, "lines", 4, nil)
		createTopic(t, addr, "counts-out", 4, nil)
		ls, ref := lines(9, 2000)
		produceLines(t, newClient(t, addr), "lines", ls)
		a := startApp(t, wordCount("lines", "counts-out"), Config{ApplicationID: "wc", Brokers: []string{addr},
			StateDir: t.TempDir(), Guarantee: ExactlyOnce, CommitInterval: 300 * time.Millisecond, CacheMaxBytes: DefaultCacheMaxBytes})
		got := readCounts(t, addr, "counts-out", ref, kgo.ReadCommitted(), 20*time.Second)
		checkFinal(t, got, ref)
		updates := 0
		for w, u := range got {
			updates += len(u)
			for i := 1; i < len(u); i++ {
				if u[i] <= u[i-1] {
					t.Errorf("%s: updates %v not strictly increasing", w, u)
					break
				}
			}
		}
		if words := int(total(ref)); updates >= words {
			t.Errorf("%d updates for %d words: the cache merged none", updates, words)
		}
		checkStore(t, ref, a)
	})
}
